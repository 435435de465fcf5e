#!/usr/bin/env bash
# t_security_files.sh - output files are private and never reached through
# a planted symlink:
#  * every file `record` creates (-o, --summary, --csv, --metrics) has mode
#    0640 or tighter, even under umask 000;
#  * a symlink planted at an output path in a shared sticky directory (/tmp,
#    where fs.protected_symlinks may be off) pointing at a file we own is not
#    followed: a clear error, non-zero exit, the target file untouched, and
#    the traced command never started.
# fast
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
need_bpf
need_models
need_binaries

# tight MODE: no group write/exec, nothing for others (at most 0640)
tight() { [ $((8#$1 & 8#137)) = 0 ]; }

d=$TMP/modes
mkdir -p "$d"
(umask 000 && "$SPANTRACE" record -q -o "$d/t.jsonl" --summary "$d/s.json" --csv "$d/t.csv" --metrics "$d/m.jsonl" \
	-- "$INFER" "$MODELS/stories260K.bin" -b cpu -n 4 -t 0 --ids --stats "$d/e.json" >/dev/null 2>"$d/err") ||
	fail "record failed: $(tail -n 3 "$d/err")"
# the command writes --stats when it runs: its absence below means it did not
[ -s "$d/e.json" ] || fail "the traced command wrote no --stats"
for f in t.jsonl s.json t.csv m.jsonl; do
	[ -s "$d/$f" ] || fail "$f was not written"
	mode=$(stat -c %a "$d/$f")
	tight "$mode" || fail "$f has mode $mode under umask 000 (want 0640 or tighter)"
	ok "$f: mode $mode under umask 000"
done

# Symlinks planted in /tmp itself (world-writable, sticky), one per option.
victim=$TMP/victim
link=/tmp/spantrace-planted.$$
trap 'rm -f "$link"; rm -rf "$TMP"; jobs -p | xargs -r kill 2>/dev/null' EXIT
for opt in -o --summary --csv --metrics; do
	echo "precious" >"$victim"
	chmod 600 "$victim"
	before=$(stat -c '%s %Y %a' "$victim")
	rm -f "$link"
	ln -s "$victim" "$link"
	rc=0
	"$SPANTRACE" record -q "$opt" "$link" $([ "$opt" = -o ] || echo "-o $TMP/other.jsonl") -- \
		"$INFER" "$MODELS/stories260K.bin" -b cpu -n 4 -t 0 --ids --stats "$TMP/e.json" >/dev/null 2>"$TMP/err" || rc=$?
	[ "$rc" != 0 ] || fail "$opt: record followed or ignored the planted symlink (exit 0)"
	grep -q "$link.*symbolic link" "$TMP/err" || fail "$opt: no clear error: $(cat "$TMP/err")"
	assert_eq "$opt: victim content" precious "$(cat "$victim")"
	assert_eq "$opt: victim size/mtime/mode" "$before" "$(stat -c '%s %Y %a' "$victim")"
	[ -L "$link" ] || fail "$opt: the symlink itself was replaced"
	[ -e "$TMP/e.json" ] && fail "$opt: the command ran although the output could not be opened"
	ok "$opt: refused: $(head -n1 "$TMP/err")"
done
