#!/usr/bin/env bash
# t_opencl_pyopencl.sh - `record --opencl -p PID` on a running pyopencl
# program (Debian's python3-pyopencl): attached by pid, no preload, no
# restart. Everything it does after the attach is seen: enqueues, transfers,
# waits, buffers, its build, equal to bpftrace's count of the same loader
# calls; kernels are named; a NULL local size is null; the device time the
# program read from its own events adds up to exactly what it printed; and
# device memory is live while its buffer exists and 0 once released.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/opencl_lib.sh"
need_opencl_witness
need_pyopencl
iters=40

/usr/bin/python3 "$ROOT/tests/helpers/cl_pyopencl.py" "$TMP/go" $iters >"$TMP/py.out" 2>"$TMP/py.err" &
py=$!
wait_for grep -q '^ready' "$TMP/py.out" || fail "pyopencl program not ready: $(cat "$TMP/py.err")"
cl_witness_start
"$SPANTRACE" record -q --opencl -p $py -o "$TMP/t.jsonl" 2>"$TMP/rec.err" &
rec=$!
wait_for grep -qs '"type":"session"' "$TMP/t.jsonl" || fail "record did not start: $(cat "$TMP/rec.err")"
touch "$TMP/go"
wait $py || fail "pyopencl program failed: $(tail -n 5 "$TMP/py.err")"
wait $rec || fail "record failed: $(tail -n 3 "$TMP/rec.err")"
cl_witness_stop

cl_compare $py "$TMP/t.jsonl"
assert_eq "kernel enqueues" $((2 * iters)) "$(cl_ours "$TMP/t.jsonl" '.type == "cl_kernel"')"
assert_eq "enqueues of 'scale' (named by clCreateKernel)" $iters \
	"$(cl_ours "$TMP/t.jsonl" '.type == "cl_kernel" and .name == "scale" and .local == [64]')"
assert_eq "enqueues of 'add_one', local size left to the driver: null" $iters \
	"$(cl_ours "$TMP/t.jsonl" '.type == "cl_kernel" and .name == "add_one" and .local == null and .global == [4096]')"
assert_eq "device times read by the program (all four)" $iters \
	"$(cl_ours "$TMP/t.jsonl" '.type == "cl_devtime" and .name == "scale" and .queued_ns != null and .submit_ns != null')"
assert_eq "device ns: the program's own sum vs ours" "$(tail -n 1 "$TMP/py.out" | jq -r .device_ns)" \
	"$(jq -s '[.[] | select(.type == "cl_devtime") | .dur_ns] | add' "$TMP/t.jsonl")"
assert_eq "blocking reads, bandwidth known" $iters \
	"$(cl_ours "$TMP/t.jsonl" '.type == "cl_transfer" and .direction == "d2h" and .blocking and .bytes == 16384 and .gbps > 0')"
last=$(jq -s '[.[] | select(.type == "cl_mem")] | last' "$TMP/t.jsonl")
assert_eq "last release frees; the context's live bytes back to 0" "true 0" "$(jq -r '"\(.freed) \(.live_bytes)"' <<<"$last")"
assert_eq "context peak: the 16 KB buffer and the largest temporary" $((16384 + 1024 * iters)) "$(jq .peak_bytes <<<"$last")"
