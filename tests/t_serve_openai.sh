#!/usr/bin/env bash
# fast
# The HTTP engine against the official OpenAI client (npm `openai`), streaming
# and not: text, usage and finish_reason; [DONE] ends the stream; models.list;
# greedy output equals the single-stream CLI's; stop strings and max_tokens.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_node
need_cmd jq jq
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"

start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu
assert_eq "health" ok "$(health status)"
node "$NODE_DIR/client.js" "$BASE" models >"$TMP/models" || fail "models.list failed"
assert_eq "models.list ids" '["demo15M.bin"]' "$(jq -c '[.[].id]' "$TMP/models")"

cat >"$TMP/spec.json" <<'J'
{"concurrent": false, "requests": [
 {"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0},
 {"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0, "stream": true},
 {"prompt": "The cat", "max_tokens": 12, "temperature": 0.8, "top_p": 0.9, "seed": 7},
 {"prompt": "The cat", "max_tokens": 12, "temperature": 0.8, "top_p": 0.9, "seed": 7, "stream": true}
]}
J
client "$TMP/spec.json" "$TMP/out"
r() { sed -n "$(($1 + 1))p" "$TMP/out" | jq -r "$2"; }
assert_eq "non-streaming object" text_completion "$(r 0 .object)"
assert_eq "usage.prompt_tokens (BOS + 4 words)" 5 "$(r 0 .usage.prompt_tokens)"
assert_eq "usage.completion_tokens" 24 "$(r 0 .usage.completion_tokens)"
assert_eq "finish_reason at max_tokens" length "$(r 0 .finish_reason)"
assert_eq "stream: the SDK's iterator ended" true "$(r 1 .done)"
read -r dones last events < <(wire_done "$BASE/v1/completions" \
	'{"model": "m", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "stream": true}')
assert_eq "stream on the wire: one [DONE], the last data line" "1 [DONE]" "$dones $last"
assert_ge "stream on the wire: events before it" "$events" 2
# A chunk carries the tokens made since the last one: one each while the
# connection keeps up with the engine, several when it falls behind.
assert_le "stream: more than one chunk" 2 "$(r 1 .chunks)"
assert_le "stream: at most a chunk per token" "$(r 1 .chunks)" 24
assert_eq "stream: token ids over the chunks" 24 "$(r 1 '.token_ids | length')"
assert_eq "stream text = non-stream text" "$(r 0 .text)" "$(r 1 .text)"
assert_eq "stream ids = non-stream ids" "$(r 0 '.token_ids|join(" ")')" "$(r 1 '.token_ids|join(" ")')"
assert_eq "stream usage" "$(r 0 .usage.total_tokens)" "$(r 1 .usage.total_tokens)"
assert_eq "seeded sampling repeats, streamed or not" "$(r 2 .text)" "$(r 3 .text)"
[ -n "$(r 0 .text)" ] || fail "empty completion text"

# greedy HTTP ids = the CLI's greedy ids for the same prompt
cli=$("$INFER" "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu -t 0 -n 28 -i "Once upon a time" --ids 2>/dev/null)
assert_eq "HTTP greedy ids = CLI -t 0 --ids" "$cli" "$(r 0 '.token_ids|join(" ")')"

# a stop string: the text ends before it, finish_reason stop
stop_at=$(r 0 .text | cut -c5-8)
printf '{"requests":[{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stop":["%s"]},
 {"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stop":"%s","stream":true}]}' \
	"$stop_at" "$stop_at" >"$TMP/stop.json"
client "$TMP/stop.json" "$TMP/stop"
full=$(r 0 .text)
want=${full%%"$stop_at"*}
for i in 0 1; do
	got=$(sed -n "$((i + 1))p" "$TMP/stop" | jq -r .text)
	assert_eq "stop string '$stop_at' cuts the text ($i)" "$want" "$got"
	assert_eq "finish_reason after a stop string ($i)" stop "$(sed -n "$((i + 1))p" "$TMP/stop" | jq -r .finish_reason)"
done
assert_eq "nothing running after" 0 "$(health running)"
assert_eq "no KV blocks held after" 0 "$(health kv_blocks_used)"
stop_engine
