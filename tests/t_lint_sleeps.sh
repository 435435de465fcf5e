#!/usr/bin/env bash
# t_lint_sleeps.sh - no bare sleep stands in for a condition (tests/README.md):
# in the test scripts, a sleep longer than a poll's 0.1 s must say on its
# own line why no condition can replace it (a load's pace, a planned
# stall); `sleep N &` is a process to trace, not a wait. A planted script with a bare `sleep 1` must fail the lint.
# fast
source "$(dirname "$0")/lib.sh"
# lint FILE...: "file:line: text" of each bare sleep over 0.1 s
lint() {
	grep -nE '(^|[;&|[:space:]])sleep[[:space:]]+[0-9.]+' "$@" /dev/null |
		awk -F: '{ line = substr($0, length($1) + length($2) + 3)
			   if (match(line, /sleep[ \t]+[0-9.]+/) == 0) next
			   t = substr(line, RSTART + 5) + 0
			   bg = line ~ /sleep[ \t]+[0-9.]+[ \t]*&([^&]|$)/   # a process to trace, not a wait
			   if (t > 0.1 && !bg && line !~ /sleep[ \t]+[0-9.]+[^#]*#/) print }'
}
bare=$(lint "$ROOT"/tests/*.sh "$ROOT"/tests/helpers/*.sh)
assert_empty "bare sleeps over 0.1 s without a reason on their line" "$bare"
printf 'do_thing &\nsleep 1\ncheck_it\nsleep 0.1\nsleep 2   # the pace of a load\nsleep 30 &\n' >"$TMP/planted.sh"
assert_eq "the planted bare sleep found (only it)" "$TMP/planted.sh:2:sleep 1" "$(lint "$TMP/planted.sh")"
