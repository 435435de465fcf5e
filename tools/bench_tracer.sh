#!/usr/bin/env bash
# tools/bench_tracer.sh - the tracer's own costs, each the median of REPEAT runs:
#   per-hit cost   a loop firing op_begin/op_end pairs (the engine's 5-byte
#                  nop probes), not attached / under `spantrace record` /
#                  under bpftrace doing the same begin-end matching in the kernel
#   attach latency the session's attach_ns (all probe programs attached)
#   tracer RSS     VmHWM of `spantrace record` tracing the demo model
#   exporter       span events/s formatted to JSONL on one core (synthetic)
# Usage: tools/bench_tracer.sh [BUILD_DIR]   (root; REPEAT=5 PAIRS=200000)
set -u
cd "$(dirname "$0")/.." || exit 2
BUILD=${1:-${BUILD:-build}}
REPEAT=${REPEAT:-5}
PAIRS=${PAIRS:-200000}
SPANTRACE=$BUILD/spantrace
TMP=$(mktemp -d /tmp/bench_tracer.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
[ "$(id -u)" = 0 ] || { echo "bench_tracer: needs root" >&2; exit 1; }
[ -x "$SPANTRACE" ] || { echo "bench_tracer: no $SPANTRACE (make first)" >&2; exit 1; }

median() { sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "n/a"}'; }

# ---- a probe loop: the same probe macros as the engine ----
cat >"$TMP/loop.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "base/usdt.h"   /* semaphores and counts: inference/base/usdt.c, linked in */
int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
	struct timespec a, b;
	usdt_span_begin(SPAN_FORWARD, -1); /* the tracer wants this site */
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		usdt_op_begin(SPAN_QKV, (int)(i & 7));
		usdt_op_end(SPAN_QKV, (int)(i & 7));
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	usdt_span_end(SPAN_FORWARD, -1, LAUNCH_HOST);
	printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (2.0 * n));
	return 0;
}
EOF
gcc -O2 -mno-red-zone -Iinference -Iinclude -o "$TMP/loop" "$TMP/loop.c" inference/base/usdt.c || exit 1

base=$(for i in $(seq "$REPEAT"); do "$TMP/loop" "$PAIRS"; done | median)
ours=$(for i in $(seq "$REPEAT"); do
	"$SPANTRACE" record -q --ringbuf-kb 65536 -o /dev/null --summary "$TMP/s$i.json" -- "$TMP/loop" "$PAIRS" 2>/dev/null
done | median)
ours_agg=$(for i in $(seq "$REPEAT"); do
	# spans aggregated in the kernel only (nothing streamed): the cost of matching
	"$SPANTRACE" record -q --min-dur-ns 1000000000 -o /dev/null -- "$TMP/loop" "$PAIRS" 2>/dev/null
done | median)
drops=$(jq -s '[.[].loss.dropped] | add' "$TMP"/s*.json)
if command -v bpftrace >/dev/null; then
	bt=$(for i in $(seq "$REPEAT"); do
		bpftrace -q -e "usdt:$TMP/loop:infer:op_begin { @s[tid, arg0] = nsecs; }
usdt:$TMP/loop:infer:op_end /@s[tid, arg0]/ { @h[arg0] = hist(nsecs - @s[tid, arg0]); delete(@s[tid, arg0]); }
END { clear(@h); clear(@s); }" -c "$TMP/loop $PAIRS" 2>/dev/null | grep -E '^[0-9.]+$'
	done | median)
else
	bt=n/a
fi
echo "per-hit cost (ns per probe hit, median of $REPEAT, $PAIRS begin/end pairs):"
echo "  not attached:                         $base"
echo "  spantrace record (stream every span): $ours   (events dropped in all runs: $drops)"
echo "  spantrace, matched in kernel only:    $ours_agg"
echo "  bpftrace matching begin/end + hist:   $bt"

# ---- attach latency and RSS, on the engine ----
MODEL=${MODEL:-$BUILD/models/demo15M.bin}
[ -r "$MODEL" ] || MODEL=$(cd .. && pwd)/shared/models/stories260K.bin
att=$(for i in $(seq "$REPEAT"); do
	"$SPANTRACE" record -q -o "$TMP/a.jsonl" -- "$BUILD/infer" "$MODEL" -b cpu -n 4 --ids >/dev/null 2>&1
	head -n1 "$TMP/a.jsonl" | jq '.attach_ns / 1e6'
done | median)
echo "attach latency (all probe programs, ms, median): $att"

"$SPANTRACE" record -q --binary "$BUILD/infer" -o /dev/null 2>/dev/null &
rec=$!
sleep 1
for i in 1 2 3; do OMP_NUM_THREADS=1 "$BUILD/infer" "$MODEL" -b cpu -n 64 --ids >/dev/null 2>&1; done
hwm=$(awk '/^VmHWM/ {print $2 " " $3}' /proc/$rec/status)
rss=$(awk '/^VmRSS/ {print $2 " " $3}' /proc/$rec/status)
anon=$(awk '/^RssAnon/ {print $2 " " $3}' /proc/$rec/status)
kill -INT $rec
wait $rec
# Steady RSS is what an always-on tracer costs; the peak is libbpf parsing
# the kernel's BTF (~5.5 MB here) for CO-RE at load, freed right after.
echo "tracer steady RSS (VmRSS after 3 traced runs of $(basename "$MODEL")): $rss (anonymous $anon)"
echo "tracer peak RSS (VmHWM, BTF parse at load): $hwm"

# ---- exporter throughput ----
if [ -x "$BUILD/tests/test_jsonl_format" ]; then
	for i in $(seq "$REPEAT"); do "$BUILD/tests/test_jsonl_format" --bench 2000000; done |
		awk '{print $9}' | median | sed 's/^/exporter (M span events\/s, one core, median): /'
fi
