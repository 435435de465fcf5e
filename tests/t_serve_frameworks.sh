#!/usr/bin/env bash
# t_serve_frameworks.sh - the HTTP engine as applications call it, through
# frameworks nobody here wrote (issue 58; tests/node/frameworks.js):
#   - plain chat: the Vercel AI SDK's generateText and streamText and
#     LangChain's invoke and stream, greedy, all four the same text as the
#     chat API gives curl;
#   - structured output (part 2), each framework validating the reply
#     against its own zod schema: the AI SDK's generateObject and
#     streamObject (json_schema) and LangChain's withStructuredOutput
#     (jsonSchema), greedy and with two seeds: 9 calls, every one an object
#     the schema allows, the three calls for a seed the same object.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_node
need_cmd jq jq
for p in ai @ai-sdk/openai-compatible @langchain/openai zod; do
	[ -d "$NODE_DIR/node_modules/$p" ] || fail "no npm $p in tests/node: make deps installs it"
done
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --chat-template chatml
node "$NODE_DIR/frameworks.js" "$BASE" >"$TMP/out" 2>"$TMP/err" || fail "frameworks.js: $(tail -n 3 "$TMP/err")"
assert_eq "calls answered" 13 "$(wc -l <"$TMP/out")"
bad=$(jq -c 'select(.ok != true)' "$TMP/out")
[ -z "$bad" ] || fail "a framework refused a reply: $bad"
ok "every call answered; every object passed its framework's zod schema"
want=$(curl -s "$BASE/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":12,"temperature":0}' |
	jq -c '.choices[0].message.content')
[ "$(jq 'length' <<<"$want")" -gt 0 ] || fail "the chat API gave no text: $want"
assert_eq "plain chat: the 4 framework calls' texts = the chat API's" "$want" \
	"$(jq -c 'select(.text != null) | .text' "$TMP/out" | sort -u)"
for seed in undefined 1 2; do
	assert_eq "seed $seed: the three calls got one object" 1 \
		"$(jq -c --arg s "seed=$seed" 'select(.call | endswith($s)) | .object' "$TMP/out" | sort -u | wc -l)"
done
stop_engine
