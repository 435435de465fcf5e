# tests/lib.sh - sourced by tests/t_*.sh. Paths, assertions and skips.
set -u
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
MODELS=${MODELS:-$(cd "$ROOT/.." && pwd)/shared/models}
INFER=$BUILD/infer
SPANTRACE=$BUILD/spantrace
MKMODEL=$BUILD/mkmodel
DEMO_MODEL=$BUILD/models/demo15M.bin
DEMO_TOK=$BUILD/models/demo_tokenizer.bin
TMP=$(mktemp -d /tmp/spantrace-test.XXXXXX)
trap 'rm -rf "$TMP"; jobs -p | xargs -r kill 2>/dev/null' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "$*"; exit 77; }
ok() { echo "ok: $*"; }

# assert_eq WHAT EXPECTED ACTUAL
assert_eq() { [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"; ok "$1 = $3"; }
# assert_le WHAT A B  (numeric A <= B)
assert_le() { awk -v a="$2" -v b="$3" 'BEGIN{exit !(a<=b)}' || fail "$1: $2 > $3"; ok "$1: $2 <= $3"; }

need_root() { [ "$(id -u)" = 0 ] || skip "needs root (CAP_BPF and CAP_PERFMON) to load BPF programs"; }
# bpf_missing: why this machine cannot load the tracer's BPF (nothing when it can)
bpf_missing() {
	if [ "$(id -u)" != 0 ]; then
		echo "needs root (CAP_BPF and CAP_PERFMON) to load BPF programs"
	elif [ ! -r /sys/kernel/btf/vmlinux ]; then
		echo "kernel has no BTF at /sys/kernel/btf/vmlinux"
	elif ! grep -q uprobe /sys/bus/event_source/devices/*/type 2>/dev/null &&
		[ ! -d /sys/bus/event_source/devices/uprobe ]; then
		echo "kernel has no uprobe PMU"
	fi
}
need_bpf() {
	local why
	why=$(bpf_missing)
	[ -z "$why" ] || skip "$why"
}
need_models() { [ -r "$MODELS/stories260K.bin" ] || skip "no ../shared/models/stories260K.bin beside the project"; }
need_opencl() { clinfo -l 2>/dev/null | grep -q Device || skip "no OpenCL device (clinfo lists none)"; }

# wait_for CMD... : retries for up to 10 s ($WAIT_S s where set)
wait_for() { local i; for i in $(seq $((${WAIT_S:-10} * 10))); do "$@" && return 0; sleep 0.1; done; return 1; }
# stop_bpftrace PID: SIGINT, repeated each second until bpftrace exits (it then
# prints its maps); 30 s without an exit fails. bpftrace 0.17 leaves its poll
# loop only when the signal interrupts epoll_wait or an event follows it: a
# SIGINT that lands between two waits (likelier under load) sets a flag that an
# idle bpftrace never reads, and one signal would hang the test.
stop_bpftrace() {
	local i
	for i in $(seq 300); do
		[ $((i % 10)) = 1 ] && kill -INT "$1" 2>/dev/null
		kill -0 "$1" 2>/dev/null || { wait "$1"; return; }
		sleep 0.1
	done
	kill -KILL "$1"
	fail "bpftrace did not exit within 30 s of SIGINT"
}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}  # spin-waiting OpenMP collapses when tests share 2 cores

# is_sanitized: this build's engine was made with SANITIZE=1 (ASan/UBSan).
is_sanitized() { ldd "$BUILD/libinfer.so" 2>/dev/null | grep -q libasan; }

# expect_fail NAME PATTERN CMD... : CMD exits non-zero (not by a signal) and
# its stderr matches PATTERN; its stdout is left in $TMP/out.
expect_fail() {
	local name=$1 pat=$2
	shift 2
	"$@" >"$TMP/out" 2>"$TMP/err" </dev/null
	local rc=$?
	[ $rc -ne 0 ] || fail "$name: exited 0"
	[ $rc -lt 128 ] || fail "$name: killed by signal $((rc - 128))"
	grep -q -- "$pat" "$TMP/err" || fail "$name: stderr lacks '$pat': $(head -c 300 "$TMP/err")"
	ok "$name: exit $rc, '$(grep -m1 -- "$pat" "$TMP/err" | head -c 160)'"
}

# fifo_engine [INFER_BIN]: `infer --serve` on the demo model, fed through a
# fifo held on fd 3; sets SRV. ask: one prompt, waits for its reply line.
# Close fd 3 (exec 3>&-) to end it; start tracers with 3>&-.
fifo_engine() {
	mkfifo "$TMP/in"
	OMP_NUM_THREADS=1 "${1:-$INFER}" "$DEMO_MODEL" -z "$DEMO_TOK" --serve -n 6 -b cpu -t 0 \
		<"$TMP/in" >"$TMP/out" 2>"$TMP/srv.err" &
	SRV=$!
	exec 3>"$TMP/in"
}
fifo_lines() { wc -l <"$TMP/out"; }
fifo_has_replies() { [ "$(fifo_lines)" -ge "$1" ]; }
ask() {
	local want=$(($(fifo_lines) + 1))
	echo "once upon a time" >&3
	wait_for fifo_has_replies $want || fail "no reply to request $want: $(cat "$TMP/srv.err")"
}
