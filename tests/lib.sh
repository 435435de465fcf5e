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
TMP=$(mktemp -d /tmp/spantrace-test.XXXXXX)   # KEEP_TMP=1: left behind, to look at after a run
# at_exit 'CMD': run CMD at the exit, before the cleanup (stopping a server).
_AT_EXIT=()
at_exit() { _AT_EXIT+=("$1"); }
_on_exit() {
	local c
	for c in "${_AT_EXIT[@]}"; do eval "$c"; done
	[ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"
	jobs -p | xargs -r kill 2>/dev/null
	if [ "${_CASES_FAILED:-0}" -gt 0 ]; then   # test_case: the test fails at its end
		echo "FAIL: $_CASES_FAILED of $_CASES cases failed:$_CASES_FAILED_NAMES" >&2
		exit 1
	fi
}
trap _on_exit EXIT

# A verdict ends the test wherever it is given. `exit` in a subshell -
# $(...), a pipeline, ( ... ) & - only leaves that subshell, and the test
# would go on to pass: so a verdict from a subshell also signals the test's
# own shell, whose trap exits with the same status.
TEST_PID=$BASHPID
trap 'exit 1' USR1
trap 'exit 77' USR2
fail() {
	echo "FAIL: $*" >&2
	if [ -n "${CASE_PID:-}" ]; then   # in a test_case: it ends the case, not the test
		[ "$BASHPID" = "$CASE_PID" ] || kill -USR1 "$CASE_PID" 2>/dev/null
		exit 1
	fi
	[ "$BASHPID" = "$TEST_PID" ] || kill -USR1 "$TEST_PID" 2>/dev/null
	exit 1
}

# test_case NAME CMD [ARGS...]: one named case (git's test_expect_success).
# CMD runs in a subshell of its own: a failed check ends the case, from
# wherever it is given, and the next case runs; the test fails at its end,
# naming each failed case. Every case says "case NAME: ok" or "FAILED".
# A skip still skips the whole test. Variables a case sets stay in it.
_CASES=0 _CASES_FAILED=0 _CASES_FAILED_NAMES=
test_case() {
	local name=$1 rc
	shift
	_CASES=$((_CASES + 1))
	( CASE_PID=$BASHPID; trap 'exit 1' USR1; "$@" )
	rc=$?
	if [ $rc = 0 ]; then
		echo "case $name: ok"
	else
		echo "case $name: FAILED" >&2
		_CASES_FAILED=$((_CASES_FAILED + 1)) _CASES_FAILED_NAMES="$_CASES_FAILED_NAMES $name;"
	fi
}
skip() { # the reason is the log's last line: stderr from a subshell, whose stdout is captured
	[ "$BASHPID" = "$TEST_PID" ] && echo "$*" || { echo "$*" >&2; kill -USR2 "$TEST_PID" 2>/dev/null; }
	exit 77
}
ok() { echo "ok: $*"; }

# is_num X: X is a plain decimal number (an integer, a fraction, an exponent);
# "", "null", "nan" and "1.2.3" are not.
is_num() { [[ $1 =~ ^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]]; }
# need_num WHAT X...: every X is a number, else the test fails naming WHAT.
need_num() {
	local what=$1 x
	shift
	for x; do is_num "$x" || fail "$what: '$x' is not a number"; done
}
# numeric comparisons; each refuses an operand that is not a number (awk
# would compare "" <= "0.6" and "1" <= "null" as strings, and pass)
_cmp() { awk -v a="$2" -v b="$3" "BEGIN { exit !(a $1 b) }"; }
# assert_eq WHAT EXPECTED ACTUAL: equal strings. An empty or null EXPECTED
# is refused: two outputs that are both missing would agree. Say what is
# expected with assert_empty instead.
assert_eq() {
	[ -n "$2" ] && [ "$2" != null ] || fail "$1: the expected value is '$2': nothing to compare with"
	[ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
	ok "$1 = $3"
}
# assert_empty WHAT ACTUAL: nothing (an empty string) is what is expected.
assert_empty() { [ -z "$2" ] || fail "$1: expected nothing, got '$2'"; ok "$1: empty"; }
# assert_le WHAT A B  (numeric A <= B); assert_lt, assert_ge likewise
assert_le() { need_num "$1" "$2" "$3"; _cmp '<=' "$2" "$3" || fail "$1: $2 > $3"; ok "$1: $2 <= $3"; }
assert_lt() { need_num "$1" "$2" "$3"; _cmp '<' "$2" "$3" || fail "$1: $2 >= $3"; ok "$1: $2 < $3"; }
assert_ge() { need_num "$1" "$2" "$3"; _cmp '>=' "$2" "$3" || fail "$1: $2 < $3"; ok "$1: $2 >= $3"; }
# assert_pos WHAT X: something happened - X is a number above 0.
assert_pos() { need_num "$1" "$2"; _cmp '>' "$2" 0 || fail "$1: $2, not above 0"; ok "$1: $2 > 0"; }
# assert_between WHAT LO X HI: LO <= X <= HI, numerically.
assert_between() {
	need_num "$1" "$2" "$3" "$4"
	_cmp '<=' "$2" "$3" && _cmp '<=' "$3" "$4" || fail "$1: $3 is not within [$2, $4]"
	ok "$1: $2 <= $3 <= $4"
}
# run_ok WHAT CMD...: CMD must exit 0; prints its stdout (so a failing inner
# command of $(run_ok ...) ends the test, with its stderr in the message).
run_ok() {
	local what=$1 out rc
	shift
	out=$("$@" 2>"$TMP/run_ok.err") && { printf '%s\n' "$out"; return 0; }
	rc=$?
	fail "$what: '$*' exited $rc: $(tail -c 400 "$TMP/run_ok.err")"
}
# need_cmd CMD PACKAGE: a tool `make deps` installs; its absence is a failure.
need_cmd() { command -v "$1" >/dev/null || fail "$1 is missing: make deps installs it (Debian $2)"; }

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
# perf probe and perf's sdt events need tracefs, which a fresh machine may
# not have mounted: mount it (root), and skip only when that cannot be done.
need_tracefs() {
	[ -d /sys/kernel/tracing/events ] && return 0
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
	[ -d /sys/kernel/tracing/events ] || skip "tracefs is not mounted at /sys/kernel/tracing and cannot be (perf probe needs it)"
}
need_opencl() { need_cmd clinfo clinfo; clinfo -l 2>/dev/null | grep -q Device || skip "no OpenCL device (clinfo lists none)"; }

# wait_for CMD... : retries for up to 10 s ($WAIT_S s where set)
wait_for() { local i; for i in $(seq $((${WAIT_S:-10} * 10))); do "$@" && return 0; sleep 0.1; done; return 1; }
# wait_long CMD...: wait_for, for up to 30 s (a loaded box, Prometheus's start): the one poll loop
wait_long() { WAIT_S=30 wait_for "$@"; }
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
