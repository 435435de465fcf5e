#!/usr/bin/env bash
# t_security_noshell.sh - the tracer never hands a string to a shell: no
# system(), popen() or "sh"/"/bin/sh" program name anywhere in user/*.c
# (target-controlled paths and names would become shell code). Comments do
# not count.
# fast
source "$(dirname "$0")/lib.sh"
ls "$ROOT"/user/*.c >/dev/null 2>&1 || fail "no user/*.c under $ROOT"

# Strip comments (gcc -fpreprocessed keeps everything else, macros included).
hits=0
for f in "$ROOT"/user/*.c; do
	gcc -fpreprocessed -dD -E -P -x c "$f" 2>/dev/null >"$TMP/code.c" || cp "$f" "$TMP/code.c"
	if grep -nE '\b(system|popen)[[:space:]]*\(|"(/bin/)?sh"' "$TMP/code.c" >"$TMP/hits"; then
		sed "s|^|$(basename "$f"): |" "$TMP/hits"
		hits=$((hits + $(wc -l <"$TMP/hits")))
	fi
done
assert_eq "shell-outs in user/*.c" 0 "$hits"
# The check itself can fail: a planted call is found.
printf 'int f(void) { return system("ls"); }\n' >"$TMP/bad.c"
gcc -fpreprocessed -dD -E -P -x c "$TMP/bad.c" 2>/dev/null | grep -qE '\b(system|popen)[[:space:]]*\(' ||
	fail "the pattern misses a planted system() call"
ok "a planted system() call is detected"
