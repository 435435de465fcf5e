#!/usr/bin/env bash
# fast
# t_top_badinput.sh - `spantrace top` on bad input: one clear error line and
# a non-zero exit (never a signal), before any command is started: no target,
# several targets, a pid that does not exist, a process without our probes,
# a binary without them, a command that is not there, a bad -d / -n / --level
# / -w, --cmd-output without a command, a terminal curses cannot drive, no
# privileges.
source "$(dirname "$0")/lib.sh"
need_bpf
for b in "$INFER" "$SPANTRACE"; do [ -x "$b" ] || fail "no $b (build first)"; done

# expect_fail NAME PATTERN CMD... : non-zero exit (not a signal), message matches
expect_fail() {
	local name=$1 pat=$2
	shift 2
	"$@" >"$TMP/out" 2>"$TMP/err" </dev/null
	local rc=$?
	[ $rc -ne 0 ] || fail "$name: exited 0"
	[ $rc -lt 128 ] || fail "$name: killed by signal $((rc - 128))"
	grep -q -- "$pat" "$TMP/err" || fail "$name: stderr lacks '$pat': $(head -c 300 "$TMP/err")"
	[ ! -s "$TMP/out" ] || fail "$name: wrote to stdout: $(head -c 200 "$TMP/out")"
	ok "$name: exit $rc, '$(grep -m1 -- "$pat" "$TMP/err" | head -c 160)'"
}

T="$SPANTRACE top"
expect_fail "no target" "give exactly one target.*(got none)" $T -b
expect_fail "two targets" "give exactly one target.*(got several)" $T -b -p 1 --binary "$INFER"
expect_fail "pid and command" "give exactly one target" $T -b -p 1 -- "$INFER" x.bin
expect_fail "nonexistent pid" "no process with pid 99999999" $T -b -p 99999999
expect_fail "pid not a number" "invalid pid '12ab'" $T -b -p 12ab
sleep 30 &
sleeper=$!
expect_fail "process without probes" "process $sleeper has no 'infer' USDT probes" $T -b -p $sleeper
kill $sleeper
expect_fail "binary without probes" "no 'infer' USDT probes" $T -b --binary /bin/true
expect_fail "binary that is not there" "$TMP/nope: No such file" $T -b --binary "$TMP/nope"
expect_fail "command without probes" "/bin/true: no 'infer' USDT probes" $T -b -- /bin/true
expect_fail "command not found" "no-such-command-xyz: command not found" $T -b -- no-such-command-xyz
for d in 0 -1 abc 1x "" 0.01 1e9 nan inf; do
	expect_fail "delay '$d'" "invalid delay '$d'" $T -b -d "$d" --binary "$INFER"
done
for n in 0 -3 two 5x; do
	expect_fail "iterations '$n'" "invalid iterations '$n'" $T -b -n "$n" --binary "$INFER"
done
expect_fail "bad level" "invalid level 'loud'" $T -b --level loud --binary "$INFER"
expect_fail "bad width" "invalid width '10'" $T -b -w 10 --binary "$INFER"
expect_fail "--cmd-output without a command" "cmd-output is only for -- CMD" \
	$T -b --cmd-output "$TMP/o" --binary "$INFER"
ln -s "$TMP/victim" "$TMP/link"
expect_fail "--cmd-output is a planted symlink" "cannot create $TMP/link: is a symbolic link" \
	$T -b --cmd-output "$TMP/link" -- "$INFER" x.bin
[ ! -e "$TMP/victim" ] || fail "the symlink's target was created"

# Interactive on a terminal curses cannot drive: fails before starting anything.
if command -v script >/dev/null; then
	TERM=no-such-terminal-xyz script -qec "$SPANTRACE top -- $INFER $TMP/marker-model.bin" /dev/null \
		>"$TMP/tty.out" 2>&1 </dev/null
	rc=$?
	[ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "bad TERM: exit $rc"
	grep -q "cannot use this terminal (TERM=no-such-terminal-xyz)" "$TMP/tty.out" ||
		fail "bad TERM: $(head -c 300 "$TMP/tty.out")"
	pgrep -f "$TMP/marker-model.bin" >/dev/null && fail "bad TERM: the command was started"
	ok "bad TERM: exit $rc, one error, no command started"
else
	echo "note: script(1) missing, terminal case not run"
fi

if command -v capsh >/dev/null; then
	expect_fail "no privileges" "CAP_BPF and CAP_PERFMON" \
		capsh --drop=cap_bpf,cap_perfmon,cap_sys_admin -- -c "exec $SPANTRACE top -b --binary $INFER"
else
	echo "note: capsh missing, privilege case not run"
fi
