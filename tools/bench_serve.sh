#!/usr/bin/env bash
# bench_serve.sh - the HTTP engine under load, with the real OpenAI client.
#
#   tools/bench_serve.sh [MODEL]    (default: $BUILD/models/demo15M.bin)
#   REPEAT=5 REQS=8 MAX_TOKENS=96 BUILD=build BACKENDS="opencl cpu" tools/bench_serve.sh
#   KV_TYPE=f32 tools/bench_serve.sh   (the KV cache's type, not the engine's
#                                     auto; the ratios' names gain _kvf32 or _kvf16)
#   CACHE_PROMPT=true tools/bench_serve.sh   (the prefix cache reuses the
#                                     repeated prompts; names gain _cached)
#   LABEL=_s15m_q8_0 TOK= tools/bench_serve.sh m.gguf   (names gain LABEL
#                                     after the backend; TOK empty: the
#                                     GGUF's own vocabulary, no -z)
#   TEMPERATURE=1 tools/bench_serve.sh   (sampled requests, request I with
#                                     seed I, top_p 1: OpenAI's defaults;
#                                     names gain _t1)
#
# Per backend, in interleaved rounds on one engine: REQS requests (greedy
# unless TEMPERATURE says)
# one at a time, then the same REQS all at once, first non-streaming, then
# streaming. Aggregate generated tok/s = completion tokens / the batch's
# wall time (timed inside the client). The batching ratio is the median
# over rounds of concurrent / one-at-a-time, from the non-streaming rounds:
# the client shares the engine's 2 cores here, and the openai client spends
# ~170 us of CPU parsing each streamed chunk, 8 times as many per second at
# 8 streams, which measures the client more than the engine. The streaming
# ratio is printed beside it; TTFT p50 and p99 (nearest rank) pool the
# concurrent streaming rounds' first-chunk times.
source "$(dirname "$0")/bench_lib.sh"
BENCH_NAME=bench_serve
MODEL=${1:-$DEMO_MODEL}
TOK=${TOK-$BUILD/models/demo_tokenizer.bin}
LABEL=${LABEL:-}
REQS=${REQS:-8}
MAX_TOKENS=${MAX_TOKENS:-96}
TEMPERATURE=${TEMPERATURE:-0}
[[ $TEMPERATURE =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "TEMPERATURE=$TEMPERATURE: a number like 0.8 or 1"
TEMP_SUFFIX=
[ "$TEMPERATURE" = 0 ] || TEMP_SUFFIX=_t$TEMPERATURE
kv_type_from_env
cache_prompt_from_env
SUFFIX=$LABEL$TEMP_SUFFIX$KV_SUFFIX$CACHE_SUFFIX
TOK_ARGS=()
[ -z "$TOK" ] || TOK_ARGS=(-z "$TOK")
NODE_DIR=$ROOT/tests/node
need_built "$INFER"
command -v node >/dev/null && [ -d "$NODE_DIR/node_modules/openai" ] || skipped "no node or npm openai (make deps)"
command -v jq >/dev/null || skipped "no jq"
[ -r "$MODEL" ] && { [ -z "$TOK" ] || [ -r "$TOK" ]; } || skipped "no demo model (make models)"

# The fp32 FMA roof (tools/fmaprobe.c, 2 threads), and the flops a token
# needs: 2 per weight of the matrices it multiplies (attention's are left
# out, so the share of the roof printed is a floor). Batching is bounded by
# the roof only when the step is compute-bound; this says how far it is.
mkdir -p "$BUILD/tools"
${CC:-gcc} -O2 -march=native -pthread -o "$BUILD/tools/fmaprobe" "$ROOT/tools/fmaprobe.c" \
	|| die "cannot compile fmaprobe"
# The shape as the engine read it (llama2.c checkpoint or GGUF alike).
"$INFER" "$MODEL" "${TOK_ARGS[@]}" -n 1 --ids -b cpu --stats "$TMP/shape.json" >/dev/null 2>&1 ||
	die "$MODEL: the engine cannot read it"
read -r -a hdr <<<"$(jq -r '.model | "\(.dim) \(.hidden_dim) \(.n_layers) \(.n_heads) \(.n_kv_heads) \(.vocab_size)"' "$TMP/shape.json")"
[ "${#hdr[@]}" = 6 ] || die "$MODEL: no shape in the engine's --stats"
FLOPS_PER_TOKEN=$(awk -v d="${hdr[0]}" -v h="${hdr[1]}" -v l="${hdr[2]}" -v nh="${hdr[3]}" \
	-v kvh="${hdr[4]}" -v v="${hdr[5]}" \
	'BEGIN { if (v < 0) v = -v; kv = d * kvh / nh; print 2 * (l * (2 * d * d + 2 * d * kv + 3 * d * h) + v * d) }')
FMA_GFLOPS=$("$BUILD/tools/fmaprobe" 2 | awk '{ print $2 }')

# spec CONCURRENT STREAM: REQS requests with different prompts (the same each
# round: CACHE_PROMPT says whether the prefix cache may reuse them)
spec() {
	local i sep=
	printf '{"concurrent": %s, "requests": [' "$1"
	for ((i = 0; i < REQS; i++)); do
		printf '%s{"prompt": "Once upon a time %d", "max_tokens": %d, "temperature": %s, "seed": %d, "stream": %s, "cache_prompt": %s}' \
			"$sep" "$i" "$MAX_TOKENS" "$TEMPERATURE" "$i" "$2" "$CACHE_PROMPT"
		sep=,
	done
	echo ']}'
}
for stream in false true; do
	spec false $stream >"$TMP/seq.$stream.json"
	spec true $stream >"$TMP/conc.$stream.json"
done

percentile() { sort -g | awk -v p="$1" '{v[NR] = $1} END { r = int((NR * p + 99) / 100); if (r < 1) r = 1; printf "%.1f\n", v[r] }'; }

bench_backend() {
	local b=$1 epid port r
	"$INFER" "$MODEL" "${TOK_ARGS[@]}" -b "$b" --max-seqs "$REQS" --kv-type "$KV_TYPE" --http 127.0.0.1:0 2>"$TMP/engine.$b" &
	epid=$!
	wait_until 60 grep -q "listening on" "$TMP/engine.$b" || die "$b engine did not start: $(cat "$TMP/engine.$b")"
	port=$(sed -n 's/.*listening on http:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$TMP/engine.$b")
	run() { node "$NODE_DIR/client.js" "http://127.0.0.1:$port" bench "$1"; }
	# run_into SPEC FILE: one batch; its aggregate tok/s appended to FILE
	run_into() {
		run "$1" >"$TMP/out" || die "$b: the client failed"
		[ "$(jq .errors "$TMP/out")" = 0 ] || die "$b: requests failed"
		jq -r '.completion_tokens * 1000 / .wall_ms' "$TMP/out" >>"$2"
	}
	run "$TMP/conc.true.json" >/dev/null # warm-up: kernels compile on first use
	: >"$TMP/$b.seq"; : >"$TMP/$b.conc"; : >"$TMP/$b.sseq"; : >"$TMP/$b.sconc"; : >"$TMP/$b.ttft"
	for ((r = 1; r <= REPEAT; r++)); do
		run_into "$TMP/seq.false.json" "$TMP/$b.seq"
		run_into "$TMP/conc.false.json" "$TMP/$b.conc"
		run_into "$TMP/seq.true.json" "$TMP/$b.sseq"
		run_into "$TMP/conc.true.json" "$TMP/$b.sconc"
		jq -r '.ttft_ms[]' "$TMP/out" >>"$TMP/$b.ttft"
	done
	kill -TERM "$epid"
	wait "$epid"
	local one all ttft50 ttft99
	one=$(median <"$TMP/$b.seq") all=$(median <"$TMP/$b.conc")
	ttft50=$(percentile 50 <"$TMP/$b.ttft") ttft99=$(percentile 99 <"$TMP/$b.ttft")
	printf '%-6s one at a time %7.1f tok/s, %d at once %7.1f tok/s: %s x (rounds: %s); TTFT at %d: p50 %s ms, p99 %s ms\n' \
		"$b" "$one" "$REQS" "$all" "$(paired_ratio "$TMP/$b.conc" "$TMP/$b.seq")" \
		"$(paired_list "$TMP/$b.conc" "$TMP/$b.seq")" "$REQS" "$ttft50" "$ttft99"
	ratio "${b}${SUFFIX}_batch${REQS}_over_one_at_a_time" "$(paired_ratio "$TMP/$b.conc" "$TMP/$b.seq")" ">=4"
	printf '%-6s streaming: one at a time %7.1f tok/s, %d at once %7.1f tok/s: %s x (rounds: %s)\n' \
		"$b" "$(median <"$TMP/$b.sseq")" "$REQS" "$(median <"$TMP/$b.sconc")" \
		"$(paired_ratio "$TMP/$b.sconc" "$TMP/$b.sseq")" "$(paired_list "$TMP/$b.sconc" "$TMP/$b.sseq")"
	ratio "${b}${SUFFIX}_streaming_batch${REQS}_over_one_at_a_time" "$(paired_ratio "$TMP/$b.sconc" "$TMP/$b.sseq")" info
	local roof_share
	roof_share=$(awk -v t="$all" -v f="$FLOPS_PER_TOKEN" -v r="$FMA_GFLOPS" 'BEGIN { printf "%.3f", t * f / (r * 1e9) }')
	printf '%-6s %d at once: %.1f GFLOP/s of a %s GFLOP/s FMA roof (%s)\n' "$b" "$REQS" \
		"$(awk -v t="$all" -v f="$FLOPS_PER_TOKEN" 'BEGIN { print t * f / 1e9 }')" "$FMA_GFLOPS" "$roof_share"
	ratio "${b}${SUFFIX}_batch${REQS}_over_fma_roof" "$roof_share" info
	ratio "${b}${SUFFIX}_ttft_p50_ms_at_${REQS}" "$ttft50" info
	ratio "${b}${SUFFIX}_ttft_p99_ms_at_${REQS}" "$ttft99" info
}

echo "model $MODEL, $REQS requests of $MAX_TOKENS tokens at temperature $TEMPERATURE, $REPEAT interleaved rounds, KV cache $KV_TYPE"
for b in ${BACKENDS:-opencl cpu}; do bench_backend "$b"; done
