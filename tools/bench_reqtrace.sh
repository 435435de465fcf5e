#!/usr/bin/env bash
# bench_reqtrace.sh - what request-level tracing costs a batching server.
#
# One HTTP engine, STREAMS concurrent streaming requests of MAX_TOKENS greedy
# tokens a round, driven by the real OpenAI client. Rounds interleave
# untraced / `daemon -p` (coarse, everything aggregated in the kernel) /
# `record -p --level detail` (every span and emit streamed), each tracer
# attached before the round and detached after it, outside the timed window.
# Aggregate tok/s = completion tokens / the round's wall time (timed inside
# the client). Every traced round must count exactly the client's tokens.
# Also: the engine's own probe hits per step and per token (--stats), at
# each level.
#
#   tools/bench_reqtrace.sh         (root)
#   ROUNDS=10 STREAMS=8 MAX_TOKENS=96 BUILD=build tools/bench_reqtrace.sh
export BENCH_NAME=bench_reqtrace
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
STREAMS=${STREAMS:-8}
MAX_TOKENS=${MAX_TOKENS:-96}
TOK=$BUILD/models/demo_tokenizer.bin
NODE_DIR=$ROOT/tests/node
[ "$(id -u)" = 0 ] || skipped "needs root to load BPF programs"
command -v node >/dev/null && [ -d "$NODE_DIR/node_modules/openai" ] || skipped "no node or npm openai (make deps)"
command -v jq >/dev/null && command -v curl >/dev/null || skipped "no jq or curl"
need_built "$INFER" "$SPANTRACE"
[ -r "$DEMO_MODEL" ] && [ -r "$TOK" ] || die "no demo model: run make models first"

TRACER=
bench_cleanup_hook() { [ -n "$TRACER" ] && kill -TERM "$TRACER" 2>/dev/null; [ -n "${EPID:-}" ] && kill "$EPID" 2>/dev/null; return 0; }

{
	printf '{"concurrent": true, "requests": ['
	for ((i = 0; i < STREAMS; i++)); do
		printf '%s{"prompt": "Once upon a time %d", "max_tokens": %d, "temperature": 0, "stream": true}' \
			"$([ $i -gt 0 ] && echo ,)" "$i" "$MAX_TOKENS"
	done
	echo ']}'
} >"$TMP/conc.json"

BACKEND=$(engine_backend "$DEMO_MODEL")
"$INFER" "$DEMO_MODEL" -z "$TOK" -b "$BACKEND" --max-seqs "$STREAMS" --stats "$TMP/stats.json" \
	--http 127.0.0.1:0 2>"$TMP/engine.err" &
EPID=$!
wait_until 60 grep -q "listening on" "$TMP/engine.err" || die "engine did not start: $(cat "$TMP/engine.err")"
BASE=http://127.0.0.1:$(sed -n 's/.*listening on http:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$TMP/engine.err")
client() { node "$NODE_DIR/client.js" "$BASE" bench "$TMP/conc.json" >"$TMP/out" || die "client failed"; }
client # warm-up
round_tok_s() { jq -r '.completion_tokens * 1000 / .wall_ms' "$TMP/out"; }
round_tokens() { jq -r .completion_tokens "$TMP/out"; }

run_untraced() { client; round_tok_s >>"$TMP/untraced"; }

# The daemon must count exactly the round's tokens and requests.
run_daemon() {
	"$SPANTRACE" daemon -p "$EPID" --listen 127.0.0.1:0 --interval 1 >"$TMP/daemon.log" 2>&1 &
	TRACER=$!
	wait_until 30 grep -qs 'metrics at http' "$TMP/daemon.log" || die "daemon did not start: $(tail -n3 "$TMP/daemon.log")"
	local port n
	port=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")
	client
	n=$(round_tokens)
	counted() {
		curl -sf --max-time 10 "http://127.0.0.1:$port/metrics" -o "$TMP/m.txt" &&
			[ "$(awk '/^spantrace_generation_tokens_total\{/ { s += $NF } END { print s + 0 }' "$TMP/m.txt")" = "$n" ]
	}
	rm -f "$TMP/m.txt"
	wait_until 15 counted || die "daemon counted $(grep -s '^spantrace_generation_tokens_total' "$TMP/m.txt") tokens, client $n; daemon: $(tail -n3 "$TMP/daemon.log")"
	kill -TERM "$TRACER"; wait "$TRACER" || die "daemon exited $?"; TRACER=
	round_tok_s >>"$TMP/daemon"
}

run_record() {
	rm -f "$TMP/run.jsonl" # the last round's session line would pass for this one's
	"$SPANTRACE" record -q -p "$EPID" --level detail -o "$TMP/run.jsonl" --summary "$TMP/sum.json" 2>"$TMP/record.err" &
	TRACER=$!
	wait_until 30 grep -qs '"type":"session"' "$TMP/run.jsonl" || die "record did not attach: $(cat "$TMP/record.err")"
	client
	kill -INT "$TRACER"; wait "$TRACER" || die "record exited $?: $(cat "$TMP/record.err")"; TRACER=
	local n t
	n=$(round_tokens)
	t=$(jq -s 'map(select(.type == "emit")) | length' "$TMP/run.jsonl")
	[ "$t" = "$n" ] || die "record streamed $t emits, client counted $n tokens; records: $(jq -r .type "$TMP/run.jsonl" | sort | uniq -c | tr "\n" " ")"
	jq -r .dropped "$TMP/sum.json" >>"$TMP/drops"
	round_tok_s >>"$TMP/record"
}

: >"$TMP/untraced"; : >"$TMP/daemon"; : >"$TMP/record"; : >"$TMP/drops"
for r in $(seq "$ROUNDS"); do
	rotate3 "$r" run_untraced run_daemon run_record
	echo "round $r/$ROUNDS: untraced $(tail -n1 "$TMP/untraced")  daemon $(tail -n1 "$TMP/daemon")  record detail $(tail -n1 "$TMP/record") tok/s" >&2
done
kill -TERM "$EPID"; wait "$EPID" || die "engine exited $?"; EPID=

echo "$BACKEND backend, $STREAMS concurrent streams x $MAX_TOKENS tokens, median of $ROUNDS interleaved rounds:"
echo "  untraced                   $(median <"$TMP/untraced") tok/s"
echo "  daemon -p (coarse)         $(median <"$TMP/daemon") tok/s   (tokens counted = client's, every round)"
echo "  record -p --level detail   $(median <"$TMP/record") tok/s   (emits = client's tokens; dropped in all rounds: $(awk '{ s += $1 } END { print s + 0 }' "$TMP/drops"))"
echo "  per-round daemon/untraced: $(paired_list "$TMP/daemon" "$TMP/untraced")"
echo "  per-round record/untraced: $(paired_list "$TMP/record" "$TMP/untraced")"
ratio serve8_daemon_over_untraced "$(paired_ratio "$TMP/daemon" "$TMP/untraced")" ">=0.99"
ratio serve8_record_detail_over_untraced "$(paired_ratio "$TMP/record" "$TMP/untraced")" ">=0.95"

# Probe hits: the engine counts every probe site call (traced or not).
S=$TMP/stats.json
hits() { jq --arg level "$1" '.probes | (if $level == "coarse" then del(.op_begin, .op_end, .cl_batch) else . end) | [.[]] | add' "$S"; }
steps=$(jq .serving.steps "$S") tokens=$(jq .serving.emitted_tokens "$S")
untraced=$(median <"$TMP/untraced")
for level in coarse detail; do
	h=$(hits $level)
	printf 'probe hits at %s: %s over %s steps and %s tokens: %.1f per step, %.1f per token\n' \
		"$level" "$h" "$steps" "$tokens" "$(div "$h" "$steps")" "$(div "$h" "$tokens")"
	ratio "serve8_${level}_hits_per_step" "$(div "$h" "$steps")" info
	ratio "serve8_${level}_hits_per_token" "$(div "$h" "$tokens")" info
done
# The tracer section's per-hit costs (tools/bench.sh exports them) x hits per token.
est_daemon=$(expected_ratio "$(div "$(hits coarse)" "$tokens")" "${TRACER_KERNEL_HIT_NS:-}" "$untraced")
est_record=$(expected_ratio "$(div "$(hits detail)" "$tokens")" "${TRACER_STREAM_HIT_NS:-}" "$untraced")
echo "expected from hits x per-hit cost: daemon $est_daemon, record detail $est_record"
ratio serve8_daemon_expected_from_hit_counts "$est_daemon" ">=0.99"
ratio serve8_record_detail_expected_from_hit_counts "$est_record" ">=0.95"
