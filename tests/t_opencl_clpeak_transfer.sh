#!/usr/bin/env bash
# t_opencl_clpeak_transfer.sh - `record --opencl` on clpeak's transfer test:
# every read/write/map transfer, wait, buffer and build equals bpftrace's
# count of the same loader calls; and the bandwidth of the blocking reads and
# writes (bytes / host time of each call, clpeak's first call of each a
# warm-up it does not count) agrees with what clpeak prints, which it times
# around the same calls with std::chrono: bound 15% (the two clocks frame
# the call a few microseconds apart; each call moves 512 MB in ~40 ms).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/opencl_lib.sh"
need_opencl_witness
need_cmd clpeak clpeak

cl_witness_start
"$SPANTRACE" record -q --opencl -o "$TMP/t.jsonl" -- clpeak --transfer-bandwidth \
	>"$TMP/clpeak.out" 2>"$TMP/rec.err" || fail "record failed: $(tail -n 3 "$TMP/rec.err")"
cl_witness_stop
pid=$(jq -r 'select(.type == "cl_transfer") | .pid' "$TMP/t.jsonl" | head -n 1)
[ -n "$pid" ] || fail "no cl_transfer record: $(tail -n 3 "$TMP/rec.err")"
cl_compare "$pid" "$TMP/t.jsonl"
# clpeak's non-blocking writes and reads: there are some, and none has a bandwidth
assert_pos "non-blocking transfers" "$(cl_ours "$TMP/t.jsonl" '.type == "cl_transfer" and .blocking == false')"
assert_eq "non-blocking transfers: bandwidth unknown (null)" "0" \
	"$(cl_ours "$TMP/t.jsonl" '.type == "cl_transfer" and .blocking == false and .gbps != null')"
assert_pos "cl_mem records" "$(cl_ours "$TMP/t.jsonl" '.type == "cl_mem"')"
peak=$(jq -s '[.[] | select(.type == "cl_mem")] | map(.peak_bytes) | max' "$TMP/t.jsonl")
assert_le "device memory peak at least one 512 MB buffer" 536870912 "$peak"

# ours CALL -> GB/s over its blocking calls after the first
ours() {
	jq -s --arg c "$1" '[.[] | select(.type == "cl_transfer" and .call == $c and .blocking)] | .[1:]
		| (map(.bytes) | add) / (map(.host_ns) | add)' "$TMP/t.jsonl"
}
check() { # CALL clpeak's label
	local theirs mine
	theirs=$(awk -v l="$2" '{ s = $0; sub(/^ +/, "", s) } index(s, l " ") == 1 && $NF ~ /^[0-9.]+$/ { print $NF; exit }' \
		"$TMP/clpeak.out")
	[ -n "$theirs" ] || fail "clpeak printed no '$2': $(cat "$TMP/clpeak.out")"
	mine=$(ours "$1")
	ok "$1: clpeak $theirs GB/s, ours $mine GB/s"
	need_num "$1: bandwidths" "$theirs" "$mine"
	assert_pos "$1: clpeak's bandwidth" "$theirs"
	assert_le "$1 |ours - clpeak| / clpeak" \
		"$(awk -v a="$mine" -v b="$theirs" 'BEGIN { d = a - b; if (d < 0) d = -d; print d / b }')" 0.15
}
check clEnqueueWriteBuffer enqueueWriteBuffer
check clEnqueueReadBuffer enqueueReadBuffer
