#!/usr/bin/env bash
# tools/bench_opencl.sh - what `record --opencl` costs an OpenCL program
# nobody here wrote: clpeak's own figures with the tracer on and off, rounds
# interleaved, medians printed. Each kernel-latency iteration makes two
# traced loader calls (clEnqueueNDRangeKernel and clFinish), so the cost per
# traced call is (latency on - latency off) / 2.
#
#   tools/bench_opencl.sh           (root; needs clpeak and an OpenCL device)
#   REPEAT=5 BUILD=build tools/bench_opencl.sh
export BENCH_NAME=bench_opencl
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"

[ "$(id -u)" = 0 ] || skipped "needs root to load BPF programs"
command -v clpeak >/dev/null || skipped "clpeak is not installed (make deps)"
[ -x "$SPANTRACE" ] || die "no $SPANTRACE (make first)"

# run MODE OUT ARGS...: clpeak ARGS, untraced (off) or under record --opencl (on)
run() {
	local mode=$1 out=$2
	shift 2
	if [ "$mode" = on ]; then
		"$SPANTRACE" record -q --opencl -o /dev/null -- clpeak "$@" >"$out" 2>&1
	else
		clpeak "$@" >"$out" 2>&1
	fi
}
# figure LOG LABEL: the number clpeak printed after LABEL
figure() { awk -v l="$2" '{ s = $0; sub(/^ +/, "", s) } index(s, l) == 1 { for (i = NF; i > 0; i--) if ($i ~ /^[0-9.]+$/) { print $i; exit } }' "$1"; }

for r in $(seq "$REPEAT"); do
	for mode in off on; do
		run $mode "$TMP/lat_$mode.log" --kernel-latency || die "clpeak --kernel-latency ($mode) failed"
		figure "$TMP/lat_$mode.log" "Kernel launch latency" >>"$TMP/lat_$mode"
		run $mode "$TMP/bw_$mode.log" --transfer-bandwidth || die "clpeak --transfer-bandwidth ($mode) failed"
		figure "$TMP/bw_$mode.log" "enqueueWriteBuffer " >>"$TMP/wr_$mode"
		figure "$TMP/bw_$mode.log" "enqueueReadBuffer " >>"$TMP/rd_$mode"
	done
	echo "round $r: latency off $(tail -n1 "$TMP/lat_off") us, on $(tail -n1 "$TMP/lat_on") us;" \
		"write off $(tail -n1 "$TMP/wr_off"), on $(tail -n1 "$TMP/wr_on") GB/s"
done
lat_off=$(median <"$TMP/lat_off") lat_on=$(median <"$TMP/lat_on")
per_call=$(awk -v a="$lat_on" -v b="$lat_off" 'BEGIN { printf "%.2f\n", (a - b) / 2 }')
echo "clpeak kernel launch latency: off $lat_off us, on $lat_on us (median of $REPEAT)"
echo "cost per traced OpenCL call: $per_call us ((on - off) / 2 calls per iteration)"
echo "clpeak enqueueWriteBuffer: off $(median <"$TMP/wr_off"), on $(median <"$TMP/wr_on") GB/s"
echo "clpeak enqueueReadBuffer: off $(median <"$TMP/rd_off"), on $(median <"$TMP/rd_on") GB/s"
ratio opencl_clpeak_latency_on_over_off "$(div "$lat_on" "$lat_off")" info
ratio opencl_traced_call_us "$per_call" info
ratio opencl_clpeak_write_gbps_on_over_off "$(div "$(median <"$TMP/wr_on")" "$(median <"$TMP/wr_off")")" ">=0.95"
ratio opencl_clpeak_read_gbps_on_over_off "$(div "$(median <"$TMP/rd_on")" "$(median <"$TMP/rd_off")")" ">=0.95"
