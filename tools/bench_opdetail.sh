#!/usr/bin/env bash
# tools/bench_opdetail.sh - what op detail costs on the default backend
# (opencl, PoCL): decode tok/s of the demo model (stories15M shape, 256
# greedy tokens) untraced (the fused one-kernel forward), under `record
# --level coarse` (still fused: nobody asks for op detail) and under `record
# --level detail` (per-phase kernels, their device times joined to the op
# spans); also untraced with --cl-launch phases, which splits detail's cost
# into the launch mode's and the tracing's. Rounds interleave the four; the
# engine's own tok/s (--stats) is the figure, and each round's traced figure
# is divided by the same round's untraced one.
#
#   tools/bench_opdetail.sh          (root: record loads BPF programs)
#   ROUNDS=10 TOKENS=256 BUILD=build tools/bench_opdetail.sh
export BENCH_NAME=bench_opdetail
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
TOKENS=${TOKENS:-256}

[ "$(id -u)" = 0 ] || skipped "needs root to load BPF programs"
clinfo -l 2>/dev/null | grep -q Device || skipped "no OpenCL device (clinfo lists none)"
[ -x "$SPANTRACE" ] && [ -x "$INFER" ] || die "build $SPANTRACE and $INFER first"
[ -r "$DEMO_MODEL" ] || die "no $DEMO_MODEL (make models)"

# one MODE: the engine's tok/s in that mode, appended to $TMP/MODE
one() {
	local mode=$1 stats=$TMP/$1.json
	local engine=("$INFER" "$DEMO_MODEL" -n "$TOKENS" -t 0 --ids --stats "$stats")
	case $mode in
	untraced) "${engine[@]}" ;;
	phases) "${engine[@]}" --cl-launch phases ;;
	coarse | detail) "$SPANTRACE" record -q --level "$mode" -o /dev/null -- "${engine[@]}" ;;
	esac >/dev/null 2>"$TMP/$mode.err" || die "$mode run failed: $(tail -n 3 "$TMP/$mode.err")"
	jq -r .tok_per_s "$stats" >>"$TMP/$mode"
}
for r in $(seq "$ROUNDS"); do
	for mode in untraced coarse detail phases; do one $mode; done
	echo "round $r: untraced $(tail -n1 "$TMP/untraced"), coarse $(tail -n1 "$TMP/coarse")," \
		"detail $(tail -n1 "$TMP/detail"), phases untraced $(tail -n1 "$TMP/phases") tok/s"
done
echo "decode tok/s, median of $ROUNDS interleaved rounds: untraced $(median <"$TMP/untraced")," \
	"coarse $(median <"$TMP/coarse"), detail $(median <"$TMP/detail"), phases untraced $(median <"$TMP/phases")"
echo "detail / untraced per round: $(paired_list "$TMP/detail" "$TMP/untraced")"
ratio opdetail_coarse_over_untraced "$(paired_ratio "$TMP/coarse" "$TMP/untraced")" ">=0.95"
ratio opdetail_detail_over_untraced "$(paired_ratio "$TMP/detail" "$TMP/untraced")" info
ratio opdetail_phases_untraced_over_fused "$(paired_ratio "$TMP/phases" "$TMP/untraced")" info
ratio opdetail_detail_over_phases_untraced "$(paired_ratio "$TMP/detail" "$TMP/phases")" info
