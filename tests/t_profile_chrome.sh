#!/usr/bin/env bash
# t_profile_chrome.sh - `record --chrome FILE` writes a valid Chrome trace:
# complete ("X") span events well nested on every thread, exactly the
# engine's kernel count on the OpenCL queue track(s) (an opencl run; on a
# machine without OpenCL the kernel part is skipped with a note), one token
# instant per token, counter tracks (KV cache, pools), span args carrying
# the --perf counters, and --max-events truncation reported, not silent.
# fast
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
[ -x "$SPANTRACE" ] || fail "no $SPANTRACE (build first)"
N=24
BACKEND=opencl
clinfo -l 2>/dev/null | grep -q Device || { BACKEND=cpu; echo "note: no OpenCL device; cpu run, kernel tracks not checked"; }
ENGINE=("$INFER" "$MODELS/stories260K.bin" -z "$MODELS/tokenizer.bin" -n $N -b $BACKEND -s 1 -t 0 --ids)
# One CPU for tracer and engine: no span changes CPU, so every span has
# counters (only spans that change CPU are unmeasured).
CPU=$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//')

taskset -c "$CPU" "$SPANTRACE" record -q --perf --chrome "$TMP/trace.json" -o "$TMP/r.jsonl" -- "${ENGINE[@]}" \
	--stats "$TMP/stats.json" >/dev/null 2>"$TMP/err" || { cat "$TMP/err"; fail "spantrace record --chrome failed"; }
T=$TMP/trace.json
jq -e '.traceEvents | length > 0' "$T" >/dev/null || fail "trace.json is not a Chrome trace"

# every thread's spans nest: sorted by begin (longer first), each lies inside
# the innermost still-open span
/usr/bin/python3 - "$T" <<'PY' || fail "spans are not well nested"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
by = {}
for e in ev:
    if e["ph"] == "X" and e.get("cat") == "span":
        b = round(e["ts"] * 1000); by.setdefault((e["pid"], e["tid"]), []).append((b, b + round(e["dur"] * 1000), e["name"]))
bad = 0
for key, spans in by.items():
    spans.sort(key=lambda s: (s[0], -s[1]))
    stack = []
    for b, end, name in spans:
        while stack and stack[-1][1] <= b:
            stack.pop()
        if stack and end > stack[-1][1]:
            bad += 1
            print("overlap on", key, name, b, end, "parent", stack[-1], file=sys.stderr)
        stack.append((b, end, name))
print("ok: %d spans on %d threads, %d badly nested" % (sum(map(len, by.values())), len(by), bad))
sys.exit(1 if bad else 0)
PY
spans=$(jq '[.traceEvents[] | select(.ph == "X" and .cat == "span")] | length' "$T")
assert_pos "span events" "$spans"
assert_eq "span events = span records" "$(jq -s '[.[] | select(.type == "span")] | length' "$TMP/r.jsonl")" "$spans"
if [ "$BACKEND" = opencl ]; then
	kernels=$(jq '[.traceEvents[] | select(.ph == "X" and .cat == "opencl")] | length' "$T")
	assert_eq "kernel track events = engine kernels" "$(jq .opencl.kernels "$TMP/stats.json")" "$kernels"
	jq -e '[.traceEvents[] | select(.ph == "M" and .name == "thread_name" and (.args.name | startswith("OpenCL queue")))] | length > 0' \
		"$T" >/dev/null || fail "no named OpenCL queue track"
fi
assert_eq "token instants = engine tokens" "$(jq .tokens "$TMP/stats.json")" \
	"$(jq '[.traceEvents[] | select(.ph == "i" and .name == "token")] | length' "$T")"
jq -e '[.traceEvents[] | select(.ph == "C" and (.name | startswith("kv_cache")))] | length > 0' "$T" >/dev/null \
	|| fail "no KV cache counter track"
jq -e '[.traceEvents[] | select(.ph == "C" and (.name | startswith("live bytes")))] | length > 0' "$T" >/dev/null \
	|| fail "no pool counter track"
ok "counter tracks present"
assert_eq "forward spans with --perf counters in args (pinned: all)" "$(jq '.spans.forward.count' "$TMP/stats.json")" \
	"$(jq '[.traceEvents[] | select(.ph == "X" and .name == "forward" and .args.counters["task-clock"] > 0)] | length' "$T")"
assert_eq "span events with counters lacking task-clock > 0" 0 \
	"$(jq '[.traceEvents[] | select(.ph == "X" and .cat == "span" and .args.counters != null and (.args.counters["task-clock"] > 0 | not))] | length' "$T")"
assert_eq "span events with counters = span records with counters" \
	"$(jq -s '[.[] | select(.type == "span" and .counters)] | length' "$TMP/r.jsonl")" \
	"$(jq '[.traceEvents[] | select(.ph == "X" and .cat == "span" and .args.counters != null)] | length' "$T")"
assert_eq "nothing truncated" 0 "$(jq .otherData.truncated "$T")"

# a cap: exactly that many events, the rest counted and announced
"$SPANTRACE" record -q --chrome "$TMP/small.json" --max-events 50 -o /dev/null -- "${ENGINE[@]}" \
	>/dev/null 2>"$TMP/err2" || { cat "$TMP/err2"; fail "record --max-events failed"; }
S=$TMP/small.json
assert_eq "events written under --max-events 50" 50 "$(jq '[.traceEvents[] | select(.ph != "M")] | length' "$S")"
assert_eq "otherData.events" 50 "$(jq .otherData.events "$S")"
trunc=$(jq .otherData.truncated "$S")
assert_le "truncated events counted ($trunc)" 1 "$trunc"
grep -q "truncated" "$TMP/err2" || fail "truncation not reported on stderr"
ok "truncation reported"
