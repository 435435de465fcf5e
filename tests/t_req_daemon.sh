#!/usr/bin/env bash
# t_req_daemon.sh - request-level metrics from the daemon, attached by pid in
# the middle of traffic, against the engine's own numbers:
#   - live attach: the requests queued after the attach are all timed (the
#     e2e/TTFT histograms count exactly them); the requests in flight at the
#     attach are counted as orphans, never as bad data;
#   - at a scrape, spantrace_requests_running/_waiting equal the engine's
#     /stats read just before and after (when those two agree, lifecycle
#     event count included);
#   - request_success_total by finish_reason equals the engine's /stats
#     (finishes are counted even for requests timed from before the
#     attach); token and preemption counters cover at least the requests
#     after it; spantrace_iteration_tokens counts every step;
#   - the vLLM-equivalent families exist and `promtool check metrics` passes;
#   - nothing was streamed per token (tail mode): events fired are 0.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_node
need_cmd curl curl  # before need_daemon_build, which skips without them
need_cmd jq jq
need_daemon_build
need_cmd promtool prometheus
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"

start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --max-seqs 6 --kv-blocks 16 --block-size 16
# A: long requests in flight when the daemon attaches.
# Enough of them that some outlast the daemon's attach (~2.5 s here, most of it the verifier's) on a fast
# machine: 3 all ended during it here, and left no orphan to count.
NA=8 NREQ=$((8 + 12))
stream_spec $NA 200 7 0 >"$TMP/a.json"
node "$NODE_DIR/client.js" "$BASE" run "$TMP/a.json" >"$TMP/a.out" 2>"$TMP/a.err" &
ca=$!
wait_for health_ge running 1 || fail "no request running before the attach"
# finished_now: requests the engine has finished. One of A's may end while the
# daemon attaches on a loaded machine: it is then not the daemon's to see.
finished_now() { curl -s "$BASE/stats" | jq '[.serving.finished // {} | .[]] | add // 0'; }
f0=$(finished_now)
start_daemon --level coarse -p "$EPID" --interval 0.1
f1=$(finished_now)
need_num "requests finished around the attach (/stats)" "$f0" "$f1"
[ "$f0" = "$f1" ] || ok "$((f1 - f0)) of A's requests finished during the attach"
# B: requests queued after the attach, with a pool small enough to preempt.
stream_spec 12 60 7 10 >"$TMP/b.json"
node "$NODE_DIR/client.js" "$BASE" run "$TMP/b.json" >"$TMP/b.out" 2>"$TMP/b.err" &
cb=$!

# Gauges at a scrape: /stats, /metrics, /stats; where the engine's two
# readings agree, the daemon's must equal them. The readings carry the count
# of lifecycle events too: the gauges can change and change back (admitted,
# then preempted) between two reads that show the same running/waiting.
gauges_now() {
	curl -s "$BASE/stats" | jq -c '.serving // {} | [.running, .waiting,
		(.queued // 0) + (.admitted // 0) + (.preempted // 0) + ([(.finished // {})[]] | add // 0)]'
}
stable=0 busy=0 unknown=0
gauge() { msum "$TMP/$1.txt" "spantrace_requests_$2" "pid=\"$EPID\""; }
# sample_gauges PID: scrapes while client PID runs (into gauges.txt, so the
# last full scrape in m.txt stays the counters' source)
sample_gauges() {
	while kill -0 "$1" 2>/dev/null; do
		h1=$(gauges_now)
		metrics >"$TMP/gauges.txt"
		h2=$(gauges_now)
		[ "$h1" = "$h2" ] || continue
		h1=$(echo "$h1" | jq -c '.[0:2]')
		# before its first lifecycle probe the daemon does not know them: no series
		grep -q "^spantrace_requests_running{pid=\"$EPID\"" "$TMP/gauges.txt" || { unknown=$((unknown + 1)); continue; }
		stable=$((stable + 1))
		[ "$h1" != "[0,0]" ] && busy=$((busy + 1))
		assert_eq "running and waiting at a scrape" "$h1" "[$(gauge gauges running),$(gauge gauges waiting)]" >/dev/null
	done
}
sample_gauges $cb
wait $ca || fail "client A: $(cat "$TMP/a.err")"
wait $cb || fail "client B: $(cat "$TMP/b.err")"

curl -s "$BASE/stats" >"$TMP/stats.json"
b_reqs=$(jq -s 'map(select(.usage)) | length' "$TMP/b.out")
assert_eq "requests after the attach" 12 "$b_reqs"
# all requests, less those finished before the attach (f0 .. f1 of them)
seen() { msum "$TMP/m.txt" spantrace_request_success_total "pid=\"$EPID\""; }
all_done() { metrics >"$TMP/m.txt" && [ "$(seen)" -ge $((NREQ - f1)) ]; }
wait_for all_done || fail "the daemon never saw $((NREQ - f1)) requests finish: $(grep success "$TMP/m.txt")"
assert_le "finishes seen, at most those after the attach began" "$(seen)" $((NREQ - f0))
# The histograms come from the last interval's snapshot (0.1 s); the
# serving counters are read at the scrape: wait for the snapshot to hold them.
m=$TMP/m.txt P="pid=\"$EPID\""
snapshot() { metrics >"$m" && [ "$(msum "$m" spantrace_e2e_request_latency_seconds_count "$P")" = "$b_reqs" ]; }
wait_for snapshot || true   # the assertions below say what is missing
assert_eq "e2e observations = the requests queued after the attach" "$b_reqs" \
	"$(msum "$m" spantrace_e2e_request_latency_seconds_count "$P")"
assert_eq "TTFT observations" "$b_reqs" "$(msum "$m" spantrace_time_to_first_token_seconds_count "$P")"
assert_eq "queue-time observations" "$b_reqs" "$(msum "$m" spantrace_request_queue_time_seconds_count "$P")"
b_tokens=$(jq -s 'map(.usage.completion_tokens) | add' "$TMP/b.out")
assert_eq "inter-token gaps: one per token after the first" "$((b_tokens - b_reqs))" \
	"$(msum "$m" spantrace_inter_token_latency_seconds_count "$P")"
orphans=$(msum "$m" spantrace_request_orphans_total)
assert_le "requests in flight at the attach: counted as orphans" 1 "$orphans"
# by reason: the engine's, less the A requests that ended before the attach
# (all of A's end by length)
early=$((NREQ - $(seen)))
assert_eq "finished, by reason = the engine's (all $NREQ, less $early before the attach)" \
	"$(jq -c --argjson e "$early" '.serving.finished | [.stop, .length - $e, .abort, .error]' "$TMP/stats.json")" \
	"[$(for r in stop length abort error; do msum "$m" spantrace_request_success_total "finish_reason=\"$r\"" "$P"; done | paste -sd,)]"
# The engine's per-request counts cover all of them; the tracer's token and
# preemption counters start at the attach.
preempt_b=$(jq --argjson na $NA '[.serving.per_request[]] | sort_by(.req) | .[$na:] | map(.preemptions) | add' "$TMP/stats.json")
assert_le "preemptions after the attach (else this proves little)" 1 "$(msum "$m" spantrace_preemptions_total "$P")"
assert_le "preemptions counted <= the engine's" "$(msum "$m" spantrace_preemptions_total "$P")" \
	"$(jq .serving.preempted "$TMP/stats.json")"
assert_le "preemptions counted >= those of the requests after the attach" "$preempt_b" \
	"$(msum "$m" spantrace_preemptions_total "$P")"
assert_le "generation tokens counted >= B's" "$b_tokens" "$(msum "$m" spantrace_generation_tokens_total "$P")"
assert_le "prompt tokens counted >= B's" "$(jq -s 'map(.usage.prompt_tokens) | add' "$TMP/b.out")" \
	"$(msum "$m" spantrace_prompt_tokens_total "$P")"
steps=$(msum "$m" spantrace_steps_total "$P")
assert_eq "iteration_tokens observations = steps" "$steps" "$(msum "$m" spantrace_iteration_tokens_count "$P")"
assert_le "steps seen" 10 "$steps"
# (msum reads a missing series as 0: the series must be there)
grep -q '^spantrace_events_fired_total{.*event="emit"' "$m" || fail "no spantrace_events_fired_total{event=\"emit\"}"
assert_eq "nothing streamed (tail mode, no threshold crossed by a token)" 0 \
	"$(msum "$m" spantrace_events_fired_total 'event="emit"')"
for f in time_to_first_token_seconds inter_token_latency_seconds e2e_request_latency_seconds \
	request_queue_time_seconds request_prefill_time_seconds request_decode_time_seconds iteration_tokens; do
	grep -q "^# TYPE spantrace_$f histogram" "$m" || fail "no histogram spantrace_$f"
done
for f in requests_running requests_waiting kv_cache_usage_ratio; do
	grep -q "^# TYPE spantrace_$f gauge" "$m" || fail "no gauge spantrace_$f"
done
for f in prompt_tokens_total generation_tokens_total request_success_total preemptions_total; do
	grep -q "^# TYPE spantrace_$f counter" "$m" || fail "no counter spantrace_$f"
done
ok "the vLLM-equivalent families are all there"
out=$(promtool check metrics <"$m" 2>&1) || fail "promtool check metrics: $out"
ok "promtool check metrics accepts them"
# C, after every count above: one long request alone (up to 5 in turn), so
# the gauges hold still between scrapes. B's churn (admissions, preemptions) left too few
# steady moments on a fast machine (0-1 busy scrapes here).
stream_spec 1 230 0 0 >"$TMP/c.json"
for round in 1 2 3 4 5; do
	[ "$busy" -ge 3 ] && break
	node "$NODE_DIR/client.js" "$BASE" run "$TMP/c.json" >"$TMP/c.out" 2>"$TMP/c.err" &
	cc=$!
	sample_gauges $cc
	wait $cc || fail "client C: $(cat "$TMP/c.err")"
done
ok "gauges equal the engine's at $stable scrapes ($busy with requests in flight; $unknown before the first probe)"
assert_le "scrapes with requests in flight" 3 "$busy"
stop_daemon
stop_engine
