#!/usr/bin/env bash
# t_opencl_top_daemon.sh - --opencl in `top` and `daemon` on a pyopencl
# program (Debian's python3-pyopencl): top's rows cl enqueue / transfer /
# build / device count exactly the program's calls; the daemon, attached by
# pid with nothing streamed, serves spantrace_opencl_* histograms whose
# counts are the same calls, aggregated in the kernel, and device memory
# per context (peak, buffers created).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_opencl
need_cmd curl curl  # before need_daemon_build, which skips without them
need_cmd jq jq
need_daemon_build
/usr/bin/python3 -c 'import pyopencl' 2>/dev/null ||
	fail "python3 cannot import pyopencl: make deps installs it (Debian python3-pyopencl)"
helper=$ROOT/tests/helpers/cl_pyopencl.py
iters=30

# top: the command starts under it; the final frame counts everything.
touch "$TMP/go"
"$SPANTRACE" top -b -d 1 -w 100 --opencl -- /usr/bin/python3 "$helper" "$TMP/go" $iters \
	>"$TMP/top.out" 2>"$TMP/top.err" || fail "top failed: $(tail -n 3 "$TMP/top.err")"
row() { # NAME -> COUNT in the last frame
	awk -v n="$1" '{ s = $0; sub(/^ +/, "", s) } index(s, n " ") == 1 { c = substr(s, length(n) + 1); split(c, f, " "); v = f[1] }
		END { print v }' "$TMP/top.out"
}
assert_eq "top: cl enqueue" $((2 * iters)) "$(row "cl enqueue")"
assert_eq "top: cl transfer (one write, a read per iteration)" $((iters + 1)) "$(row "cl transfer")"
assert_eq "top: cl build" 1 "$(row "cl build")"
assert_eq "top: cl device (kernels whose START and END were read)" $iters "$(row "cl device")"

# daemon: attached by pid to a program already running.
rm -f "$TMP/go"
/usr/bin/python3 "$helper" "$TMP/go" $iters "$TMP/done" >"$TMP/py.out" 2>"$TMP/py.err" &
py=$!
wait_for grep -q '^ready' "$TMP/py.out" || fail "pyopencl program not ready: $(cat "$TMP/py.err")"
"$SPANTRACE" daemon --opencl -p $py --listen 127.0.0.1:0 --interval 0.2 >"$TMP/daemon.log" 2>&1 &
DPID=$!
wait_for grep -q 'metrics at http' "$TMP/daemon.log" || fail "daemon did not start: $(cat "$TMP/daemon.log")"
DPORT=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")
touch "$TMP/go"
wait_for grep -q device_ns "$TMP/py.out" || fail "pyopencl program did not finish: $(cat "$TMP/py.err")"
# The daemon snapshots the maps once an interval: wait for the last call.
caught_up() { metrics >"$TMP/m.txt" && [ "$(msum "$TMP/m.txt" spantrace_opencl_transfer_seconds_count)" = $((iters + 1)) ]; }
wait_for caught_up || fail "daemon never showed $((iters + 1)) transfers: $(grep -c opencl "$TMP/m.txt") opencl lines"
touch "$TMP/done"
wait $py || fail "pyopencl program failed"
stop_daemon
assert_eq "daemon: enqueues" $((2 * iters)) "$(msum "$TMP/m.txt" spantrace_opencl_enqueue_seconds_count)"
assert_eq "daemon: transfers" $((iters + 1)) "$(msum "$TMP/m.txt" spantrace_opencl_transfer_seconds_count)"
assert_eq "daemon: builds" 1 "$(msum "$TMP/m.txt" spantrace_opencl_build_seconds_count)"
assert_eq "daemon: kernel device times read" $iters "$(msum "$TMP/m.txt" spantrace_opencl_kernel_device_seconds_count)"
# Device memory per context: the program's buffers all released by now.
assert_eq "daemon: device memory peak (16 KB buffer + the largest temporary)" $((16384 + 1024 * iters)) \
	"$(msum "$TMP/m.txt" spantrace_opencl_device_memory_peak_bytes)"
assert_eq "daemon: buffers created" $((iters + 1)) "$(msum "$TMP/m.txt" spantrace_opencl_buffers_created_total)"
