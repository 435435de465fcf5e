#!/usr/bin/env bash
# t_opencl_clpeak_latency.sh - `record --opencl` on clpeak (Debian's, not
# ours) with no preload: its ~20,000 kernel enqueues, waits, buffers and
# build equal what bpftrace counts on the same loader calls at the same time;
# and the launch latency clpeak prints (its mean of START - QUEUED from
# clGetEventProfilingInfo) agrees with the mean over our cl_devtime records,
# which read the same timestamps: bound 2% (clpeak rounds to 0.01 us).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/opencl_lib.sh"
need_opencl_witness
need_cmd clpeak clpeak

cl_witness_start
# clpeak takes ~15 s here; a run that hangs fails at 150 s with its stderr,
# not at the runner's 300 s with nothing (it hung once in a CI run)
timeout 150 "$SPANTRACE" record -q --opencl -o "$TMP/t.jsonl" -- clpeak --kernel-latency --use-event-timer \
	>"$TMP/clpeak.out" 2>"$TMP/rec.err" || fail "record failed ($?): $(tail -n 3 "$TMP/rec.err"; tail -n 3 "$TMP/clpeak.out")"
cl_witness_stop
pid=$(jq -r 'select(.type == "cl_kernel") | .pid' "$TMP/t.jsonl" | head -n 1)
[ -n "$pid" ] || fail "no cl_kernel record: $(tail -n 3 "$TMP/rec.err")"
n=$(cl_bt "$pid" clEnqueueNDRangeKernel)
assert_le "clpeak made thousands of enqueues" 10000 "$n"
cl_compare "$pid" "$TMP/t.jsonl"

# Kernel names come from clCreateKernel (the command started under the tracer).
assert_eq "every enqueue named" "0" "$(cl_ours "$TMP/t.jsonl" '.type == "cl_kernel" and .name == null')"
# Device times: clpeak reads QUEUED and START only; END stays unknown, never 0.
assert_pos "cl_devtime records (clpeak's event timer)" "$(cl_ours "$TMP/t.jsonl" '.type == "cl_devtime"')"
assert_eq "END never read: null in every cl_devtime" "0" \
	"$(cl_ours "$TMP/t.jsonl" '.type == "cl_devtime" and (.end_ns != null or .dur_ns != null)')"
theirs=$(awk '/Kernel launch latency/ { print $(NF - 1) }' "$TMP/clpeak.out")
[ -n "$theirs" ] || fail "clpeak printed no latency: $(cat "$TMP/clpeak.out")"
ours=$(jq -s '[.[] | select(.type == "cl_devtime") | .start_ns - .queued_ns] | add / length / 1000' "$TMP/t.jsonl")
ok "launch latency: clpeak $theirs us, ours $ours us"
need_num "launch latencies" "$theirs" "$ours"
assert_pos "clpeak's launch latency (us)" "$theirs"
assert_le "latency |ours - clpeak| / clpeak" "$(awk -v a="$ours" -v b="$theirs" 'BEGIN { d = a - b; if (d < 0) d = -d; print d / b }')" 0.02
