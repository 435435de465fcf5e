#!/usr/bin/env bash
# t_env_options.sh - SPANTRACE_* variables mirror record's and top's flags
# (output paths, level, interval) and a flag on the command line wins over
# its variable; a bad value names its variable and exits non-zero.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
need_cmd jq jq
need_cmd bc bc
M=$MODELS/stories260K.bin
run_infer=("$INFER" "$M" -b cpu -n 32 -t 0 --ids)

# Bad values: one line naming the variable, a non-zero exit, nothing traced.
SPANTRACE_LEVEL=medium expect_fail "record, SPANTRACE_LEVEL=medium" "SPANTRACE_LEVEL='medium' is not valid" \
	"$SPANTRACE" record -q -- "${run_infer[@]}"
SPANTRACE_INTERVAL_SECS=-1 expect_fail "top, SPANTRACE_INTERVAL_SECS=-1" "SPANTRACE_INTERVAL_SECS='-1' is not valid" \
	"$SPANTRACE" top -b -n 1 -- "${run_infer[@]}"
SPANTRACE_OUTPUT= expect_fail "record, empty SPANTRACE_OUTPUT" "SPANTRACE_OUTPUT='' is not valid" \
	"$SPANTRACE" record -q -- "${run_infer[@]}"

# Output paths and level from the environment alone.
SPANTRACE_OUTPUT=$TMP/env.jsonl SPANTRACE_SUMMARY=$TMP/env.json SPANTRACE_CSV=$TMP/env.csv \
SPANTRACE_METRICS=$TMP/env.metrics.jsonl SPANTRACE_LEVEL=coarse \
	"$SPANTRACE" record -q -- "${run_infer[@]}" >"$TMP/stdout" 2>"$TMP/err" || fail "record: $(tail -n 3 "$TMP/err")"
for f in env.jsonl env.json env.csv env.metrics.jsonl; do [ -s "$TMP/$f" ] || fail "SPANTRACE_* gave no $f"; done
[ -s "$TMP/stdout" ] && grep -q '"type"' "$TMP/stdout" && fail "JSONL went to stdout despite SPANTRACE_OUTPUT"
ok "SPANTRACE_OUTPUT, _SUMMARY, _CSV and _METRICS made their files"
assert_eq "level from SPANTRACE_LEVEL" coarse "$(head -n 1 "$TMP/env.jsonl" | jq -r .level)"
assert_pos "forward spans at coarse" "$(grep -c '"name":"forward"' "$TMP/env.jsonl")"
assert_eq "no op spans at coarse" 0 "$(grep -c '"name":"attention"' "$TMP/env.jsonl")"

# The flag wins.
SPANTRACE_OUTPUT=$TMP/loser.jsonl SPANTRACE_LEVEL=coarse \
	"$SPANTRACE" record -q -o "$TMP/winner.jsonl" --level detail -- "${run_infer[@]}" >/dev/null 2>"$TMP/err" \
	|| fail "record: $(tail -n 3 "$TMP/err")"
[ -e "$TMP/loser.jsonl" ] && fail "SPANTRACE_OUTPUT was used although -o was given"
assert_eq "--level beats SPANTRACE_LEVEL" detail "$(head -n 1 "$TMP/winner.jsonl" | jq -r .level)"
# the same run traces op spans at detail: their absence at coarse was the level
assert_pos "op spans at detail" "$(grep -c '"name":"attention"' "$TMP/winner.jsonl")"

# top: SPANTRACE_INTERVAL_SECS sets the refresh interval; -d beats it.
# Measured as the gaps between frames as they arrive (start-up, 2-4 s here,
# is not in them), on an idle --serve engine.
"$INFER" "$M" -b cpu --ids --serve < <(sleep 60) >/dev/null 2>&1 &
EPID=$!
wait_for grep -q libinfer /proc/$EPID/maps || fail "engine did not start"
# gap ARGS...: the mean gap in seconds between the 2nd and the 5th frame.
# Run in $(...): its fail ends the test (lib.sh signals the test's shell).
gap() {
	local rc
	"$SPANTRACE" top -b -n 5 -p $EPID "$@" 2>"$TMP/top.err" | while IFS= read -r line; do
		case $line in "spantrace top"*) date +%s.%N ;; esac
	done >"$TMP/stamps"
	rc=${PIPESTATUS[0]}
	[ "$rc" = 0 ] || fail "top $* exited $rc: $(tail -n 3 "$TMP/top.err")"
	[ "$(wc -l <"$TMP/stamps")" = 5 ] || fail "top gave $(wc -l <"$TMP/stamps") frames: $(tail -n 3 "$TMP/top.err")"
	echo "($(sed -n 5p "$TMP/stamps") - $(sed -n 2p "$TMP/stamps")) / 3" | bc -l
}
fast=$(SPANTRACE_INTERVAL_SECS=0.2 gap)
flag=$(SPANTRACE_INTERVAL_SECS=0.2 gap -d 1)
# bounded on both sides: frames that all came at once (a buffered pipe)
# would read as a fast interval
assert_between "frame gap at SPANTRACE_INTERVAL_SECS=0.2 (s)" 0.1 "$fast" 0.6
assert_between "frame gap at -d 1 over SPANTRACE_INTERVAL_SECS=0.2 (s)" 0.6 "$flag" 3
kill $EPID
