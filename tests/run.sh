#!/usr/bin/env bash
# tests/run.sh [PATTERN...] - runs every test and ends with "N passed, N failed[, N skipped]".
#
# A test is a unit binary build/tests/test_* or a script tests/t_*.sh.
# Exit 0 passes, 77 skips (the test prints why on its last line), anything else fails.
# FAST=1 runs only tests that declare "# fast" (the sanitizer pass uses it).
set -u
cd "$(dirname "$0")/.." || exit 2
export ROOT=$PWD BUILD=${BUILD:-$PWD/build}
TEST_TIMEOUT=${TEST_TIMEOUT:-300}
logdir=$BUILD/test-logs
mkdir -p "$logdir"

# Setup a fresh machine lacks: perf's SDT events (t_profile_perf, t_load_coexist)
# need tracefs, which Debian does not always mount.
if [ "$(id -u)" = 0 ] && [ -d /sys/kernel/tracing ] && ! mountpoint -q /sys/kernel/tracing; then
	if mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then
		echo "setup: mounted tracefs at /sys/kernel/tracing"
	else
		echo "setup: cannot mount tracefs at /sys/kernel/tracing; the perf tests will say so"
	fi
fi

tests=()
for t in "$BUILD"/tests/test_* tests/t_*.sh; do
	case $t in
	*.sh) [ -e "$t" ] || continue ;;   # a t_*.sh that is not executable fails below
	*) [ -x "$t" ] && [ -f "$t" ] || continue ;;   # unit binaries (not their .d files)
	esac
	if [ $# -gt 0 ]; then
		match=0
		for p in "$@"; do [[ $(basename "$t") == *$p* ]] && match=1; done
		[ $match = 1 ] || continue
	fi
	if [ "${FAST:-0}" = 1 ] && [[ $t == *.sh ]] && ! grep -q '^# fast' "$t"; then
		continue
	fi
	tests+=("$t")
done

passed=0 failed=0 skipped=0 failed_names=()
for t in "${tests[@]}"; do
	name=$(basename "$t")
	log=$logdir/$name.log
	start=$(date +%s.%N)
	if [ -x "$t" ]; then
		timeout --kill-after=10 "$TEST_TIMEOUT" "$t" >"$log" 2>&1 </dev/null
		rc=$?
	else
		echo "FAIL: $t is not executable (chmod +x): it would never run" >"$log"
		rc=126
	fi
	secs=$(printf '%.1f' "$(echo "$(date +%s.%N) - $start" | bc)")
	case $rc in
	0) passed=$((passed + 1)); echo "PASS $name (${secs}s)" ;;
	77) skipped=$((skipped + 1)); echo "SKIP $name: $(tail -n 1 "$log")" ;;
	*) failed=$((failed + 1)); failed_names+=("$name")
	   [ $rc = 124 ] && echo "FAIL $name (timed out after ${TEST_TIMEOUT}s)" || echo "FAIL $name (exit $rc, ${secs}s)"
	   tail -n 25 "$log" | sed 's/^/    | /' ;;
	esac
done

[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
line="$passed passed, $failed failed"
[ $skipped -gt 0 ] && line="$line, $skipped skipped"
echo "$line"
[ $failed = 0 ] && [ $((passed + skipped)) -gt 0 ]
