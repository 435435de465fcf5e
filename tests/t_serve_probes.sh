#!/usr/bin/env bash
# The serving probes seen from outside: bpftrace, attached by pid to a busy
# HTTP engine (a small KV pool, so there are preemptions, and a cancelled
# stream), counts every serving probe, and the counts equal the engine's own
# /stats (the counts the follow-up tracer is checked against). It also keeps
# running/waiting gauges from the lifecycle events alone, per request state,
# and they equal the gauges each probe carries at every hit; each request's
# emitted tokens equal its per_request count; every step_end's begin time
# is in the past; nobody emits a token before being admitted.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_bpf
need_node
need_cmd bpftrace bpftrace
need_cmd jq jq
need_cmd curl curl
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"
lib=$(cd "$BUILD" && pwd)/libinfer.so

start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --max-seqs 4 --kv-blocks 10 --block-size 8
# Counting starts at the first request queued after a canary was seen whole
# (req_finished is attached last), so every counted event is after the attach.
bpftrace -p "$EPID" -e "
usdt:$lib:infer:req_queued /@on || @armed/ { @on = 1; @q = count(); @st[arg0] = 1; @w++;
	if (arg3 != @r || arg4 != @w) { @gauge_bad = count(); } }
usdt:$lib:infer:req_admitted /@on/ { @a = count(); @st[arg0] = 2; @w--; @r++;
	if (arg3 != @r || arg4 != @w) { @gauge_bad = count(); } }
usdt:$lib:infer:req_preempted /@on/ { @p = count(); @st[arg0] = 1; @r--; @w++;
	if (arg3 != @r || arg4 != @w) { @gauge_bad = count(); } }
usdt:$lib:infer:step_begin /@on/ { @sb = count(); }
usdt:$lib:infer:step_end /@on/ { @se = count();
	if (arg1 > nsecs) { @span_bad = count(); } }
usdt:$lib:infer:token_emit /@on/ { @t = count(); @gen[arg0] = count();
	if (@st[arg0] != 2) { @emit_bad = count(); } }
usdt:$lib:infer:kv_blocks /@on/ { @kv = count(); }
usdt:$lib:infer:req_finished /@on/ { @f[arg1] = count();
	if (@st[arg0] == 2) { @r--; } else { @w--; }
	delete(@st[arg0]);
	if (arg4 != @r || arg5 != @w) { @gauge_bad = count(); } }
usdt:$lib:infer:req_finished /!@on && !@armed/ { @armed = 1; printf(\"armed\\n\"); }" \
	>"$TMP/bt.out" 2>"$TMP/bt.err" &
bt=$!
wait_for grep -q Attaching "$TMP/bt.out" "$TMP/bt.err" || fail "bpftrace did not attach: $(cat "$TMP/bt.err")"
echo '{"requests":[{"prompt":"x","max_tokens":1,"temperature":0}]}' >"$TMP/canary.json"
armed() { client "$TMP/canary.json" "$TMP/canary"; grep -q '^armed' "$TMP/bt.out"; }
wait_for armed || fail "bpftrace never saw a canary: $(cat "$TMP/bt.err")"
curl -s "$BASE/stats" >"$TMP/s0.json"

cat >"$TMP/load.json" <<'J'
{"concurrent": true, "requests": [
 {"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stream": true},
 {"prompt": "The cat sat on the mat", "max_tokens": 35, "temperature": 0.9, "seed": 3},
 {"prompt": "A dog", "max_tokens": 30, "temperature": 0, "stream": true, "abort_after": 4},
 {"prompt": "Lily and Ben", "max_tokens": 45, "temperature": 0.7, "seed": 5, "stream": true},
 {"prompt": "", "max_tokens": 25, "temperature": 0},
 {"prompt": "In the park", "max_tokens": 40, "temperature": 0, "stream": true}
]}
J
client "$TMP/load.json" "$TMP/load"
wait_for health_is running 0 && wait_for health_is kv_blocks_used 0 || fail "engine not idle"
curl -s "$BASE/stats" >"$TMP/s1.json"
stop_bpftrace $bt
grep -q '^@q:' "$TMP/bt.out" || fail "bpftrace counted nothing: $(head -c 400 "$TMP/bt.out")"

bt() { awk -v m="$1:" '$1 == m { print $2; f = 1 } END { if (!f) print 0 }' "$TMP/bt.out"; }
# d FIELD: how much the engine's /stats FIELD grew (a missing field is null,
# which $((...)) would read as 0)
d() {
	local a b
	a=$(jq "$1" "$TMP/s1.json") b=$(jq "$1" "$TMP/s0.json")
	need_num "/stats $1" "$a" "$b"
	echo $((a - b))
}
# bpftrace prints no map it never wrote, which bt reads as 0: each kind of
# event the load must cause is counted above 0 first
for m in @q @a @sb @se @t @kv; do assert_pos "bpftrace $m" "$(bt $m)"; done
assert_eq "req_queued: bpftrace = engine" "$(d .probes.req_queued)" "$(bt @q)"
assert_eq "req_admitted: bpftrace = engine" "$(d .probes.req_admitted)" "$(bt @a)"
assert_eq "req_preempted: bpftrace = engine" "$(d .serving.preempted)" "$(bt @p)"
assert_le "the small pool preempted" 1 "$(bt @p)"
assert_eq "step_begin: bpftrace = engine steps" "$(d .serving.steps)" "$(bt @sb)"
assert_eq "step_end: bpftrace = engine steps" "$(d .serving.steps)" "$(bt @se)"
assert_eq "token_emit: bpftrace = engine emitted tokens" "$(d .serving.emitted_tokens)" "$(bt @t)"
assert_eq "kv_blocks: bpftrace = engine" "$(d .probes.kv_blocks)" "$(bt @kv)"
for r in 0:stop 1:length 2:abort; do
	assert_eq "finished ${r#*:}: bpftrace = engine" "$(d .serving.finished.${r#*:})" "$(bt "@f[${r%%:*}]")"
done
assert_eq "one request aborted" 1 "$(bt '@f[2]')"
assert_eq "gauges kept from the events = gauges carried, at every hit" 0 "$(bt @gauge_bad)"
assert_eq "every step began before it ended" 0 "$(bt @span_bad)"
assert_eq "no token before admission" 0 "$(bt @emit_bad)"
first=$(jq '[.serving.per_request[].req] | max' "$TMP/s0.json")
jq -r --argjson f "$first" '.serving.per_request[] | select(.req > $f) | "@gen[\(.req)]: \(.generated_tokens)"' \
	"$TMP/s1.json" | sort >"$TMP/want"
grep '^@gen\[' "$TMP/bt.out" | sort >"$TMP/got"
assert_eq "tokens per request: bpftrace = engine" "$(cat "$TMP/want")" "$(cat "$TMP/got")"
assert_le "kv_blocks hits <= steps (at most 3 hits per step with step_begin and step_end)" "$(bt @kv)" "$(bt @se)"
stop_engine
