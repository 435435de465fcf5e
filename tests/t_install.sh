#!/usr/bin/env bash
# t_install.sh - `make install DESTDIR=... PREFIX=...` stages every file
# under DESTDIR/PREFIX and nothing elsewhere; the staged infer finds its
# libinfer.so in ../lib; the staged spantrace lists every command and its
# `report` finds the installed report.py; spantrace(1) and infer(1) render
# without a warning, and spantrace(1) names every subcommand; PREFIX
# defaults to /usr/local.
# fast
source "$(dirname "$0")/lib.sh"
for b in "$INFER" "$SPANTRACE" "$MKMODEL" "$BUILD/libinfer.so"; do [ -e "$b" ] || fail "no $b (build first)"; done
need_cmd groff groff-base

D=$TMP/stage
P=/opt/spantrace-test
make -s -C "$ROOT" install BUILD="$BUILD" DESTDIR="$D" PREFIX="$P" >"$TMP/make.out" 2>&1 || fail "make install: $(tail -n 5 "$TMP/make.out")"
want="$P/bin/infer $P/bin/mkmodel $P/bin/spantrace $P/lib/libinfer.so $P/share/man/man1/infer.1 $P/share/man/man1/spantrace.1 $P/share/spantrace/report.py
	$P/share/spantrace/spantrace-daemon.service $P/share/doc/spantrace/README.md
	$(cd "$ROOT" && for f in docs/*.md; do echo "$P/share/doc/spantrace/$f"; done)"
got=$(cd "$D" && find . -type f | sed 's|^\.||' | sort | tr '\n' ' ')
assert_eq "files staged under DESTDIR/PREFIX" "$(echo $want | tr ' ' '\n' | sort | tr '\n' ' ')" "$got"
# the systemd unit's Documentation= names an installed file
doc=$(sed -n 's|^Documentation=file://||p' "$ROOT/tools/spantrace-daemon.service")
assert_eq "the unit's Documentation= is installed" /usr/local/share/doc/spantrace/README.md "$doc"
[ -f "$D$P/share/doc/spantrace/README.md" ] || fail "no README.md under share/doc/spantrace"
[ -e "$P" ] && fail "install wrote outside DESTDIR ($P exists)"
assert_eq "mode of bin/spantrace" 755 "$(stat -c %a "$D$P/bin/spantrace")"
assert_eq "mode of the man page" 644 "$(stat -c %a "$D$P/share/man/man1/spantrace.1")"

# The staged engine runs and loads the staged library.
lib=$(ldd "$D$P/bin/infer" | awk '/libinfer.so/ {print $3}')
assert_eq "libinfer.so the staged infer loads" "$D$P/lib/libinfer.so" "$(readlink -f "$lib")"
"$D$P/bin/infer" -h >/dev/null 2>&1 || fail "the staged infer -h failed"

# Man pages: no groff warnings; spantrace(1) has a section per command.
for page in spantrace infer; do
	warn=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$D$P/share/man/man1/$page.1" 2>&1)
	[ -z "$warn" ] || fail "$page.1: $warn"
done
ok "spantrace(1) and infer(1) render with no warning"
cmds=$("$D$P/bin/spantrace" --help | awk '/^commands:/ {on=1; next} on && NF {print $1}')
[ "$(echo "$cmds" | wc -l)" -ge 6 ] || fail "spantrace --help lists only: $cmds"
for c in $cmds; do grep -q "^\.SS $c\$" "$D$P/share/man/man1/spantrace.1" || fail "spantrace(1) has no section for '$c'"; done
ok "spantrace(1) has a section for each of: $(echo $cmds)"
LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$D$P/share/man/man1/infer.1" 2>/dev/null | grep -q -- "--http" || fail "man -l infer.1 lacks --http"
ok "man -l renders infer(1)"

# The staged spantrace's report finds the staged report.py (not the tree's).
"$D$P/bin/spantrace" report --help >"$TMP/rh" 2>&1 || fail "staged spantrace report --help: $(cat "$TMP/rh")"
grep -q "spantrace report" "$TMP/rh" || fail "report --help: $(head -n 3 "$TMP/rh")"
mv "$D$P/share/spantrace/report.py" "$TMP/report.py.moved"
"$D$P/bin/spantrace" report x.jsonl >/dev/null 2>"$TMP/rerr" && fail "report ran without report.py installed"
grep -q "not installed beside this binary" "$TMP/rerr" || fail "report without report.py: $(cat "$TMP/rerr")"
ok "the staged report uses the staged report.py (and says so when it is missing)"

# PREFIX defaults to /usr/local.
make -s -n -C "$ROOT" install BUILD="$BUILD" DESTDIR="$TMP/x" | grep -q "$TMP/x/usr/local/bin" || fail "PREFIX default is not /usr/local"
ok "PREFIX defaults to /usr/local"
