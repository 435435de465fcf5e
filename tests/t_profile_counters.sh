#!/usr/bin/env bash
# t_profile_counters.sh - per-span perf counter deltas are true. On a
# CPU-bound single-threaded run (-b cpu, OMP_NUM_THREADS=1) the task-clock
# deltas of the `forward` spans sum to within 10% of their summed wall
# durations; the first token (pos 0) takes page faults. The run is pinned to
# one CPU, so no span changes CPU and, by the documented contract (only spans
# that change CPU are unmeasured), every span is measured and none counted as
# unmeasured. `record --perf` reports the same counters in its span records
# and summary.
# fast
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
[ -x "$SPANTRACE" ] || fail "no $SPANTRACE (build first)"
N=48
ENGINE=("$INFER" "$MODELS/stories260K.bin" -z "$MODELS/tokenizer.bin" -n $N -b cpu -s 1 -t 0 --ids)
# One CPU for tracer and engine (the engine inherits it): no span migrates.
CPU=$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//')
PIN=(taskset -c "$CPU")

OMP_NUM_THREADS=1 "${PIN[@]}" "$SPANTRACE" profile -q -F 99 -o "$TMP/prof" -- "${ENGINE[@]}" \
	--stats "$TMP/stats.json" >/dev/null 2>"$TMP/err" || { cat "$TMP/err"; fail "spantrace profile failed"; }
S=$TMP/prof/summary.json
J=$TMP/prof/spans.jsonl
names=$(jq -c .perf_counters "$S")
assert_eq "counters" '["task-clock","page-faults","context-switches","cpu-migrations"]' "$names"
forward=$(jq -s '[.[] | select(.name == "forward")] | length' "$J")
assert_eq "forward spans = engine's count" "$(jq .spans.forward.count "$TMP/stats.json")" "$forward"
measured=$(jq -s '[.[] | select(.name == "forward" and .counters)] | length' "$J")
assert_eq "measured forward spans (summary)" "$measured" "$(jq .counters.forward.measured "$S")"
assert_eq "pinned: every forward span measured" "$forward" "$measured"
assert_eq "pinned: every span measured" "$(jq -s '[.[] | select(.type == "span")] | length' "$J")" "$(jq -s '[.[] | select(.type == "span" and .counters)] | length' "$J")"
assert_eq "pinned: no span counted as unmeasured" 0 "$(jq .loss.counters_invalid "$S")"
read -r clock wall < <(jq -rs '[.[] | select(.name == "forward" and .counters)] |
	"\(map(.counters[0]) | add) \(map(.dur_ns) | add)"' "$J")
echo "forward: task-clock $clock ns, wall $wall ns over $measured spans"
assert_le "task-clock >= 90% of wall" "$(awk -v w="$wall" 'BEGIN{print w * 0.9}')" "$clock"
assert_le "task-clock <= 110% of wall" "$clock" "$(awk -v w="$wall" 'BEGIN{print w * 1.1}')"
assert_eq "task-clock total in counters.json" "$clock" "$(jq '.forward["task-clock"].total' "$TMP/prof/counters.json")"
# the first forward maps the weights in: it faults
assert_eq "one measured pos-0 forward" 1 "$(jq -s '[.[] | select(.name == "forward" and .pos == 0 and .counters)] | length' "$J")"
pf0=$(jq -s '[.[] | select(.name == "forward" and .pos == 0) | .counters[1]] | add' "$J")
assert_le "page faults in the first token's forward ($pf0)" 1 "$pf0"

# record --perf: the same counters in span records and the summary
OMP_NUM_THREADS=1 "${PIN[@]}" "$SPANTRACE" record -q --perf -o "$TMP/r.jsonl" --summary "$TMP/s.json" -- "${ENGINE[@]}" \
	>/dev/null 2>"$TMP/err" || { cat "$TMP/err"; fail "spantrace record --perf failed"; }
assert_eq "record session names the counters" "$names" "$(jq -c 'select(.type == "session") | .perf_counters' "$TMP/r.jsonl")"
rf=$(jq -s '[.[] | select(.type == "span" and .name == "forward" and .counters)] | length' "$TMP/r.jsonl")
assert_eq "record: measured forward spans in summary" "$rf" "$(jq .perf.forward.measured "$TMP/s.json")"
assert_eq "record: every forward span measured (pinned)" "$N" "$rf"
assert_eq "record: forward spans" "$N" "$(jq -s '[.[] | select(.type == "span" and .name == "forward")] | length' "$TMP/r.jsonl")"
# without --perf no counters are read
"$SPANTRACE" record -q -o "$TMP/plain.jsonl" -- "${ENGINE[@]}" >/dev/null 2>&1 || fail "plain record failed"
assert_eq "span records with counters without --perf" 0 "$(grep -c '"counters"' "$TMP/plain.jsonl")"
