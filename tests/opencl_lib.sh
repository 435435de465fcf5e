# tests/opencl_lib.sh - sourced by the --opencl tests: an outside witness
# (bpftrace uprobes on the OpenCL ICD loader, counting calls per pid) and the
# comparison of its counts with the records of `spantrace record --opencl`.
# Source lib.sh first.
CL_LOADER=$(ldconfig -p | awk '/libOpenCL\.so\.1 .*x86-64/ { print $NF; exit }')
CL_FUNCS=(clEnqueueNDRangeKernel clEnqueueReadBuffer clEnqueueWriteBuffer clEnqueueMapBuffer
	clCreateBuffer clReleaseMemObject clFinish clWaitForEvents clBuildProgram)

need_opencl_witness() {
	need_bpf
	need_opencl
	need_cmd bpftrace bpftrace
	need_cmd jq jq
	# make deps installs the loader (ocl-icd-opencl-dev brings it)
	[ -n "$CL_LOADER" ] && [ -r "$CL_LOADER" ] || fail "no libOpenCL.so.1: make deps installs it (Debian ocl-icd-libopencl1)"
	[ -x "$SPANTRACE" ] || fail "no $SPANTRACE (build first)"
}
# need_pyopencl: Debian's python3-pyopencl, which make deps installs
need_pyopencl() {
	/usr/bin/python3 -c 'import pyopencl' 2>/dev/null ||
		fail "python3 cannot import pyopencl: make deps installs it (Debian python3-pyopencl)"
}

# Starts bpftrace counting every loader call of CL_FUNCS per {pid, function},
# every process (the maps are keyed by pid); returns once it is armed, which
# a `clinfo -l` canary proves.
cl_witness_start() {
	local prog="" f
	for f in "${CL_FUNCS[@]}"; do prog+="uprobe:$CL_LOADER:$f { @c[pid, \"$f\"] = count(); }
"; done
	prog+="uprobe:$CL_LOADER:clGetPlatformIDs { printf(\"armed %d\\n\", pid); }"
	bpftrace -e "$prog" >"$TMP/bt.out" 2>"$TMP/bt.err" &
	CL_BT=$!
	wait_for grep -q Attaching "$TMP/bt.out" "$TMP/bt.err" || fail "bpftrace did not attach: $(cat "$TMP/bt.err")"
	cl_armed() { clinfo -l >/dev/null 2>&1; grep -q '^armed' "$TMP/bt.out"; }
	wait_for cl_armed || fail "bpftrace saw no clinfo canary: $(cat "$TMP/bt.err")"
}

cl_witness_stop() {
	stop_bpftrace "$CL_BT"
	grep -q '^@c\[' "$TMP/bt.out" || fail "bpftrace printed no counts: $(head -c 500 "$TMP/bt.out")"
}

# cl_bt PID FUNC -> how many times bpftrace saw PID call FUNC
cl_bt() {
	awk -v m="@c[$1, $2]:" '$1 " " $2 == m { print $3; f = 1 } END { if (!f) print 0 }' "$TMP/bt.out"
}

# cl_ours JSONL JQ-FILTER -> how many records of the run match
cl_ours() { jq -c "select($2)" "$1" | wc -l; }

# cl_compare PID JSONL: every count of ours equals the witness's, and the
# witness saw PID call the loader (all counts 0 would agree too).
cl_compare() {
	local pid=$1 j=$2 f n seen=0
	for f in "${CL_FUNCS[@]}"; do seen=$((seen + $(cl_bt "$pid" "$f"))); done
	assert_pos "loader calls of pid $pid that bpftrace saw" "$seen"
	assert_eq "kernel enqueues (bpftrace vs cl_kernel records)" "$(cl_bt "$pid" clEnqueueNDRangeKernel)" \
		"$(cl_ours "$j" ".type == \"cl_kernel\" and .pid == $pid")"
	for f in clEnqueueReadBuffer clEnqueueWriteBuffer clEnqueueMapBuffer; do
		assert_eq "$f transfers (bpftrace vs ours)" "$(cl_bt "$pid" $f)" \
			"$(cl_ours "$j" ".type == \"cl_transfer\" and .pid == $pid and .call == \"$f\"")"
	done
	for f in clFinish clWaitForEvents; do
		assert_eq "$f waits (bpftrace vs ours)" "$(cl_bt "$pid" $f)" \
			"$(cl_ours "$j" ".type == \"cl_wait\" and .pid == $pid and .call == \"$f\"")"
	done
	assert_eq "allocations (bpftrace clCreateBuffer vs cl_mem create)" "$(cl_bt "$pid" clCreateBuffer)" \
		"$(cl_ours "$j" ".type == \"cl_mem\" and .pid == $pid and .op == \"create\"")"
	assert_eq "releases (bpftrace clReleaseMemObject vs cl_mem release)" "$(cl_bt "$pid" clReleaseMemObject)" \
		"$(cl_ours "$j" ".type == \"cl_mem\" and .pid == $pid and .op == \"release\"")"
	assert_eq "builds (bpftrace vs cl_build)" "$(cl_bt "$pid" clBuildProgram)" \
		"$(cl_ours "$j" ".type == \"cl_build\" and .pid == $pid")"
	n=$(jq -s 'map(select(.type == "summary"))[0].loss | "\(.dropped) \(.invalid)"' -r "$j")
	assert_eq "records lost or rejected" "0 0" "$n"
	assert_eq "calls unrecorded (table full)" 0 "$(jq -s 'map(select(.type == "summary"))[0].cl_table_full' "$j")"
}
