#!/usr/bin/env bash
# tools/bench_opencl.sh - what `record --opencl` costs an OpenCL program
# nobody here wrote: clpeak's own figures with the tracer on and off, rounds
# interleaved, medians printed; and the cost of one traced loader call,
# timed by tools/clcallcost.c (a call that sends a record, clFinish, and one
# that only passes the probes, clGetEventProfilingInfo), against bpftrace
# with one uprobe on the same function.
#
#   tools/bench_opencl.sh           (root; needs clpeak and an OpenCL device)
#   REPEAT=5 BUILD=build tools/bench_opencl.sh
export BENCH_NAME=bench_opencl
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"

[ "$(id -u)" = 0 ] || skipped "needs root to load BPF programs"
command -v clpeak >/dev/null || skipped "clpeak is not installed (make deps)"
[ -x "$SPANTRACE" ] || die "no $SPANTRACE (make first)"
${CC:-gcc} -O2 -o "$TMP/clcallcost" "$ROOT/tools/clcallcost.c" -lOpenCL || die "cannot build tools/clcallcost.c"
CALLS=${CALLS:-20000}
LOADER=$(ldconfig -p | awk '/libOpenCL\.so\.1 .*x86-64/ { print $NF; exit }')

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

# calls MODE OUT: clcallcost untraced (off), under record --opencl (on), under bpftrace (bt)
calls() {
	case $1 in
	off) "$TMP/clcallcost" "$CALLS" ;;
	on) "$SPANTRACE" record -q --opencl -o /dev/null -- "$TMP/clcallcost" "$CALLS" ;;
	bt) bpftrace -e "uprobe:$LOADER:clGetEventProfilingInfo { @n = count(); }" -c "$TMP/clcallcost $CALLS" 2>/dev/null ;;
	esac >"$2"
}
for r in $(seq "$REPEAT"); do
	for mode in off on bt; do
		[ $mode = bt ] && ! command -v bpftrace >/dev/null && continue
		calls $mode "$TMP/calls.log" || die "clcallcost ($mode) failed"
		awk '/^clFinish/ { print $NF }' "$TMP/calls.log" >>"$TMP/fin_$mode"
		awk '/^clGetEventProfilingInfo/ { print $NF }' "$TMP/calls.log" >>"$TMP/prof_$mode"
	done
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
fin=$(awk -v a="$(median <"$TMP/fin_on")" -v b="$(median <"$TMP/fin_off")" 'BEGIN { printf "%.2f\n", (a - b) / 1000 }')
prof=$(awk -v a="$(median <"$TMP/prof_on")" -v b="$(median <"$TMP/prof_off")" 'BEGIN { printf "%.2f\n", (a - b) / 1000 }')
echo "cost per traced call: clFinish (a cl_wait record) $fin us, clGetEventProfilingInfo (probes only) $prof us"
if [ -s "$TMP/prof_bt" ]; then
	bt=$(awk -v a="$(median <"$TMP/prof_bt")" -v b="$(median <"$TMP/prof_off")" 'BEGIN { printf "%.2f\n", (a - b) / 1000 }')
	echo "bpftrace, one uprobe with count() on clGetEventProfilingInfo: $bt us per call"
	ratio opencl_bpftrace_uprobe_us "$bt" info
fi
echo "clpeak kernel launch latency: off $lat_off us, on $lat_on us (median of $REPEAT)"
echo "clpeak enqueueWriteBuffer: off $(median <"$TMP/wr_off"), on $(median <"$TMP/wr_on") GB/s"
echo "clpeak enqueueReadBuffer: off $(median <"$TMP/rd_off"), on $(median <"$TMP/rd_on") GB/s"
ratio opencl_clpeak_latency_on_over_off "$(div "$lat_on" "$lat_off")" info
ratio opencl_traced_call_us "$fin" info
ratio opencl_traced_probe_only_call_us "$prof" info
ratio opencl_clpeak_write_gbps_on_over_off "$(div "$(median <"$TMP/wr_on")" "$(median <"$TMP/wr_off")")" ">=0.95"
ratio opencl_clpeak_read_gbps_on_over_off "$(div "$(median <"$TMP/rd_on")" "$(median <"$TMP/rd_off")")" ">=0.95"
