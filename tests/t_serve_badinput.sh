#!/usr/bin/env bash
# Bad input to the HTTP engine: each gets an OpenAI-shaped JSON error with
# the right status, and every other request is still served: a long
# streaming requests, one after another, run through all of it and must
# each end intact.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_node
need_cmd jq jq
need_cmd curl curl
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"

start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --max-conns 4 --max-body 4096
one='{"prompt":"Once upon a time","max_tokens":200,"temperature":0,"stream":true}'
echo "{\"requests\":[$(for i in $(seq 16); do printf '%s%s' "${sep:-}" "$one"; sep=,; done)]}" >"$TMP/long.json"
echo '{"requests":[{"prompt":"Once upon a time","max_tokens":200,"temperature":0}]}' >"$TMP/want.json"
node "$NODE_DIR/client.js" "$BASE" run "$TMP/long.json" >"$TMP/long" 2>&1 &
long=$!
wait_for health_ge requests 1 || fail "the long requests never started"

# expect_status CODE NAME CURL_ARGS...: status CODE and a JSON error message
expect_status() {
	local code=$1 name=$2 got
	shift 2
	got=$(curl -s -o "$TMP/body" -w '%{http_code}' "$@")
	assert_eq "$name: status" "$code" "$got"
	jq -e '.error.message | length > 0' "$TMP/body" >/dev/null || fail "$name: no JSON error: $(head -c 200 "$TMP/body")"
	ok "$name: $(jq -r .error.message "$TMP/body" | head -c 120)"
}
post() { expect_status "$1" "$2" "$BASE/v1/completions" -H 'Content-Type: application/json' --data-binary "$3"; }

post 400 "malformed JSON" '{"prompt": "x", '
post 400 "trailing bytes" '{"prompt": "x"} {}'
post 400 "not an object" '[1, 2]'
post 400 "empty body" ''
post 400 "no prompt" '{"max_tokens": 4}'
post 400 "prompt of the wrong type" '{"prompt": 3}'
post 400 "prompt ids of the wrong type" '{"prompt": [1, "a"]}'
post 400 "max_tokens a string" '{"prompt": "x", "max_tokens": "5"}'
post 400 "max_tokens a float" '{"prompt": "x", "max_tokens": 5.5}'
post 400 "temperature a string" '{"prompt": "x", "temperature": "hot"}'
post 400 "temperature out of range" '{"prompt": "x", "temperature": 9}'
post 400 "top_p out of range" '{"prompt": "x", "top_p": -0.5}'
post 400 "stream not a boolean" '{"prompt": "x", "stream": "yes"}'
post 400 "cache_prompt not a boolean" '{"prompt": "x", "cache_prompt": 1}'
post 400 "stop not a string" '{"prompt": "x", "stop": 5}'
post 400 "five stop strings" '{"prompt": "x", "stop": ["a","b","c","d","e"]}'
post 400 "n above 8" '{"prompt": "x", "n": 9}'
post 400 "n of 0" '{"prompt": "x", "n": 0}'
post 400 "max_tokens 0" '{"prompt": "x", "max_tokens": 0}'
post 400 "max_tokens below -1" '{"prompt": "x", "max_tokens": -2}'
post 400 "max_tokens huge" '{"prompt": "x", "max_tokens": 99999999999999999999}'
post 400 "token id outside the vocabulary" '{"prompt": [1, 99999]}'
long_prompt=$(printf 'the cat sat %.0s' $(seq 120))
post 400 "prompt longer than the context" "{\"prompt\": \"$long_prompt\", \"max_tokens\": 1}"
grep -q "maximum context length" "$TMP/body" || fail "context error lacks OpenAI's wording"
big=$(head -c 5000 /dev/zero | tr '\0' 'a')
post 413 "oversized body" "{\"prompt\": \"$big\"}"
expect_status 404 "unknown path" "$BASE/v2/nothing"
expect_status 405 "wrong method" -X DELETE "$BASE/v1/completions"

# through the real client: a 400 is a BadRequestError with status 400
echo '{"requests":[{"prompt":"x","max_tokens":0}]}' >"$TMP/bad.json"
client "$TMP/bad.json" "$TMP/bad"
assert_eq "openai client sees status" 400 "$(jq .status "$TMP/bad")"

# too many connections: with the long stream and three idle sockets open,
# the fifth connection is over --max-conns 4
exec 5<>"/dev/tcp/127.0.0.1/$PORT" 6<>"/dev/tcp/127.0.0.1/$PORT" 7<>"/dev/tcp/127.0.0.1/$PORT"
wait_for health_ge connections 5 || true
post 503 "too many connections" '{"prompt": "x", "max_tokens": 2}'
exec 5>&- 6>&- 7>&-
wait_for health_le connections 2 || fail "idle sockets not closed: $(health connections)"

# a client that vanishes mid-stream: raw HTTP, read a little, hang up
exec 5<>"/dev/tcp/127.0.0.1/$PORT"
body='{"prompt":"The cat","max_tokens":150,"temperature":0,"stream":true}'
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
	"${#body}" "$body" >&5
for i in $(seq 12); do read -r -t 5 line <&5 || break; done
exec 5>&-
wait_for stat_is .serving.finished.abort 1 || fail "the vanished stream was not aborted"
ok "a vanished streaming client is aborted"

wait "$long" || fail "the long requests failed: $(tail -n 3 "$TMP/long")"
client "$TMP/want.json" "$TMP/want"
assert_eq "16 streams ran through it all, each intact" 16 \
	"$(jq -r --arg t "$(jq -r .text "$TMP/want")" 'select(.text == $t and .finish_reason == "length" and .done)' "$TMP/long" | jq -s length)"
assert_eq "health after" ok "$(health status)"
wait_for health_is kv_blocks_used 0 || fail "KV blocks still held"
ok "no KV blocks held after"
stop_engine
