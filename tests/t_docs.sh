#!/usr/bin/env bash
# t_docs.sh - the front door and the manual hold together: README.md is at
# most ~250 lines and shows its two pictures; every relative link in
# README.md, docs/ and tests/README.md reaches a file, and its #anchor a
# heading there; every runnable example runs and exits 0. Runnable: an
# indented line that starts with `spantrace ` or `build/` and leaves the
# reader nothing to fill in (no MODEL, PID, $(...), [options], ...), nor
# runs forever (daemon, top, a server). The probe tables of docs/probes.md,
# docs/llamacpp.md and the man page are what probedoc makes from the rows,
# and the man pages name every option --help lists.
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

# Runnable examples, run in a scratch directory where build/ is the build.
mkdir -p "$TMP/run" && ln -s "$BUILD" "$TMP/run/build"
grep -hE '^    (spantrace |build/)' README.md docs/*.md | sed 's/^    //; s/ *#.*$//' |
	grep -vE '\$\(|\[|MODEL|PID|\.\.\.|daemon|spantrace top|&|--http|-p [0-9]|node |clpeak|\||python3|hashcat|myapp|OUT\.|CKPT|STEPS|FILE|PATH|TOKENIZER|^spantrace:' \
	>"$TMP/examples"
[ -s "$TMP/examples" ] || fail "no runnable examples found"
while read -r line; do
	cmd=${line/#spantrace /$SPANTRACE }
	(cd "$TMP/run" && timeout 120 bash -c "$cmd" >"$TMP/ex.out" 2>&1) ||
		fail "example '$line': $(tail -n 3 "$TMP/ex.out")"
	ok "example: $line"
done <"$TMP/examples"

# The generated tables (probes.def, llamacpp.def) are what the rows make now.
for f in docs/probes.md man/spantrace.1 docs/llamacpp.md; do
	cp "$f" "$TMP/gen.${f##*.}"
	"$BUILD/probedoc" --update "$TMP/gen.${f##*.}" 2>/dev/null || fail "probedoc --update $f"
	cmp -s "$f" "$TMP/gen.${f##*.}" || fail "$f: its generated tables differ from the rows (run make)"
	ok "$f: generated tables match the rows"
done

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
