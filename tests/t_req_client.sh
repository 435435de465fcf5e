#!/usr/bin/env bash
# t_req_client.sh - request-level tracing against the client that sent the
# requests. The real OpenAI client (npm `openai`) sends 16 concurrent
# streaming requests of different prompts and lengths to `infer --http`
# (arriving 20 ms apart, so that they overlap without the client's own
# per-request set-up, ~0.6 ms of JavaScript each, piling into every TTFT),
# with a block pool small enough to force preemptions, while `record -p`
# (attached before the traffic, coarse level) watches. Per request:
#   - the tracer's TTFT (queued .. first token) is never above the client's
#     (to its first chunk), allowing 0.5 ms of clock slop, and the median
#     of the differences is below 15 ms and below half the median queue
#     time (why: at the check);
#   - its inter-token gaps agree with the client's inter-chunk gaps the same
#     way (median |difference| <= 5 ms);
#   - generated tokens equal the client's usage and the engine's /stats;
# preemptions and finish reasons equal the engine's /stats; the summary's
# TTFT/ITL/queue/e2e percentiles and goodput are present and consistent.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_bpf
need_node
need_cmd jq jq
need_cmd python3 python3
for b in "$SPANTRACE" "$MKMODEL"; do [ -x "$b" ] || fail "no $b (build first)"; done
if [ ! -r "$DEMO_MODEL" ]; then
	mkdir -p "$(dirname "$DEMO_MODEL")"
	"$MKMODEL" "$DEMO_MODEL" --shape stories15M --seed 1 --tokenizer "$DEMO_TOK" >/dev/null ||
		fail "cannot make $DEMO_MODEL"
fi

N=16
# 12 blocks of 16 positions: the overlapping requests of up to ~100 positions cannot all
# stay, so the scheduler preempts.
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --max-seqs 16 --kv-blocks 12 --block-size 16 \
	--stats "$TMP/engine_stats.json"
"$SPANTRACE" record -q -p "$EPID" --level coarse --slo-ttft-ms 1000 --slo-itl-ms 50 \
	--summary "$TMP/summary.json" -o "$TMP/run.jsonl" 2>"$TMP/record.err" &
rec=$!
wait_for grep -qs '"type":"session"' "$TMP/run.jsonl" || fail "record did not attach: $(cat "$TMP/record.err")"

# Text prompts of 1 to 16 words; the warm-up requests ask for 2 tokens.
{
	printf '{"concurrent": true, "stagger_ms": 20, "warmup": 3, "warmup_prompt": "Hi", "requests": ['
	for i in $(seq 0 $((N - 1))); do
		[ "$i" -gt 0 ] && printf ','
		printf '{"prompt": "%s", "max_tokens": %d, "temperature": 0, "stream": true}' \
			"$(for w in $(seq 0 "$i"); do printf 'word%d ' "$w"; done)" $((24 + 5 * i))
	done
	printf ']}\n'
} >"$TMP/spec.json"
client "$TMP/spec.json" "$TMP/client.jsonl"
assert_eq "client results" "$N" "$(jq -s 'map(select(.usage != null)) | length' "$TMP/client.jsonl")"
curl -s "$BASE/stats" >"$TMP/stats.json"
stop_engine
wait "$rec" || fail "record exited $?: $(cat "$TMP/record.err")"

# the measured requests: those queued asking for more than the warm-ups' 2 tokens
jq -r 'select(.type == "req_state" and .state == "queued" and .max_tokens > 2) | .req' "$TMP/run.jsonl" |
	sort -n >"$TMP/measured"
jq -c --slurpfile m <(jq -s . "$TMP/measured") 'select(.type == "request" and (.req as $r | $m[0] | index($r)))' \
	"$TMP/run.jsonl" >"$TMP/requests.jsonl"
jq -c 'select(.type == "emit")' "$TMP/run.jsonl" >"$TMP/emits.jsonl"
assert_eq "request records" "$N" "$(wc -l <"$TMP/requests.jsonl")"

# Match requests by their token count and order of arrival: each client
# request asked for a different max_tokens, so usage.completion_tokens
# (which the engine reports) pairs it with the tracer's generated_tokens.
off=$(jq -r 'select(.type == "session") | .start_wall_ns - .start_mono_ns' "$TMP/run.jsonl")
python3 - "$TMP/client.jsonl" "$TMP/requests.jsonl" "$TMP/emits.jsonl" "$TMP/stats.json" "$off" <<'PY' || fail "client and tracer disagree"
import json, sys, statistics
client = [json.loads(l) for l in open(sys.argv[1])]
reqs = [json.loads(l) for l in open(sys.argv[2])]
emits = {}
for l in open(sys.argv[3]):
    e = json.loads(l)
    emits.setdefault(e["req"], []).append(e)
stats = json.load(open(sys.argv[4]))
bad = 0
by_tokens = {}
for r in reqs:
    by_tokens.setdefault(r["generated_tokens"], []).append(r)
ttft_d, gap_d, before, after, queue_d = [], [], [], [], []
for c in client:
    n = c["usage"]["completion_tokens"]
    cand = by_tokens.get(n)
    if not cand:
        print(f"no traced request with {n} tokens"); bad += 1; continue
    r = cand.pop(0)
    t_ttft = r["ttft_ns"] / 1e6
    if t_ttft > c["ttft_ms"] + 0.5:
        print(f"request of {n} tokens: tracer TTFT {t_ttft:.3f} ms > client {c['ttft_ms']:.3f} ms"); bad += 1
    ttft_d.append(c["ttft_ms"] - t_ttft)
    queue_d.append(r["queue_ns"] / 1e6)
    off = int(sys.argv[5])
    before.append((r["ts_ns"] + off) / 1e6 - c["sent_epoch_ms"])
    after.append(c["first_chunk_epoch_ms"] - (r["ts_ns"] + r["ttft_ns"] + off) / 1e6)
    es = sorted(emits.get(r["req"], []), key=lambda e: e["pos"])
    # A chunk carries the tokens made since the last one (several when the
    # connection falls behind): compare each gap between two chunks that carry
    # tokens with the tracer's gap between their last tokens.
    ts = [e["ts_ns"] for e in es]
    ct = c["chunk_tokens"]
    ends = [sum(ct[:k + 1]) for k in range(len(ct))]
    for k in range(1, len(ct)):
        if ct[k] and ct[k - 1] and ends[k] <= len(ts):
            gap_d.append(abs((ts[ends[k] - 1] - ts[ends[k - 1] - 1]) / 1e6 - c["gaps_ms"][k - 1]))
    if len(es) != n:
        print(f"request of {n} tokens: {len(es)} emit records"); bad += 1
med_ttft = statistics.median(ttft_d)
print(f"of which: client send .. queued median {statistics.median(before):.3f} ms, "
      f"first token .. client's first chunk median {statistics.median(after):.3f} ms (wall clocks)")
med_gap = statistics.median(gap_d)
queued = [r["queue_ns"] / 1e6 for r in reqs]
print(f"queue time (queued .. admitted): median {statistics.median(queued):.3f} ms, max {max(queued):.3f}")
print(f"TTFT client - tracer: median {med_ttft:.3f} ms, min {min(ttft_d):.3f}, max {max(ttft_d):.3f}")
print(f"gaps |client - tracer|: median {med_gap:.3f} ms over {len(gap_d)} gaps")
# The difference is the client's and the HTTP stack's own time (send ..
# queued, first token .. chunk: printed above). On 2 vCPUs shared with the
# engine, the tracer and the rest of the suite its median was 2.8-4.2 ms
# idle and 8 ms in CI, so 5 ms did not hold: below 15 ms. What the check
# must catch is a tracer that times from admission instead of queueing: it
# would be off by the queue time. The queue's median was 26-55 ms on a Zen
# 3 but 2.2-3.4 ms on a Zen 5, under the client's own 2.1-3.3, so half the
# median queue time is the bound only for the requests that queued 10 ms or
# more (the pool makes some wait: 357 ms at most on the Zen 5).
if med_ttft > 15.0: print("median TTFT difference above 15 ms"); bad += 1
long = [(d, q) for d, q in zip(ttft_d, queue_d) if q >= 10.0]
if long:
    med_long, half_q = statistics.median(d for d, _ in long), statistics.median(q for _, q in long) / 2
    print(f"{len(long)} requests queued 10 ms or more: TTFT client - tracer median {med_long:.3f} ms, "
          f"half their median queue {half_q:.3f}")
    if med_long > min(15.0, half_q): print("their TTFT difference is the queue's"); bad += 1
else:
    print("no request queued 10 ms or more: the difference cannot tell queueing from admission here")
if med_gap > 5: print("median gap difference above 5 ms"); bad += 1
sys.exit(1 if bad else 0)
PY
ok "$(python3 -c 'print("TTFT and gaps agree")')"

sv=$TMP/stats.json
# Per request id, the tracer's tokens and preemptions are the engine's own.
jq -c --slurpfile m <(jq -s . "$TMP/measured") \
	'.serving.per_request[] | select(.req as $r | $m[0] | index($r)) |
	 {req, generated_tokens, preemptions, finish_reason: .reason}' "$sv" |
	sort >"$TMP/engine_reqs"
jq -c '{req, generated_tokens, preemptions, finish_reason}' "$TMP/requests.jsonl" | sort >"$TMP/traced_reqs"
diff "$TMP/engine_reqs" "$TMP/traced_reqs" >"$TMP/req_diff" || fail "per-request counts differ: $(head -5 "$TMP/req_diff")"
ok "per request: generated tokens, preemptions and finish reason = the engine's ($N requests)"
assert_eq "generated tokens = the client's usage" "$(jq -s 'map(.usage.completion_tokens) | add' "$TMP/client.jsonl")" \
	"$(jq -s 'map(.generated_tokens) | add' "$TMP/requests.jsonl")"
assert_le "some preemptions (else this proves little)" 1 "$(jq '.serving.preempted' "$sv")"
# The summary covers every request, the warm-ups too.
S=$TMP/summary.json
jq -c 'select(.type == "request")' "$TMP/run.jsonl" >"$TMP/all_requests.jsonl"
all=$(wc -l <"$TMP/all_requests.jsonl")
assert_eq "summary TTFT count" "$all" "$(jq .ttft.count "$S")"
assert_eq "summary ITL count = gaps" "$(jq -s 'map(.itl_count) | add' "$TMP/all_requests.jsonl")" "$(jq .itl.count "$S")"
assert_eq "summary queue-time count" "$all" "$(jq .queue_time.count "$S")"
assert_eq "summary e2e count" "$all" "$(jq .e2e.count "$S")"
assert_eq "summary preemptions" "$(jq '.serving.preempted' "$sv")" "$(jq .preemptions "$S")"
for d in ttft itl e2e queue_time; do
	read -r p50 p99 max <<<"$(jq -r ".$d | \"\(.p50_ns) \(.p99_ns) \(.max_ns)\"" "$S")"
	# a queue time may round to 0 in the histogram; the others cannot be 0
	[ $d = queue_time ] || assert_pos "$d p50 (ns)" "$p50"
	assert_between "$d p99 within [p50, max]" "$p50" "$p99" "$max"
done
met=$(jq -s --argjson t 1000e6 --argjson g 50e6 \
	'map(select(.ttft_ns <= $t and (.itl_count == 0 or .decode_ns / .itl_count <= $g))) | length' \
	"$TMP/all_requests.jsonl")
assert_eq "goodput: requests" "$all" "$(jq .goodput.requests "$S")"
assert_eq "goodput: requests meeting both SLOs" "$met" "$(jq .goodput.met "$S")"
assert_eq "no orphaned request probes" 0 "$(jq .req_orphans "$S")"
