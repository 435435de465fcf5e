#!/usr/bin/env bash
# tools/bench_llamacpp.sh - what tracing llama.cpp costs it: a node-llama-cpp
# program (tests/llama/generate.mjs, prebuilt libllama) decoding the
# stories110M shape as Q8_0 GGUF, untraced and under `spantrace record
# --level coarse` (found with no flags: the engine profile), in interleaved
# rounds. Each run reports its own decode rate (outputs after the first over
# their time, measured by the program); the ratio is traced / untraced, the
# median of the rounds' ratios.
#
#   tools/bench_llamacpp.sh       (root; make deps for node-llama-cpp)
#   REPEAT=7 TOKENS=96 tools/bench_llamacpp.sh
export BENCH_NAME=bench_llamacpp
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
TOKENS=${TOKENS:-96}
GEN=$ROOT/tests/llama/generate.mjs

[ "$(id -u)" = 0 ] || skipped "needs root to load BPF programs"
[ -d "$ROOT/tests/llama/node_modules/@node-llama-cpp/linux-x64" ] || skipped "no node-llama-cpp (make deps)"
[ -x "$SPANTRACE" ] && [ -x "$BUILD/mkmodel" ] || die "build first"
make_s110m "$TMP/m" q8_0
export GENERATE_THREADS=2

rate() { jq -r '.decode_tokens_per_s * 10 | round / 10' <"$1"; }
untraced() {
	(cd "$ROOT/tests/llama" && node "$GEN" "$TMP/m_q8_0.gguf" 1024 8 "$TOKENS") >"$TMP/u.out" 2>"$TMP/u.err" ||
		die "untraced: $(tail -n 2 "$TMP/u.err")"
	rate "$TMP/u.out"
}
traced() {
	(cd "$ROOT/tests/llama" && "$SPANTRACE" record -q --level coarse -o "$TMP/t.jsonl" -- \
		node "$GEN" "$TMP/m_q8_0.gguf" 1024 8 "$TOKENS") >"$TMP/t.out" 2>"$TMP/t.err" ||
		die "traced: $(tail -n 2 "$TMP/t.err")"
	local n
	n=$(jq -s 'map(select(.type=="span" and .name=="forward")) | length' "$TMP/t.jsonl")
	[ "$n" = "$TOKENS" ] || die "traced run: $n forward spans for $TOKENS outputs"
	rate "$TMP/t.out"
}

for r in $(seq "$REPEAT"); do
	if [ $((r % 2)) = 1 ]; then u=$(untraced); t=$(traced); else t=$(traced); u=$(untraced); fi
	echo "$u" >>"$TMP/u"
	echo "$t" >>"$TMP/t"
	div "$t" "$u" >>"$TMP/ratio"
	echo "round $r: untraced $u tok/s, traced $t tok/s (ratio $(tail -n 1 "$TMP/ratio"))"
done
echo "stories110M shape Q8_0, $TOKENS tokens, node-llama-cpp $(jq -r .version "$ROOT/tests/llama/node_modules/node-llama-cpp/package.json")" \
	"(ggml CPU variant $(jq -r .cpu_variant "$TMP/u.out") on $(cpu_model)):" \
	"untraced $(median <"$TMP/u") tok/s, traced (coarse) $(median <"$TMP/t") tok/s, medians of $REPEAT rounds"
ratio llamacpp_traced_over_untraced "$(median <"$TMP/ratio")" ">=0.99"
