#!/usr/bin/env bash
# t_opencl_binary.sh - `record --opencl --binary PATH`: the loader is shared
# by every OpenCL program, so the BPF side keeps only callers running PATH.
# clpeak (the binary) and a pyopencl program run at the same time; every
# record is clpeak's, and its counts equal bpftrace's on the same calls.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/opencl_lib.sh"
need_opencl_witness
need_cmd clpeak clpeak
need_pyopencl

cl_witness_start
"$SPANTRACE" record -q --opencl --binary "$(command -v clpeak)" -o "$TMP/t.jsonl" 2>"$TMP/rec.err" &
rec=$!
wait_for grep -qs '"type":"session"' "$TMP/t.jsonl" || fail "record did not start: $(cat "$TMP/rec.err")"
touch "$TMP/go"
/usr/bin/python3 "$ROOT/tests/helpers/cl_pyopencl.py" "$TMP/go" 200 >"$TMP/py.out" 2>"$TMP/py.err" &
py=$!
clpeak --kernel-latency >"$TMP/clpeak.out" 2>&1 &
cp=$!
wait $cp || fail "clpeak failed: $(tail -n 3 "$TMP/clpeak.out")"
wait $py || fail "pyopencl program failed: $(tail -n 3 "$TMP/py.err")"
kill -INT $rec
wait $rec || fail "record failed: $(tail -n 3 "$TMP/rec.err")"
cl_witness_stop
assert_le "clpeak made thousands of enqueues" 10000 "$(cl_bt $cp clEnqueueNDRangeKernel)"
assert_le "bpftrace saw the pyopencl program too" 400 "$(cl_bt $py clEnqueueNDRangeKernel)"
assert_eq "records of any other pid" 0 "$(cl_ours "$TMP/t.jsonl" "(.type | startswith(\"cl_\")) and .pid != $cp")"
cl_compare $cp "$TMP/t.jsonl"
