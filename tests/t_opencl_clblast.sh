#!/usr/bin/env bash
# t_opencl_clblast.sh - `record --opencl` on CLBlast's xdot tuner (Debian's
# clblast-utils): it compiles a program per configuration and times each
# with events. Its enqueues, transfers, waits, buffers and builds equal what
# bpftrace counts on the same loader calls at the same time; every enqueue
# is named; each build has its own record.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/opencl_lib.sh"
need_opencl_witness
need_cmd clblast_tuner_xdot clblast-utils

cl_witness_start
( cd "$TMP" && "$SPANTRACE" record -q --opencl -o "$TMP/t.jsonl" -- clblast_tuner_xdot -runs 2 \
	>"$TMP/tuner.out" 2>"$TMP/rec.err" ) || fail "record failed: $(tail -n 3 "$TMP/rec.err")"
cl_witness_stop
grep -q 'Completed tuning' "$TMP/tuner.out" || fail "the tuner did not complete: $(tail -n 3 "$TMP/tuner.out")"
pid=$(jq -r 'select(.type == "cl_kernel") | .pid' "$TMP/t.jsonl" | head -n 1)
[ -n "$pid" ] || fail "no cl_kernel record: $(tail -n 3 "$TMP/rec.err")"
cl_compare "$pid" "$TMP/t.jsonl"
assert_le "several builds (one per configuration)" 4 "$(cl_ours "$TMP/t.jsonl" '.type == "cl_build" and .status == 0')"
assert_eq "every enqueue named" "0" "$(cl_ours "$TMP/t.jsonl" '.type == "cl_kernel" and .name == null')"
assert_le "kernel names from CLBlast (Xdot...)" 1 "$(cl_ours "$TMP/t.jsonl" '.type == "cl_kernel" and (.name | startswith("Xdot"))')"
