#!/usr/bin/env bash
# tools/bench_profile.sh - what span-attributed CPU sampling costs the engine:
# decode tok/s of the demo model untraced vs under `spantrace profile -F 99`
# and `-F 999`, rounds interleaved, medians and ratios.
#
# Profiles run at --level coarse: the spans there are what the samples are
# attributed to, and detail's ~110 span probe hits per token (each also
# reading the perf counters) would be measured instead of the sampling.
# Every profiled run must report samples taken; samples dropped are summed.
#
#   tools/bench_profile.sh     (root)
#   PROFILE_ROUNDS=5 TOKENS=256 REQUESTS=4 BUILD=build tools/bench_profile.sh
export BENCH_NAME=bench_profile
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
TOKENS=${TOKENS:-256}
REQUESTS=${REQUESTS:-4}
# each profiled run also writes its outputs (folded stacks, Chrome trace):
# fewer rounds than the daemon section keeps the section near two minutes
PROFILE_ROUNDS=${PROFILE_ROUNDS:-$REPEAT}
RATES="99 999"

need_built "$INFER" "$SPANTRACE"
"$SPANTRACE" profile --help >/dev/null 2>&1 || skipped "profile command not built"
[ "$(id -u)" = 0 ] || skipped "needs root to load BPF programs"
[ -r "$DEMO_MODEL" ] || die "no $DEMO_MODEL: run make models first"

BACKEND=$(engine_backend "$DEMO_MODEL")
echo "engine backend: $BACKEND$([ "$BACKEND" = cpu ] && echo " (the default, opencl, does not run here)")"
ENGINE=("$INFER" "$DEMO_MODEL" -b "$BACKEND" -n "$TOKENS" -t 0 --ids --serve)
make_requests "$TMP/requests" "$REQUESTS"

run_untraced() {
	timeout 300 "${ENGINE[@]}" <"$TMP/requests" >/dev/null 2>"$TMP/u$1.err" || die "engine failed: $(tail -n1 "$TMP/u$1.err")"
	tok_s "$TMP/u$1.err" >>"$TMP/untraced"
}

# run_profiled HZ ROUND: profile's stderr says "N samples (M outside spans, D dropped)".
run_profiled() {
	local dir=$TMP/prof_$1_$2 err=$TMP/p_$1_$2.err samples
	timeout 300 "$SPANTRACE" profile -F "$1" --level coarse -o "$dir" -- "${ENGINE[@]}" \
		<"$TMP/requests" >/dev/null 2>"$err" || die "profile -F $1 failed: $(tail -n2 "$err")"
	samples=$(sed -n 's/^spantrace: \([0-9]*\) samples (.*/\1/p' "$err")
	[ "${samples:-0}" -gt 0 ] || die "profile -F $1 reported no samples: $(grep -m1 samples "$err")"
	echo "$samples" >>"$TMP/samples$1"
	sed -n 's/^spantrace: [0-9]* samples (.*, \([0-9]*\) dropped).*/\1/p' "$err" >>"$TMP/dropped$1"
	tok_s "$err" >>"$TMP/hz$1"
}

: >"$TMP/untraced"
for hz in $RATES; do : >"$TMP/hz$hz"; : >"$TMP/samples$hz"; : >"$TMP/dropped$hz"; done
for r in $(seq "$PROFILE_ROUNDS"); do
	# alternate the order so drift in the machine's load favours no variant
	[ $((r % 2)) = 1 ] && run_untraced "$r"
	for hz in $RATES; do run_profiled "$hz" "$r"; done
	[ $((r % 2)) = 0 ] && run_untraced "$r"
	echo "round $r/$PROFILE_ROUNDS done" >&2
done
untraced=$(median <"$TMP/untraced")
echo "decode tok/s, $BACKEND, $REQUESTS requests x $TOKENS tokens a run, median of $PROFILE_ROUNDS interleaved rounds"
echo "(ratios: median over rounds of profiled / the same round's untraced):"
echo "  untraced                   $untraced"
for hz in $RATES; do
	printf '  spantrace profile -F %-4s %s   (samples a run: median %s; dropped in all runs: %s)\n' "$hz" \
		"$(median <"$TMP/hz$hz")" "$(median <"$TMP/samples$hz")" "$(awk '{ s += $1 } END { print s + 0 }' "$TMP/dropped$hz")"
	echo "    per-round: $(paired_list "$TMP/hz$hz" "$TMP/untraced")"
	target=">=0.99"
	[ "$hz" = 999 ] && target=">=0.95"
	ratio "profile_${hz}hz_decode_over_untraced" "$(paired_ratio "$TMP/hz$hz" "$TMP/untraced")" "$target"
done
