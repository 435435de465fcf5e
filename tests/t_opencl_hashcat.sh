#!/usr/bin/env bash
# t_opencl_hashcat.sh - `record --opencl` on `hashcat -b -m 0` (Debian's
# hashcat, MD5 benchmark on PoCL's CPU device): its enqueues, transfers,
# waits, buffers and builds equal what bpftrace counts on the same loader
# calls at the same time (hashcat dlopen()s the loader at run time). The
# first run on a machine compiles hashcat's kernels (~30 s, cached after).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/opencl_lib.sh"
need_opencl_witness
need_cmd hashcat hashcat

cl_witness_start
( cd "$TMP" && timeout 300 "$SPANTRACE" record -q --opencl -o "$TMP/t.jsonl" -- hashcat -b -m 0 --machine-readable \
	>"$TMP/hc.out" 2>"$TMP/rec.err" ) || fail "record failed: $(tail -n 3 "$TMP/rec.err") $(tail -n 3 "$TMP/hc.out")"
cl_witness_stop
grep -q '^1:0:' "$TMP/hc.out" || fail "hashcat printed no benchmark line: $(tail -n 5 "$TMP/hc.out")"
pid=$(jq -r 'select(.type == "cl_kernel") | .pid' "$TMP/t.jsonl" | head -n 1)
[ -n "$pid" ] || fail "no cl_kernel record: $(tail -n 3 "$TMP/rec.err")"
cl_compare "$pid" "$TMP/t.jsonl"
assert_le "hashcat enqueued kernels" 10 "$(cl_ours "$TMP/t.jsonl" '.type == "cl_kernel"')"
assert_le "named kernels (m00000_...)" 1 "$(cl_ours "$TMP/t.jsonl" '.type == "cl_kernel" and (.name // "" | startswith("m00000"))')"
