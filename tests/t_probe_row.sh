#!/usr/bin/env bash
# t_probe_row.sh - one row added to include/spantrace/probes.def reaches the
# engine (a semaphore and a fire function), the tracer's attach table, the
# decoder and the docs, with no other edit. In a copy of the tree, the row
# `test_row` (program probe_generic) is appended and the tree rebuilt
# (incrementally, from this tree's objects):
#   - docs/probes.md and man/spantrace.1 list it (make ran probedoc);
#   - the engine library defines infer_test_row_semaphore, --stats counts it;
#   - with one call of usdt_test_row() (where the engine would say it), the
#     library carries the USDT note and `spantrace record` writes a "probe"
#     record with the row's argument names and values, s32 signed.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
command -v git >/dev/null || skip "git not installed"
need_cmd jq jq
need_cmd readelf binutils
need_cmd nm binutils

SRC=$TMP/src
mkdir -p "$SRC"
# the tree as it is now: tracked and new files, less those deleted
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
	grep -zv '^tests/\(node\|llama\)/' |
	while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
	xargs -0 cp -p --parents -t "$SRC") || fail "cannot copy the tree"
# ...and this tree's build, times kept: make rebuilds only what the row's
# header reaches, which also checks that those dependencies are tracked (an
# object that missed one would lack the row below). Reused only when it is
# a plain build made as BUILD=build (its dependency files name build/...
# targets, as the make below does); a sanitizer build's flags differ.
mkdir -p "$SRC/build"
if grep -q '^build/inference/base/trace\.o:' "$BUILD/inference/base/trace.d" 2>/dev/null &&
	! nm -D "$BUILD/libinfer.so" 2>/dev/null | grep -q __asan_init; then
	tar -C "$BUILD" --exclude=./models --exclude=./fuzz --exclude=./tests --exclude=./test-logs \
		--exclude=./demo --exclude=./bench -cf - . | tar -C "$SRC/build" -xf - ||
		fail "cannot copy the build"
fi
ln -s "$(cd "$ROOT/.." && pwd)/shared" "$TMP/shared" 2>/dev/null

# The row, appended after the last probe row (ids are row order).
python3 - "$SRC/include/spantrace/probes.def" <<'EOF' || fail "cannot add the row"
import sys
p = sys.argv[1]; s = open(p).read()
anchor = '#endif\n\n#ifdef SPAN\n'  # the end of the probe rows
assert s.count(anchor) == 1, "no end of the probe rows"
row = ('PROBE2(test_row, MARK, STRUCTURAL, MARKER, probe_generic,\n'
       '       "a row added by t_probe_row",\n'
       '       __u64, answer, __s32, delta)\n')
s = s.replace(anchor, row + anchor)
open(p, 'w').write(s)
EOF
# The one call: the engine says test_row at each request's start.
sed -i 's/^\(\tusdt_request_begin(req, prompt_tokens);\)$/\1\n\tusdt_test_row(42, -7);/' "$SRC/inference/base/trace.c"
grep -q 'usdt_test_row(42, -7);' "$SRC/inference/base/trace.c" || fail "cannot add the call"

# BUILD on the command line: the runner's BUILD (this tree's) must not leak in.
make -C "$SRC" -j2 BUILD=build build/libinfer.so build/infer build/spantrace build/probedoc.stamp \
	>"$TMP/make.log" 2>&1 ||
	fail "the tree with the row does not build: $(tail -20 "$TMP/make.log")"
ok "the tree with the row builds"

grep -q '^| `test_row` | u64 answer, s32 delta | mark | structural | marker | a row added by t_probe_row |$' \
	"$SRC/docs/probes.md" || fail "docs/probes.md lacks the row"
ok "docs/probes.md lists test_row"
grep -q '^\.BR test_row " (u64 answer, s32 delta)"$' "$SRC/man/spantrace.1" || fail "the man page lacks the row"
ok "man/spantrace.1 lists test_row"

nm -D "$SRC/build/libinfer.so" | grep -q ' infer_test_row_semaphore$' || fail "no semaphore for test_row"
ok "libinfer.so defines infer_test_row_semaphore"
assert_eq "USDT sites of infer:test_row" 1 \
	"$(readelf -n "$SRC/build/libinfer.so" | grep -c 'Name: test_row$')"

# Traced: the decoder names the record and its arguments from the row.
"$SRC/build/spantrace" record -q -o "$TMP/rec.jsonl" -- "$SRC/build/infer" "$MODELS/stories260K.bin" \
	-n 8 -s 1 --ids --stats "$TMP/stats.json" >/dev/null 2>"$TMP/rec.err" ||
	fail "record: $(tail -5 "$TMP/rec.err")"
assert_eq "probe records" 1 "$(jq -c 'select(.type == "probe")' "$TMP/rec.jsonl" | wc -l)"
assert_eq "the record" '{"probe":"test_row","args":{"answer":42,"delta":-7}}' \
	"$(jq -c 'select(.type == "probe") | {probe, args}' "$TMP/rec.jsonl")"
assert_eq "--stats counts test_row" 1 "$(jq '.probes.test_row' "$TMP/stats.json")"
