#!/usr/bin/env bash
# fast
# t_testlib.sh - the test library's verdicts hold (issue 46). Each helper is
# fed empty output, null, garbage and a failing inner command, in a child
# test of its own, and must end that child with a failure wherever it is
# called: in the test's shell, inside $(...), in a pipeline, in a background
# subshell. Control cases show each helper still passes what is true, so
# this test fails on a helper that refuses everything as well.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"

# child SNIPPET: runs SNIPPET as a test of its own (lib.sh and fault_lib.sh
# sourced); prints "RC LAST-LINE-OF-STDOUT". The snippet echoes "reached"
# at the end, so a helper that did not end the child shows.
child() {
	local out rc
	out=$(ROOT=$ROOT BUILD=$BUILD bash -c 'source "$ROOT/tests/lib.sh"; source "$ROOT/tests/helpers/fault_lib.sh"
'"$1"'
echo reached' 2>"$TMP/child.err")
	rc=$?
	echo "$rc $(tail -n 1 <<<"$out")"
}
# must_fail WHAT SNIPPET: the child exits 1, before "reached", saying FAIL.
must_fail() {
	local r
	r=$(child "$2")
	[ "${r%% *}" = 1 ] || fail "$1: the child exited ${r%% *}, not 1 (last line '${r#* }')"
	grep -q '^FAIL: ' "$TMP/child.err" || fail "$1: no FAIL line: $(cat "$TMP/child.err")"
	ok "$1 fails the test: $(grep -m1 '^FAIL: ' "$TMP/child.err" | head -c 140)"
}
# must_pass WHAT SNIPPET: the child runs to its end and exits 0.
must_pass() {
	local r
	r=$(child "$2")
	[ "$r" = "0 reached" ] || fail "$1: a true check did not pass: '$r' $(head -c 300 "$TMP/child.err")"
	ok "$1 passes"
}

# fail and skip end the test from wherever they are called
must_fail "fail in the test's shell" 'fail here'
must_fail "fail inside \$(...)" 'x=$(fail inner); echo "after: $x"'
must_fail "fail inside \$(...) inside a string" 'ok "value $(fail inner)"'
must_fail "fail in a pipeline" 'echo a | while read -r l; do fail "in a pipe: $l"; done; echo after'
must_fail "fail in a background subshell" '( fail "in the background" ) & wait $!; sleep 1'   # the subshell's fail must end the test before this sleep does
r=$(child 'x=$(skip "no device here"); echo "after: $x"')
assert_eq "skip inside \$(...): the child's status" 77 "${r%% *}"
assert_eq "skip inside \$(...): its reason, last" "no device here" "$(tail -n 1 "$TMP/child.err")"

# numeric assertions refuse what is not a number
for a in '""' null garbage '1.2.3' nan '"$(false)"' '"$(echo)"'; do
	must_fail "assert_le $a 1" "assert_le what $a 1"
	must_fail "assert_le 1 $a" "assert_le what 1 $a"
	must_fail "assert_lt $a 1" "assert_lt what $a 1"
	must_fail "assert_ge $a 1" "assert_ge what $a 1"
	must_fail "assert_pos $a" "assert_pos what $a"
	must_fail "assert_between 0 $a 9" "assert_between what 0 $a 9"
done
must_fail "assert_le 2 1" 'assert_le what 2 1'
must_fail "assert_le 10 9 (numbers, not strings)" 'assert_le what 10 9'
must_fail "assert_pos 0" 'assert_pos what 0'
must_fail "assert_pos -1" 'assert_pos what -1'
must_fail "assert_pos 0.0" 'assert_pos what 0.0'
must_fail "assert_between 1 0 2" 'assert_between what 1 0 2'
must_pass "assert_le 9 10, 0.5 0.6, 1e3 1001, -1 0" \
	'assert_le a 9 10; assert_le b 0.5 0.6; assert_le c 1e3 1001; assert_le d -1 0'
must_pass "assert_lt 1 2, assert_ge 2 2, assert_pos 0.001, assert_between 1 1 2" \
	'assert_lt a 1 2; assert_ge b 2 2; assert_pos c 0.001; assert_between d 1 1 2'

# equality: two missing values do not agree
must_fail 'assert_eq "" ""' 'assert_eq what "" ""'
must_fail 'assert_eq null null' 'assert_eq what null null'
must_fail 'assert_eq of two failing commands' 'assert_eq what "$(false)" "$(false)"'
must_fail 'assert_eq 0 and garbage' 'assert_eq what 0 garbage'
must_fail 'assert_eq of a failed run_ok' 'assert_eq what 1 "$(run_ok "a command" false)"'
must_pass 'assert_eq 0 0, assert_empty ""' 'assert_eq what 0 0; assert_empty what ""'
must_fail 'assert_empty of output' 'assert_empty what "something"'

# run_ok: a failing inner command ends the test, with its stderr
must_fail "run_ok false in \$(...)" 'x=$(run_ok "the inner command" sh -c "echo out; echo why >&2; exit 3")'
grep -q "exited 3: why" "$TMP/child.err" || fail "run_ok's failure lacks the inner stderr: $(cat "$TMP/child.err")"
must_pass "run_ok true" 'assert_eq what 4 "$(run_ok "echo" echo 4)"'

# need_cmd: a tool make deps installs is a failure when absent, not a skip
must_fail "need_cmd of a missing tool" 'need_cmd no-such-tool-here no-such-package'
grep -q "make deps installs it (Debian no-such-package)" "$TMP/child.err" ||
	fail "need_cmd does not name the package: $(cat "$TMP/child.err")"

# jsonl_check: empty, torn, garbage, not objects, missing - each fails, inside $(...) too
printf '' >"$TMP/empty.jsonl"
printf '{"a": 1}\n{"b": 2' >"$TMP/torn.jsonl"
printf '{"a": 1}\n\x01\x02garbage\n' >"$TMP/garbage.jsonl"
printf '{"a": 1}\nnull\n' >"$TMP/null.jsonl"
printf '{"a": 1}\n{"b": 2}\n' >"$TMP/good.jsonl"
for f in empty torn garbage null; do
	must_fail "jsonl_check of $f JSONL in \$(...)" "n=\$(jsonl_check $TMP/$f.jsonl); echo \"\$n lines\""
done
must_fail "jsonl_check of a missing file" "n=\$(jsonl_check $TMP/none.jsonl)"
must_pass "jsonl_check of 2 good lines" "assert_eq lines 2 \"\$(jsonl_check $TMP/good.jsonl)\""

# probe state: a process without libinfer has no semaphores to read, not 0
sleep 30 &
other=$!
must_fail "sem_total of a process without libinfer" "assert_eq total 0 \"\$(sem_total $other)\""
must_fail "sites_patched of a process without libinfer" "assert_eq sites 0 \"\$(sites_patched $other)\""
must_fail "sem_total of no process" 'assert_eq total 0 "$(sem_total 999999999)"'
kill "$other"

# test_case: a failed check ends its case, not the test; the next case runs
# and the test fails at its end, naming the case
r=$(child 'first() { x=$(fail "inner of the first"); echo "first went on: $x"; }
second() { echo "second ran"; assert_eq two 2 2; }
test_case first first
test_case second second')
assert_eq "a failed case: the child's status" 1 "${r%% *}"
assert_eq "a failed case: the child still ran to its end" reached "${r#* }"
out=$(ROOT=$ROOT BUILD=$BUILD bash -c 'source "$ROOT/tests/lib.sh"
first() { x=$(fail "inner of the first"); echo "first went on: $x"; }
test_case first first; test_case second echo "second ran"' 2>/dev/null)
grep -q '^second ran$' <<<"$out" || fail "the case after a failed one did not run: $out"
ok "the case after a failed one ran"
grep -q 'first went on' <<<"$out" && fail "the first case went on after its failed check: $out"
ok "a failed check inside \$(...) ended its case"
grep -q '^case second: ok$' <<<"$out" || fail "no 'case second: ok' line: $out"
ok "each case reported"
grep -q '^FAIL: 1 of 2 cases failed: first;$' "$TMP/child.err" || fail "no final FAIL naming the case: $(cat "$TMP/child.err")"
ok "the test's end names the failed case"
must_pass "test_case: passing cases" 'test_case a assert_eq one 1 1; test_case b assert_pos two 2'
