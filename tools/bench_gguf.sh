#!/usr/bin/env bash
# tools/bench_gguf.sh - our decode step against llama.cpp's on the same GGUF
# file, for F32, F16, Q8_0 and Q4_0 (Q4_K and Q6_K on request: TYPES) of
# the stories110M shape (dim 768, hidden 2048, 12 layers, 12 heads, vocab
# 32000), and each against the same-run bandwidth bound.
#
# Both engines are timed by spantrace itself: ours by its forward spans
# (`record --level coarse`, decode steps only: one token each), llama.cpp's
# (npm node-llama-cpp, prebuilt, tests/llama/ids.mjs, with the ggml CPU
# variant ggml picks for this CPU, as users get it, named in the output) by
# `--span uprobe:LIBLLAMA:llama_decode`, decode calls only (the first is the
# prompt). Rounds interleave the engines and types; medians of the rounds'
# medians. The bound: weight bytes a decode step reads (every matrix in its
# type, the classifier included, plus the norms) over tools/bwprobe.c's
# streaming bandwidth measured in the same round.
#
#   tools/bench_gguf.sh          (root; make deps for node-llama-cpp)
#   REPEAT=5 TOKENS=96 BUILD=build tools/bench_gguf.sh
#   TYPES="q8_0 q4_0" tools/bench_gguf.sh   (some of the types)
export BENCH_NAME=bench_gguf
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
TOKENS=${TOKENS:-96}
TYPES=${TYPES:-f32 f16 q8_0 q4_0}
LLAMA_JS=$ROOT/tests/llama/ids.mjs
LIBLLAMA=$(ls "$ROOT"/tests/llama/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.*.so 2>/dev/null | head -n1)

[ "$(id -u)" = 0 ] || skipped "needs root to load BPF programs"
[ -n "$LIBLLAMA" ] || skipped "no node-llama-cpp in tests/llama (make deps)"
[ -x "$SPANTRACE" ] && [ -x "$INFER" ] && [ -x "$BUILD/mkmodel" ] || die "build first"
${CC:-gcc} -O3 -march=native -pthread -o "$TMP/bwprobe" "$ROOT/tools/bwprobe.c" || die "cannot build bwprobe"

# The models: the shape's GGUF files, $TMP/m_TYPE.gguf.
# shellcheck disable=SC2086  # TYPES is a list
make_s110m "$TMP/m" $TYPES

# Bytes a decode step reads: the matrices in their type (from the file's
# tensor sizes, via our own state dump would need a tracer: computed here).
step_bytes() { # TYPE
	awk -v t="$1" 'BEGIN { d = 768; h = 2048; L = 12; v = 32000
		per = (t == "f32") ? 4 : (t == "f16") ? 2 : (t == "q8_0") ? 34 / 32 : (t == "q6_k") ? 210 / 256 : (t == "q4_k") ? 144 / 256 : 18 / 32
		m = L * (4 * d * d + 3 * d * h) + v * d
		printf "%d\n", m * per + (2 * L + 1) * d * 4 }'
}

# ours TYPE: median forward span of the decode steps, ns
ours() {
	"$SPANTRACE" record -q --level coarse -o "$TMP/o.jsonl" -- "$INFER" "$TMP/m_$1.gguf" -n "$TOKENS" -t 0 --ids \
		>/dev/null 2>"$TMP/o.err" || die "record ours $1: $(tail -n 2 "$TMP/o.err")"
	jq -r 'select(.type == "span" and .name == "forward" and .pos > 0) | .dur_ns' "$TMP/o.jsonl" | median
}
# theirs TYPE: median llama_decode of the decode steps (all calls but the first), ns
theirs() {
	"$SPANTRACE" record -q --span "uprobe:$LIBLLAMA:llama_decode" -o "$TMP/l.jsonl" -- \
		env LLAMA_CPU_VARIANT=best node "$LLAMA_JS" "$TMP/m_$1.gguf" "$TOKENS" >/dev/null 2>"$TMP/l.err" ||
		die "record llama.cpp $1: $(tail -n 2 "$TMP/l.err")"
	sed -n 's/^llama.cpp CPU variant: //p' "$TMP/l.err" >"$TMP/variant"
	jq -r 'select(.type == "span" and .name == "llama_decode") | .dur_ns' "$TMP/l.jsonl" | tail -n +2 | median
}

for r in $(seq "$REPEAT"); do
	"$TMP/bwprobe" 2 | awk '/bandwidth_gbs/ { print $2 }' >>"$TMP/bw"
	line="round $r: bandwidth $(tail -n1 "$TMP/bw") GB/s;"
	for t in $TYPES; do
		ours $t >>"$TMP/ours_$t"
		theirs $t >>"$TMP/theirs_$t"
		line="$line $t $(tail -n1 "$TMP/ours_$t")/$(tail -n1 "$TMP/theirs_$t"),"
	done
	echo "$line ns per decode step (ours/llama.cpp)"
done
bw=$(median <"$TMP/bw")
echo "stories110M shape, $TOKENS greedy tokens, medians of $REPEAT rounds; bandwidth $bw GB/s (2 threads)"
echo "llama.cpp: node-llama-cpp's ggml CPU variant $(cat "$TMP/variant") on $(cpu_model)"
for t in $TYPES; do
	o=$(median <"$TMP/ours_$t") l=$(median <"$TMP/theirs_$t") bytes=$(step_bytes $t)
	bound=$(awk -v b="$bytes" -v g="$bw" 'BEGIN { printf "%.0f\n", b / g }')   # ns at bw GB/s
	echo "$t: ours $o ns, llama.cpp $l ns per decode step; $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB a step, bound $bound ns"
	ratio "gguf_${t}_llamacpp_over_ours" "$(div "$l" "$o")" ">=1.0"
	ratio "gguf_${t}_bound_over_ours" "$(div "$bound" "$o")" ">=0.85"
done
