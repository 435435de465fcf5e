#!/usr/bin/env bash
# fast
# t_serve_n.sh - OpenAI's n (issue 58, part 3): n choices of one request,
# each its own sequence in the batch:
#   - completions, n 3 at temperature 1 with a seed: choice i is the reply
#     a single request with seed + i gets (text and ids), the three differ,
#     usage counts the prompt once and every choice's tokens;
#   - chat, n 2, streamed with include_usage: per index, the deltas add up
#     to the whole reply's message, each index ends once, one [DONE]; the
#     official openai client reads n 3 as 3 choices, streamed and not;
#   - n 8 beside --max-seqs 2 queues and still answers all 8; logprobs come
#     with every choice; a client gone mid-stream cancels every choice.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_node
need_cmd jq jq
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --chat-template chatml --max-seqs 2

P='"prompt":"Once upon a time","max_tokens":8,"temperature":1'
curl -s "$BASE/v1/completions" -d "{$P,\"seed\":5,\"n\":3}" >"$TMP/n3.json"
assert_eq "n 3: three choices, indexes 0..2" "[0,1,2]" "$(jq -c '[.choices[].index]' "$TMP/n3.json")"
for i in 0 1 2; do
	curl -s "$BASE/v1/completions" -d "{$P,\"seed\":$((5 + i))}" >"$TMP/one$i.json"
	assert_eq "choice $i = the single request with seed $((5 + i))" \
		"$(jq -c '.choices[0] | [.text, .token_ids]' "$TMP/one$i.json")" \
		"$(jq -c --argjson i $i '.choices[$i] | [.text, .token_ids]' "$TMP/n3.json")"
done
assert_eq "the three choices differ" 3 "$(jq '[.choices[].text] | unique | length' "$TMP/n3.json")"
assert_eq "usage: the prompt once, every choice's tokens" \
	"$(jq -c '[.usage.prompt_tokens, 24]' "$TMP/one0.json")" \
	"$(jq -c '[.usage.prompt_tokens, .usage.completion_tokens]' "$TMP/n3.json")"

C='"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":10,"temperature":1,"seed":9,"n":2'
curl -s "$BASE/v1/chat/completions" -d "{$C}" >"$TMP/whole.json"
curl -sN "$BASE/v1/chat/completions" -d "{$C,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" >"$TMP/stream.sse"
sed -n 's/^data: //p' "$TMP/stream.sse" | grep -v '^\[DONE\]$' >"$TMP/chunks"
for i in 0 1; do
	assert_eq "chat stream, index $i: the deltas = the whole reply" \
		"$(jq -r --argjson i $i '.choices[$i].message.content' "$TMP/whole.json")" \
		"$(jq -j --argjson i $i '.choices[] | select(.index == $i) | .delta.content // empty' "$TMP/chunks")"
	assert_eq "chat stream, index $i: one finish_reason" 1 \
		"$(jq --argjson i $i -s '[.[].choices[] | select(.index == $i and .finish_reason != null)] | length' "$TMP/chunks")"
done
assert_eq "chat stream: one [DONE], the last event" "1 data: [DONE]" \
	"$(grep -c '^data: \[DONE\]$' "$TMP/stream.sse") $(grep '^data: ' "$TMP/stream.sse" | tail -n 1)"
assert_eq "chat stream: usage sums both choices" "$(jq -c '.usage.completion_tokens' "$TMP/whole.json")" \
	"$(jq -s -c 'map(select(.usage)) | .[0].usage.completion_tokens' "$TMP/chunks")"

# the official client
cat >"$TMP/n.js" <<'JS'
const OpenAI = require(process.env.NODE_DIR + '/node_modules/openai');
const c = new OpenAI({ baseURL: process.argv[2] + '/v1', apiKey: 'x', maxRetries: 0 });
(async () => {
	const m = [{ role: 'user', content: 'Tell me a story' }];
	const whole = await c.chat.completions.create({ messages: m, max_tokens: 6, n: 3, seed: 1, temperature: 1 });
	const s = await c.chat.completions.create({ messages: m, max_tokens: 6, n: 3, seed: 1, temperature: 1, stream: true });
	const text = ['', '', ''];
	for await (const ch of s) for (const x of ch.choices) text[x.index] += x.delta.content || '';
	console.log(JSON.stringify({ n: whole.choices.length, same: whole.choices.every((x, i) => x.message.content === text[i]) }));
})().catch(e => { console.error(e.message); process.exit(1); });
JS
assert_eq "the openai client: 3 choices, the stream's texts the whole's" '{"n":3,"same":true}' \
	"$(NODE_DIR=$NODE_DIR node "$TMP/n.js" "$BASE" 2>"$TMP/node.err" || cat "$TMP/node.err")"

curl -s "$BASE/v1/completions" -d "{$P,\"seed\":1,\"n\":8,\"logprobs\":1}" >"$TMP/n8.json"
assert_eq "n 8 beside --max-seqs 2: 8 choices, each with its logprobs" "8 8" \
	"$(jq -r '"\(.choices | length) \([.choices[] | select(.logprobs.token_logprobs | length == 8)] | length)"' "$TMP/n8.json")"

# a client gone mid-stream: every choice is cancelled
exec 5<>"/dev/tcp/127.0.0.1/$PORT"
body="{\"prompt\":\"Once upon a time\",\"max_tokens\":200,\"temperature\":1,\"n\":2,\"stream\":true}"
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' "${#body}" "$body" >&5
wait_for health_ge running 2 || fail "the two choices never ran: $(curl -s "$BASE/health")"
exec 5>&-
wait_for health_is running 0 || fail "choices left running after the client went: $(curl -s "$BASE/health")"
ok "a client gone mid-stream: both choices cancelled"
stop_engine
