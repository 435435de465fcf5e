#!/usr/bin/env bash
# tools/bench_servepeer.sh - llama-server as the serving peer: `infer --http`
# and `llama-server -np 8` on the same GGUF file, through the same OpenAI
# client (tests/node/client.js), in interleaved rounds. Per engine and
# model: aggregate generated tok/s of REQS requests one at a time (1 stream)
# and all at once (8 concurrent streams), and TTFT p50/p99 over the
# concurrent rounds. Models: the stories15M shape as F32 and the
# stories110M shape as Q8_0. Both servers run the whole time (an idle one
# costs nothing), each with the machine's threads. The client opens a
# connection per request, for both servers alike: llama-server fails a
# request sent on the connection of a finished streamed response.
#
#   tools/bench_servepeer.sh          (make llama-server first)
#   REPEAT=5 REQS=8 tools/bench_servepeer.sh
#   KV_TYPE=f32 tools/bench_servepeer.sh   (our KV cache's type, not the
#                                           engine's auto, which is f16 for
#                                           Q8_0 as llama-server's; the ratios'
#                                           names gain _kvf32 or _kvf16)
#   CACHE_PROMPT=true tools/bench_servepeer.sh   (both servers' prefix caches on,
#                                           as their defaults; names gain _cached)
export BENCH_NAME=bench_servepeer
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
REQS=${REQS:-8}
NODE_DIR=$ROOT/tests/node
command -v node >/dev/null && [ -d "$NODE_DIR/node_modules/openai" ] || skipped "no node or npm openai (make deps)"
SERVER=$("$ROOT/tools/build_llama_server.sh" --check 2>/dev/null) || skipped "no llama-server (make llama-server)"
[ -x "$INFER" ] && [ -x "$BUILD/mkmodel" ] || die "build first"
THREADS=$(nproc)
kv_type_from_env
cache_prompt_from_env
export CLIENT_KEEPALIVE=0

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# spec CONCURRENT TOKENS: REQS streaming greedy requests with different
# prompts. Every round repeats them, and both servers by default keep a
# finished request's KV for the next prompt that starts alike (cache_prompt;
# ours, the prefix cache): llama-server then evaluated 1 of a prompt's 7
# tokens (its timings' prompt_n), so TTFT measured a cache hit, not a
# prefill. cache_prompt false (the default here) makes both evaluate all 7;
# CACHE_PROMPT=true measures the hits.
spec() {
	local i sep=
	printf '{"concurrent": %s, "requests": [' "$1"
	for ((i = 0; i < REQS; i++)); do
		printf '%s{"prompt": "Once upon a time %d", "max_tokens": %d, "temperature": 0, "stream": true, "cache_prompt": %s}' \
			"$sep" "$i" "$2" "$CACHE_PROMPT"
		sep=,
	done
	echo ']}'
}

percentile() { sort -g | awk -v p="$1" '{v[NR] = $1} END { r = int((NR * p + 99) / 100); if (r < 1) r = 1; printf "%.1f\n", v[r] }'; }

# start_servers GGUF: sets OURS and THEIRS (ports) and their pids
start_servers() {
	local p1 p2
	p1=$(free_port) p2=$(free_port)
	"$INFER" "$1" --max-seqs "$REQS" --kv-type "$KV_TYPE" --http "127.0.0.1:$p1" 2>"$TMP/infer.log" &
	IPID=$!
	"$SERVER" -m "$1" -c $((REQS * 256)) -np "$REQS" -t "$THREADS" --host 127.0.0.1 --port "$p2" \
		>"$TMP/llama.log" 2>&1 &
	LPID=$!
	wait_until 60 grep -q "listening on" "$TMP/infer.log" || die "infer --http: $(tail -n 3 "$TMP/infer.log")"
	wait_until 60 curl -sf "http://127.0.0.1:$p2/health" -o /dev/null || die "llama-server: $(tail -n 3 "$TMP/llama.log")"
	OURS=$p1 THEIRS=$p2
}
stop_servers() { kill -TERM "$IPID" "$LPID" 2>/dev/null; wait "$IPID" "$LPID" 2>/dev/null; }
bench_cleanup_hook() { stop_servers; }

# one PORT SPEC NAME: one batch; its tok/s appended to NAME.rate, its TTFTs to NAME.ttft
one() {
	node "$NODE_DIR/client.js" "http://127.0.0.1:$1" bench "$2" >"$TMP/out" || die "$3: the client failed"
	[ "$(jq .errors "$TMP/out")" = 0 ] || die "$3: requests failed: $(cat "$TMP/out")"
	jq -r '.completion_tokens * 1000 / .wall_ms' "$TMP/out" >>"$TMP/$3.rate"
	jq -r '.ttft_ms[]' "$TMP/out" >>"$TMP/$3.ttft"
}

bench_model() { # LABEL GGUF TOKENS
	local label=$1 r e
	spec false "$3" >"$TMP/seq.json"
	spec true "$3" >"$TMP/conc.json"
	start_servers "$2"
	for e in ours theirs; do   # warm-up: first-use compiles, connections
		node "$NODE_DIR/client.js" "http://127.0.0.1:$([ $e = ours ] && echo "$OURS" || echo "$THEIRS")" bench \
			"$TMP/conc.json" >/dev/null || die "$label warm-up $e"
	done
	for ((r = 1; r <= REPEAT; r++)); do
		for e in ours theirs; do
			local port=$OURS
			[ $e = theirs ] && port=$THEIRS
			one "$port" "$TMP/seq.json" "$label.$e.one"
			one "$port" "$TMP/conc.json" "$label.$e.eight"
		done
		echo "round $r $label: 1 stream ours $(tail -n1 "$TMP/$label.ours.one.rate") llama-server" \
			"$(tail -n1 "$TMP/$label.theirs.one.rate"); $REQS streams ours $(tail -n1 "$TMP/$label.ours.eight.rate")" \
			"llama-server $(tail -n1 "$TMP/$label.theirs.eight.rate") tok/s"
	done
	stop_servers
	for e in ours theirs; do
		printf '%-10s %s: 1 stream %7.1f tok/s, %d streams %7.1f tok/s; TTFT at %d: p50 %s ms, p99 %s ms\n' \
			"$label" "$([ $e = ours ] && echo "infer --http" || echo "llama-server")" \
			"$(median <"$TMP/$label.$e.one.rate")" "$REQS" "$(median <"$TMP/$label.$e.eight.rate")" "$REQS" \
			"$(percentile 50 <"$TMP/$label.$e.eight.ttft")" "$(percentile 99 <"$TMP/$label.$e.eight.ttft")"
	done
	ratio "servepeer_${label}_ours_over_llamaserver_1stream" \
		"$(paired_ratio "$TMP/$label.ours.one.rate" "$TMP/$label.theirs.one.rate")" ">=1.0"
	ratio "servepeer_${label}_ours_over_llamaserver_${REQS}streams" \
		"$(paired_ratio "$TMP/$label.ours.eight.rate" "$TMP/$label.theirs.eight.rate")" ">=1.0"
	ratio "servepeer_${label}_ttft_p50_ms_ours_${REQS}streams" "$(percentile 50 <"$TMP/$label.ours.eight.ttft")" info
	ratio "servepeer_${label}_ttft_p50_ms_llamaserver_${REQS}streams" "$(percentile 50 <"$TMP/$label.theirs.eight.ttft")" info
}

"$BUILD/mkmodel" "$TMP/s15.gguf" --gguf f32 --from "$DEMO_MODEL" --vocab "$BUILD/models/demo_tokenizer.bin" \
	>/dev/null || die "mkmodel 15M"
make_s110m "$TMP/s110" q8_0
echo "llama-server $SERVER (one CPU backend, built for the flags in its directory's name) on $(cpu_model);" \
	"$REQS requests a batch, $REPEAT interleaved rounds, $THREADS threads each;" \
	"our KV cache $KV_TYPE (llama-server's: f16)"
bench_model "s15m_f32$KV_SUFFIX$CACHE_SUFFIX" "$TMP/s15.gguf" 64
bench_model "s110m_q8_0$KV_SUFFIX$CACHE_SUFFIX" "$TMP/s110_q8_0.gguf" 48
