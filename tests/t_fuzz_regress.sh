#!/usr/bin/env bash
# fast
# Replays every fuzz harness over its committed seeds (tests/fuzz/corpus/<target>)
# and past findings (tests/fuzz/regress/<target>): a fixed bug that comes back
# fails here. Builds the harnesses into $BUILD/fuzz first (needs clang's libFuzzer).
source "$(dirname "$0")/lib.sh"
# make deps installs clang and its libFuzzer runtime (libclang-rt-14-dev):
# neither missing is a skip
need_cmd "${FUZZ_CC:-clang}" clang
out=$("$ROOT/tests/fuzz/run.sh" --replay 2>&1)
rc=$?
echo "$out"
[ $rc = 77 ] && fail "$(echo "$out" | tail -n 1)"
[ $rc = 0 ] || fail "a fuzz harness crashed on a seed or regression input (exit $rc)"
targets=$(find "$ROOT/tests/fuzz" -maxdepth 1 -name 'fuzz_*.c' | wc -l)
assert_pos "fuzz harnesses in tests/fuzz" "$targets"
replayed=$(echo "$out" | grep -c '^ok ')
assert_eq "harnesses replayed clean" "$targets" "$replayed"
regress=$(find "$ROOT/tests/fuzz/regress" -type f 2>/dev/null | wc -l)
ok "$regress regression inputs among them"
