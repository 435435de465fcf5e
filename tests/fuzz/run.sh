#!/usr/bin/env bash
# tests/fuzz/run.sh - builds and runs the libFuzzer harnesses (make fuzz).
#
#   tests/fuzz/run.sh [TARGET...]          fuzz each target for FUZZ_SECONDS (default 60)
#   tests/fuzz/run.sh --replay [TARGET...] run each harness once over its seed corpus and
#                                          regression inputs (tests/t_fuzz_regress.sh)
#   tests/fuzz/run.sh --build [TARGET...]  only build
#
# A target is tests/fuzz/fuzz_<target>.c; its "fuzz-sources:" line names the project
# files compiled in with it, "fuzz-cflags:" extra compile flags, "fuzz-libs:" link
# flags; fuzz_<target>.options extra libFuzzer flags. Binaries go to $BUILD/fuzz/,
# the growing corpus to $BUILD/fuzz/corpus/<target> (the committed seeds in
# tests/fuzz/corpus/<target> are read, never written). A crash is copied
# to tests/fuzz/regress/<target>/ so the replay test keeps checking it; the
# script then exits non-zero. Exit 77 when clang's libFuzzer runtime is missing.
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
BUILD=${BUILD:-$ROOT/build}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_CC=${FUZZ_CC:-clang}
FUZZ_DIR=$ROOT/tests/fuzz
OUT=$BUILD/fuzz
FUZZ_FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# The engine's probes are irrelevant here; -DINFER_NO_PROBES keeps the harnesses plain.
# -I$BUILD: version.h, which make writes
CFLAGS="-std=gnu11 -D_GNU_SOURCE -DINFER_NO_PROBES -Iinclude -Iinference -Iuser -Ibpf -I$FUZZ_DIR -I$BUILD"
# UBSan reports fail the input; ASan leak checks stay on (a leak is a finding too).
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}

mode=fuzz
case ${1:-} in
--replay) mode=replay; shift ;;
--build) mode=build; shift ;;
-h|--help) sed -n '2,15p' "$0"; exit 0 ;;
esac

all_targets() { for f in "$FUZZ_DIR"/fuzz_*.c; do t=${f##*/fuzz_}; echo "${t%.c}"; done; }
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(all_targets)

# Fails (77) early when this clang cannot link libFuzzer.
probe_toolchain() {
	local probe=$OUT/probe.$$   # per process: two runs may share $OUT
	mkdir -p "$OUT"
	printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){return 0;}\n' >"$probe.c"
	if ! "$FUZZ_CC" -fsanitize=fuzzer "$probe.c" -o "$probe" 2>"$probe.log"; then
		echo "fuzz: $FUZZ_CC cannot link -fsanitize=fuzzer (install libclang-rt-14-dev)"
		rm -f "$probe" "$probe.c" "$probe.log"
		exit 77
	fi
	rm -f "$probe" "$probe.c" "$probe.log"
}

# Lines "fuzz-sources: a.c b.c" / "fuzz-libs: -lx" of a harness.
header_field() { sed -n "s/^[ /*]*$2:[[:space:]]*//p" "$1" | tr '\n' ' '; }

# Builds $OUT/fuzz_<target> when any of its inputs is newer than it.
build_target() {
	local t=$1 src=$FUZZ_DIR/fuzz_$1.c bin=$OUT/fuzz_$1 srcs libs cflags dep stale=0
	[ -f "$src" ] || { echo "fuzz: no harness $src" >&2; return 1; }
	srcs=$(header_field "$src" fuzz-sources)
	libs=$(header_field "$src" fuzz-libs)
	cflags=$(header_field "$src" fuzz-cflags)
	if [ ! -x "$bin" ]; then stale=1; fi
	for dep in "$src" "$FUZZ_DIR"/*.h $srcs inference/*.h user/*/*.h bpf/*.h; do
		[ "$dep" -nt "$bin" ] && stale=1
	done
	[ $stale = 1 ] || return 0
	# shellcheck disable=SC2086  # word lists on purpose
	if ! "$FUZZ_CC" $FUZZ_FLAGS $CFLAGS $cflags -o "$bin.tmp" "$src" $srcs $libs 2>"$OUT/fuzz_$t.build.log"; then
		echo "fuzz: building $t failed:" >&2
		tail -n 20 "$OUT/fuzz_$t.build.log" >&2
		return 1
	fi
	mv "$bin.tmp" "$bin"
}

# Inputs for a replay: committed seeds and regression files.
replay_inputs() {
	local d
	for d in "$FUZZ_DIR/corpus/$1" "$FUZZ_DIR/regress/$1"; do
		[ -d "$d" ] && find "$d" -type f ! -name '.*' ! -name README
	done
}

replay_target() {
	local t=$1 log=$OUT/fuzz_$1.replay.log files
	mapfile -t files < <(replay_inputs "$t")
	if [ ${#files[@]} = 0 ]; then
		echo "fuzz: $t has no seeds or regression inputs" >&2
		return 1
	fi
	if ! "$OUT/fuzz_$t" -error_exitcode=1 -runs=1 "${files[@]}" >"$log" 2>&1; then
		echo "FAIL $t: replay of ${#files[@]} inputs crashed:" >&2
		grep -E 'ERROR|SUMMARY|invariant|Running:|runtime error' "$log" | tail -n 8 >&2
		return 1
	fi
	echo "ok $t: ${#files[@]} inputs replayed clean"
}

# Copies crash-/leak-/timeout-/oom- artifacts into the regression dir.
keep_findings() {
	local t=$1 art=$2 f n=0
	mkdir -p "$FUZZ_DIR/regress/$t"
	for f in "$art"/crash-* "$art"/leak-* "$art"/timeout-* "$art"/oom-*; do
		[ -f "$f" ] || continue
		cp "$f" "$FUZZ_DIR/regress/$t/"
		n=$((n + 1))
	done
	echo $n
}

fuzz_target() {
	local t=$1 log=$OUT/fuzz_$1.log corpus=$OUT/corpus/$1 art=$OUT/artifacts/$1 rc found
	local extra=()
	mkdir -p "$corpus" "$art"
	rm -f "$art"/*
	[ -f "$FUZZ_DIR/fuzz_$t.options" ] && read -r -a extra <"$FUZZ_DIR/fuzz_$t.options"
	"$OUT/fuzz_$t" -max_total_time="$FUZZ_SECONDS" -error_exitcode=1 -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$art/" "${extra[@]}" \
		"$corpus" "$FUZZ_DIR/corpus/$t" >"$log" 2>&1
	rc=$?
	found=$(keep_findings "$t" "$art")
	# The last status line has cov:, ft:, corp: and exec/s; the final stats the totals.
	local status runs
	status=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | sed 's/^#[0-9]*[[:space:]]*//')
	runs=$(sed -n 's/^stat::number_of_executed_units:[[:space:]]*//p' "$log" | tail -n 1)
	printf '%-18s %6ss  execs %-10s %s  findings %s\n' "$t" "$FUZZ_SECONDS" "${runs:-?}" \
		"${status:-(no status line)}" "$found"
	if [ "$rc" != 0 ] || [ "$found" != 0 ]; then
		echo "  $t: exit $rc; inputs kept in tests/fuzz/regress/$t; log $log" >&2
		grep -E 'ERROR|SUMMARY|invariant|runtime error' "$log" | head -n 6 | sed 's/^/  | /' >&2
		return 1
	fi
}

probe_toolchain
# Harnesses that need real files (fuzz_elf) put them here; a crash leaves them.
export TMPDIR=$OUT/tmp
mkdir -p "$TMPDIR"
failed=0
for t in "${targets[@]}"; do
	build_target "$t" || { failed=1; continue; }
	case $mode in
	build) echo "built $OUT/fuzz_$t" ;;
	replay) replay_target "$t" || failed=1 ;;
	fuzz) fuzz_target "$t" || failed=1 ;;
	esac
done
exit $failed
