#!/usr/bin/env bash
# t_serve_frameworks.sh - structured output as applications ask for it
# (issue 58, part 2), through frameworks nobody here wrote, each validating
# the reply against its own zod schema: the Vercel AI SDK's generateObject
# and streamObject (an OpenAI-compatible provider asking for json_schema)
# and LangChain's withStructuredOutput (method jsonSchema), greedy and with
# two seeds: 9 calls, every one an object the schema allows, and each
# framework's object for a seed the same as the others'.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_node
need_cmd jq jq
for p in ai @ai-sdk/openai-compatible @langchain/openai zod; do
	[ -d "$NODE_DIR/node_modules/$p" ] || fail "no npm $p in tests/node: make deps installs it"
done
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --chat-template chatml
node "$NODE_DIR/structured.js" "$BASE" >"$TMP/out" 2>"$TMP/err" || fail "structured.js: $(tail -n 3 "$TMP/err")"
assert_eq "calls answered" 9 "$(wc -l <"$TMP/out")"
bad=$(jq -c 'select(.ok != true)' "$TMP/out")
[ -z "$bad" ] || fail "a framework refused a reply: $bad"
ok "every call's object passed its framework's zod schema"
for seed in undefined 1 2; do
	assert_eq "seed $seed: the three calls got one object" 1 \
		"$(jq -c --arg s "seed=$seed" 'select(.call | endswith($s)) | .object' "$TMP/out" | sort -u | wc -l)"
done
stop_engine
