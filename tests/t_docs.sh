#!/usr/bin/env bash
# t_docs.sh - the front door and the manual hold together: README.md is at
# most ~250 lines and shows its two pictures; every relative link in
# README.md, docs/ and tests/README.md reaches a file, and its #anchor a
# heading there (t_doc_examples.sh runs the examples). The probe tables of
# docs/probes.md, docs/llamacpp.md and the man page are what probedoc makes
# from the rows; the daemon's family table is what tools/metricdoc.py makes
# from the code; the man pages name every option --help lists; and every
# option's range, as the command's own error for a bad value states it, is
# in the man page, and no doc line that names the option states another.
source "$(dirname "$0")/lib.sh"
need_bpf
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
cd "$ROOT" || fail "no $ROOT"

n=$(wc -l <README.md)
assert_le "README.md lines" "$n" 260
pics=$(grep -o '!\[[^]]*\](docs/img/[^)]*\.png)' README.md | sed 's/.*(\(.*\))/\1/')
assert_eq "pictures in README.md" 2 "$(grep -c . <<<"$pics")"
for p in $pics; do
	[ "$(head -c 8 "$p" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$p is not a PNG"
done
ok "both pictures are PNG files: $(tr '\n' ' ' <<<"$pics")"

# Links: [text](target) with a relative target, from each page's own directory.
python3 - README.md docs/*.md tests/README.md <<'PY' >"$TMP/links" || fail "broken links: $(cat "$TMP/links")"
import os, re, sys
def slug(h):
    h = re.sub(r"[^\w\- ]", "", h.strip().lower())
    return h.replace(" ", "-")
heads = {}
def anchors(path):
    if path not in heads:
        heads[path] = {slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", open(path).read(), re.M)}
    return heads[path]
bad = checked = 0
for page in sys.argv[1:]:
    text = re.sub(r"```.*?```", "", open(page).read(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        checked += 1
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(full):
            print(f"FAIL: {page}: link to {target}: no {full}"); bad += 1
        elif anchor and full.endswith(".md") and anchor not in anchors(full):
            print(f"FAIL: {page}: link to {target}: no heading #{anchor} in {full}"); bad += 1
print(f"ok: {checked} relative links checked, {bad} broken")
sys.exit(1 if bad else 0)
PY
cat "$TMP/links"
# a pattern that found no link at all would check nothing
assert_pos "relative links checked" "$(sed -n 's/^ok: \([0-9]*\) relative links checked.*/\1/p' "$TMP/links")"

# The generated tables (probes.def, llamacpp.def) are what the rows make now.
for f in docs/probes.md man/spantrace.1 docs/llamacpp.md; do
	cp "$f" "$TMP/gen.${f##*.}"
	"$BUILD/probedoc" --update "$TMP/gen.${f##*.}" 2>/dev/null || fail "probedoc --update $f"
	cmp -s "$f" "$TMP/gen.${f##*.}" || fail "$f: its generated tables differ from the rows (run make)"
	ok "$f: generated tables match the rows"
done

# The daemon's families and labels: docs/daemon.md's table is what the code
# serving them makes (tools/metricdoc.py), and its Labels paragraph names
# every label the code sets.
/usr/bin/python3 "$ROOT/tools/metricdoc.py" --check >"$TMP/metricdoc" 2>&1 || fail "$(cat "$TMP/metricdoc")"
cat "$TMP/metricdoc"

# The man pages cover every option: each --long option that a command's
# --help lists appears in its page (written as roff writes it, \-\-name).
for cmd in record top daemon profile list report; do
	"$SPANTRACE" $cmd --help 2>&1 | grep -oE '^ +(-[a-zA-Z?], )?--[a-z0-9-]+' | grep -oE -- '--[a-z0-9-]+'
done | sort -u >"$TMP/opts"
[ "$(wc -l <"$TMP/opts")" -ge 30 ] || fail "too few spantrace options found: $(wc -l <"$TMP/opts")"
while read -r o; do
	grep -qF -- "${o//-/\\-}" "$ROOT/man/spantrace.1" || fail "man/spantrace.1 lacks $o"
done <"$TMP/opts"
ok "man/spantrace.1 names all $(wc -l <"$TMP/opts") options of the commands' --help"
"$INFER" --help 2>&1 | grep -oE -- '--[a-z0-9-]+' | sort -u >"$TMP/iopts"
[ "$(wc -l <"$TMP/iopts")" -ge 10 ] || fail "too few infer options found"
while read -r o; do
	grep -qF -- "${o//-/\\-}" "$ROOT/man/infer.1" || fail "man/infer.1 lacks $o"
done <"$TMP/iopts"
ok "man/infer.1 names all $(wc -l <"$TMP/iopts") options of infer --help"

# Ranges: each option's range is what the command itself says for a bad
# value ("(0.1..3600)", "between 0.05 and 86400"), so the code is the
# reference. The man page states each one; any doc or man line that names
# an option states only ranges some option on that line has.
for cmd in record top profile; do
	"$SPANTRACE" $cmd --help 2>&1 | grep -oE -- '--[a-z0-9-]+=[A-Z]+' | cut -d= -f1 | sort -u |
		while read -r o; do printf '%s\t%s\t%s\n' "$cmd" "$o" "$("$SPANTRACE" $cmd "$o" x 2>&1 | head -n 1)"; done
done >"$TMP/range_errs"
"$SPANTRACE" daemon --help 2>&1 | grep -oE -- '--[a-z0-9-]+ [A-Z]+' | cut -d' ' -f1 | sort -u |
	while read -r o; do   # a value it takes starts a daemon: one that ends at once, on a free port, in TMP
		printf 'daemon\t%s\t%s\n' "$o" "$(cd "$TMP" && timeout 20 "$SPANTRACE" daemon --all-engines \
			--listen 127.0.0.1:0 --duration 0.1 "$o" x 2>&1 | head -n 1)"
	done \
	>>"$TMP/range_errs"
python3 - "$TMP/range_errs" man/spantrace.1 README.md docs/*.md <<'PY' || fail "option ranges in the docs differ from the code's"
import re, sys
RANGE = re.compile(r"(-?\d[\d.]*)\s*(?:\.\.|and)\s*(-?\d[\d.]*)")
code = {}   # option -> {ranges}
for line in open(sys.argv[1]):
    cmd, opt, msg = line.rstrip("\n").split("\t", 2)
    m = re.search(r"\((?:[a-z ]*, )?(-?\d[\d.]*)\.\.(-?\d[\d.]*)[^)]*\)|between (-?\d[\d.]*) and (-?\d[\d.]*)", msg)
    if m:
        lo, hi = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        code.setdefault(opt, set()).add(f"{lo}..{hi}")
bad = []
if len(code) < 4:
    bad.append(f"only {len(code)} options state a range: {code}")
man = open(sys.argv[2]).read().replace("\\-", "-").replace("\\&", "")
for opt, rs in sorted(code.items()):
    for r in rs:
        if r not in man:
            bad.append(f"man/spantrace.1 does not state {opt}'s range {r}")
checked = 0
for page in sys.argv[2:]:
    for n, line in enumerate(open(page), 1):
        line = line.replace("\\-", "-")
        named = [o for o in code if re.search(re.escape(o) + r"\b", line)]
        if not named:
            continue
        allowed = set().union(*(code[o] for o in named))
        for m in re.finditer(r"(-?\d[\d.]*)\.\.(-?\d[\d.]*)", line):
            checked += 1
            r = f"{m.group(1)}..{m.group(2)}"
            if r not in allowed:
                bad.append(f"{page}:{n}: {r} beside {', '.join(named)}, whose range is {', '.join(sorted(allowed))}")
for b in bad:
    print("FAIL:", b)
print(f"ok: {len(code)} options' ranges from their own errors, in the man page; {checked} ranges in doc lines checked")
sys.exit(1 if bad else 0)
PY
ok "option ranges: the docs say what the commands say"
