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

# expect_fail from lib.sh, plus: nothing on stdout (no frame for bad input).
expect_fail_quiet() {
	expect_fail "$@"
	[ ! -s "$TMP/out" ] || fail "$1: wrote to stdout: $(head -c 200 "$TMP/out")"
}

T="$SPANTRACE top"
expect_fail_quiet "no target" "give exactly one target.*(got none)" $T -b
expect_fail_quiet "two targets" "give exactly one target.*(got several)" $T -b -p 1 --binary "$INFER"
expect_fail_quiet "pid and command" "give exactly one target" $T -b -p 1 -- "$INFER" x.bin
expect_fail_quiet "nonexistent pid" "no process with pid 99999999" $T -b -p 99999999
expect_fail_quiet "pid not a number" "invalid pid '12ab'" $T -b -p 12ab
sleep 30 &
sleeper=$!
expect_fail_quiet "process without probes" "process $sleeper has no 'infer' USDT probes" $T -b -p $sleeper
kill $sleeper
expect_fail_quiet "binary without probes" "no 'infer' USDT probes" $T -b --binary /bin/true
expect_fail_quiet "binary that is not there" "$TMP/nope: No such file" $T -b --binary "$TMP/nope"
# A command may load its engine later (dlopen), so it runs; no engine by its end is the error.
expect_fail "command without an engine" "/bin/true: no 'infer' USDT probes, and it loaded no llama.cpp" $T -b -- /bin/true
expect_fail_quiet "command not found" "no-such-command-xyz: command not found" $T -b -- no-such-command-xyz
for d in 0 -1 abc 1x "" 0.01 1e9 nan inf; do
	expect_fail_quiet "delay '$d'" "invalid delay '$d'" $T -b -d "$d" --binary "$INFER"
done
for n in 0 -3 two 5x; do
	expect_fail_quiet "iterations '$n'" "invalid iterations '$n'" $T -b -n "$n" --binary "$INFER"
done
expect_fail_quiet "bad level" "invalid level 'loud'" $T -b --level loud --binary "$INFER"
expect_fail_quiet "bad width" "invalid width '10'" $T -b -w 10 --binary "$INFER"
expect_fail_quiet "--cmd-output without a command" "cmd-output is only for -- CMD" \
	$T -b --cmd-output "$TMP/o" --binary "$INFER"
ln -s "$TMP/victim" "$TMP/link"
expect_fail_quiet "--cmd-output is a planted symlink" "cannot create $TMP/link: is a symbolic link" \
	$T -b --cmd-output "$TMP/link" -- "$INFER" x.bin
[ ! -e "$TMP/victim" ] || fail "the symlink's target was created"

# Interactive on a terminal curses cannot drive: fails before starting anything.
# script(1): Debian's bsdutils, an essential package; capsh: libcap2-bin, which make deps installs
command -v script >/dev/null || fail "script is missing (Debian bsdutils, an essential package)"
TERM=no-such-terminal-xyz script -qec "$SPANTRACE top -- $INFER $TMP/marker-model.bin" /dev/null \
	>"$TMP/tty.out" 2>&1 </dev/null
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "bad TERM: exit $rc"
grep -q "cannot use this terminal (TERM=no-such-terminal-xyz)" "$TMP/tty.out" ||
	fail "bad TERM: $(head -c 300 "$TMP/tty.out")"
pgrep -f "$TMP/marker-model.bin" >/dev/null && fail "bad TERM: the command was started"
ok "bad TERM: exit $rc, one error, no command started"

need_cmd capsh libcap2-bin
expect_fail_quiet "no privileges" "CAP_BPF and CAP_PERFMON" \
	capsh --drop=cap_bpf,cap_perfmon,cap_sys_admin -- -c "exec $SPANTRACE top -b --binary $INFER"
