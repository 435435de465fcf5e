#!/usr/bin/env bash
# t_profile_counters.sh - per-span perf counter deltas are true. On a
# CPU-bound single-threaded run (-b cpu, OMP_NUM_THREADS=1) the task-clock
# deltas of the `forward` spans sum to within 10% of their summed wall
# durations; the first token (pos 0) takes page faults; every forward span
# is measured or counted as unmeasured, and `record --perf` reports the same
# counters in its span records and summary.
# fast
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
[ -x "$SPANTRACE" ] || fail "no $SPANTRACE (build first)"
N=48
ENGINE=("$INFER" "$MODELS/stories260K.bin" -z "$MODELS/tokenizer.bin" -n $N -b cpu -s 1 -t 0 --ids)

OMP_NUM_THREADS=1 "$SPANTRACE" profile -q -F 99 -o "$TMP/prof" -- "${ENGINE[@]}" \
	--stats "$TMP/stats.json" >/dev/null 2>"$TMP/err" || { cat "$TMP/err"; fail "spantrace profile failed"; }
S=$TMP/prof/summary.json
J=$TMP/prof/spans.jsonl
names=$(jq -c .perf_counters "$S")
assert_eq "counters" '["task-clock","page-faults","context-switches","cpu-migrations"]' "$names"
forward=$(jq -s '[.[] | select(.name == "forward")] | length' "$J")
assert_eq "forward spans = engine's count" "$(jq .spans.forward.count "$TMP/stats.json")" "$forward"
measured=$(jq -s '[.[] | select(.name == "forward" and .counters)] | length' "$J")
invalid=$(jq .loss.counters_invalid "$S")
assert_eq "measured forward spans (summary)" "$measured" "$(jq .counters.forward.measured "$S")"
assert_le "unmeasured spans are counted ($invalid)" "$(( forward - measured ))" "$invalid"
assert_le "most forward spans measured" "$(( forward * 3 / 4 ))" "$measured"
read -r clock wall < <(jq -rs '[.[] | select(.name == "forward" and .counters)] |
	"\(map(.counters[0]) | add) \(map(.dur_ns) | add)"' "$J")
echo "forward: task-clock $clock ns, wall $wall ns over $measured spans"
assert_le "task-clock >= 90% of wall" "$(awk -v w="$wall" 'BEGIN{print w * 0.9}')" "$clock"
assert_le "task-clock <= 110% of wall" "$clock" "$(awk -v w="$wall" 'BEGIN{print w * 1.1}')"
assert_eq "task-clock total in counters.json" "$clock" "$(jq '.forward["task-clock"].total' "$TMP/prof/counters.json")"
pf0=$(jq -s '[.[] | select(.name == "forward" and .pos == 0 and .counters) | .counters[1]] | add // 0' "$J")
assert_le "page faults in the first token's forward ($pf0)" 1 "$pf0"

# record --perf: the same counters in span records and the summary
OMP_NUM_THREADS=1 "$SPANTRACE" record -q --perf -o "$TMP/r.jsonl" --summary "$TMP/s.json" -- "${ENGINE[@]}" \
	>/dev/null 2>"$TMP/err" || { cat "$TMP/err"; fail "spantrace record --perf failed"; }
assert_eq "record session names the counters" "$names" "$(jq -c 'select(.type == "session") | .perf_counters' "$TMP/r.jsonl")"
rf=$(jq -s '[.[] | select(.type == "span" and .name == "forward" and .counters)] | length' "$TMP/r.jsonl")
assert_eq "record: measured forward spans in summary" "$rf" "$(jq .perf.forward.measured "$TMP/s.json")"
assert_le "record: most forward spans measured" "$(( N * 3 / 4 ))" "$rf"
# without --perf no counters are read
"$SPANTRACE" record -q -o "$TMP/plain.jsonl" -- "${ENGINE[@]}" >/dev/null 2>&1 || fail "plain record failed"
assert_eq "span records with counters without --perf" 0 "$(grep -c '"counters"' "$TMP/plain.jsonl")"
