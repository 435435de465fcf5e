#!/usr/bin/env bash
# tools/bench_attach.sh - how long `spantrace record` takes to come and go
# around a command that does nothing: load, attach, detach and exit, by what
# it traces. Our USDT probes (`-- infer --version`), --opencl (`-- true`:
# the ICD loader's 23 hooks) and --span (one libc function, `-- true`);
# the command alone is subtracted. Rounds interleave the variants; medians.
#
#   tools/bench_attach.sh          (root)
#   REPEAT=9 BUILD=build tools/bench_attach.sh
export BENCH_NAME=bench_attach
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"

[ "$(id -u)" = 0 ] || skipped "needs root to load BPF"
[ -x "$SPANTRACE" ] && [ -x "$INFER" ] || skipped "not built ($SPANTRACE, $INFER)"
LIBC=$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ { print $NF; exit }')
[ -r "$LIBC" ] || skipped "no x86-64 libc.so.6 in ldconfig's cache"

# secs CMD...: wall seconds of one run (a failed run is an error, not a figure)
secs() {
	local t0 t1
	t0=$(date +%s%N)
	"$@" >/dev/null 2>"$TMP/err" || die "$* failed: $(tail -n 2 "$TMP/err")"
	t1=$(date +%s%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", (b - a) / 1e9 }'
}

for ((r = 0; r < REPEAT; r++)); do
	secs true >>"$TMP/none"
	secs "$INFER" --version >>"$TMP/none_infer"
	secs "$SPANTRACE" record -q -o "$TMP/p.jsonl" -- "$INFER" --version >>"$TMP/probes"
	secs "$SPANTRACE" record -q --opencl -o "$TMP/o.jsonl" -- true >>"$TMP/opencl"
	secs "$SPANTRACE" record -q --span "uprobe:$LIBC:getenv" -o "$TMP/s.jsonl" -- true >>"$TMP/span"
done
bare=$(median <"$TMP/none") bare_infer=$(median <"$TMP/none_infer")
probes=$(median <"$TMP/probes") opencl=$(median <"$TMP/opencl") span=$(median <"$TMP/span")
cost() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", a - b }'; }
probes_s=$(cost "$probes" "$bare_infer") opencl_s=$(cost "$opencl" "$bare") span_s=$(cost "$span" "$bare")
echo "record around a command that does nothing, median of $REPEAT rounds (the command's own time taken off):"
echo "  our probes (infer --version): $probes_s s"
echo "  --opencl (true):              $opencl_s s   [$(paste -sd' ' "$TMP/opencl")]"
echo "  --span, one function (true):  $span_s s"
ratio attach_opencl_s "$opencl_s" "<=0.5"
ratio attach_opencl_over_probes "$(div "$opencl_s" "$probes_s")" "<=1"
ratio attach_span_over_probes "$(div "$span_s" "$probes_s")" "<=1"
