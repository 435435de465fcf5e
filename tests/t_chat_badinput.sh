#!/usr/bin/env bash
# fast
# /v1/chat/completions on `infer --http` (issue 49): what the engine cannot
# do is a 400 that names the field (n > 8, tools, images, audio,
# top_logprobs without logprobs, schema keywords the compiler lacks, two assistant turns at the end, roles out of turn), as is a
# model with no usable chat template, which is told how to pass one; a bad
# --chat-template is refused at start. Every refusal leaves the engine
# serving: a chat after them all still answers.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_cmd jq jq
need_cmd curl curl
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"
[ -r "$MODELS/tokenizer.bin" ] || skip "no ../shared/models/tokenizer.bin beside the project"

# expect_status CODE NAME WORD PATH BODY: status CODE and a JSON error naming WORD
expect_status() {
	local code=$1 name=$2 word=$3 got
	got=$(curl -s -o "$TMP/body" -w '%{http_code}' "$BASE$4" -H 'Content-Type: application/json' \
		--data-binary "$5")
	assert_eq "$name: status" "$code" "$got"
	jq -e --arg w "$word" '.error.message | contains($w)' "$TMP/body" >/dev/null ||
		fail "$name: the error does not say '$word': $(head -c 300 "$TMP/body")"
	ok "$name: $(jq -r .error.message "$TMP/body" | head -c 140)"
}
chat() { expect_status 400 "$1" "$2" /v1/chat/completions "$3"; }
U='{"role":"user","content":"Hello"}'

# A model whose file carries no template: chat is refused with the way out.
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu
chat "no template" "--chat-template" "{\"messages\":[$U]}"
grep -q "chat template none" "$TMP/engine.err" || fail "start-up line does not say there is no template"
stop_engine
# ... and --chat-template gives it one.
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --chat-template chatml
got=$(curl -s "$BASE/v1/chat/completions" -d "{\"messages\":[$U],\"max_tokens\":3,\"temperature\":0}")
assert_eq "--chat-template chatml: a chat completion" "chat.completion 3" \
	"$(jq -r '"\(.object) \(.usage.completion_tokens)"' <<<"$got")"
stop_engine
expect_fail "--chat-template jinja2" "not a template family this engine knows (llama2, chatml" \
	"$INFER" "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --chat-template jinja2 --http 127.0.0.1:0

"$MKMODEL" "$TMP/l2.gguf" --shape stories15M --gguf q8_0 --vocab "$MODELS/tokenizer.bin" \
	--chat-template llama2 >"$TMP/mk.err" 2>&1 || fail "mkmodel: $(cat "$TMP/mk.err")"
start_engine "$TMP/l2.gguf" -b cpu
grep -q "chat template llama2" "$TMP/engine.err" || fail "start-up line does not name the template"
chat "n = 9" "'n'" "{\"messages\":[$U],\"n\":9}"
chat "tools" "'tools'" "{\"messages\":[$U],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}"
chat "tool_choice required" "'tool_choice'" "{\"messages\":[$U],\"tool_choice\":\"required\"}"
chat "functions" "'functions'" "{\"messages\":[$U],\"functions\":[{\"name\":\"f\"}]}"
chat "a tool message" "'messages[1].role'" "{\"messages\":[$U,{\"role\":\"tool\",\"content\":\"x\"}]}"
chat "tool calls" "'messages[1].tool_calls'" \
	"{\"messages\":[$U,{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"1\"}]},$U]}"
chat "an image" "'messages[0].content[1]': images" \
	'{"messages":[{"role":"user","content":[{"type":"text","text":"what is it"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}]}'
chat "audio" "'messages[0].content[0]': audio" \
	'{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]}]}'
chat "top_logprobs without logprobs" "'top_logprobs'" "{\"messages\":[$U],\"top_logprobs\":2}"
chat "a schema keyword not supported" "'pattern'" \
	"{\"messages\":[$U],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"b+\"}}}}}}"
chat "response_format of no known type" "'response_format.type'" "{\"messages\":[$U],\"response_format\":{\"type\":\"xml\"}}"
chat "json_schema without its schema" "'response_format.json_schema.schema'" \
	"{\"messages\":[$U],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\"}}}"
chat "no messages" "'messages'" '{"max_tokens":3}'
chat "empty messages" "'messages'" '{"messages":[]}'
chat "messages not a list" "'messages'" '{"messages":"hi"}'
chat "a message not an object" "'messages[0]'" '{"messages":[3]}'
chat "an unknown role" "'messages[0].role'" '{"messages":[{"role":"robot","content":"x"}]}'
chat "content a number" "'messages[0].content'" '{"messages":[{"role":"user","content":7}]}'
chat "user content missing" "'messages[0].content'" '{"messages":[{"role":"user"}]}'
chat "max_completion_tokens 0" "'max_completion_tokens'" "{\"messages\":[$U],\"max_completion_tokens\":0}"
chat "max_tokens a string" "'max_tokens'" "{\"messages\":[$U],\"max_tokens\":\"4\"}"
chat "stream_options not an object" "'stream_options'" "{\"messages\":[$U],\"stream_options\":true}"
chat "two assistant messages at the end" "2 or more assistant" \
	"{\"messages\":[$U,{\"role\":\"assistant\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"there\"}]}"
chat "roles out of turn (llama2's template)" "alternate" "{\"messages\":[$U,$U]}"
chat "malformed JSON" "JSON" '{"messages": ['
chat "logit_bias a list" "'logit_bias'" "{\"messages\":[$U],\"logit_bias\":[1]}"
chat "logit_bias of a word" "'logit_bias'" "{\"messages\":[$U],\"logit_bias\":{\"hello\":1}}"
chat "logit_bias past 100" "'logit_bias'" "{\"messages\":[$U],\"logit_bias\":{\"5\":101}}"
chat "logit_bias outside the vocabulary" "logit_bias" "{\"messages\":[$U],\"logit_bias\":{\"99999\":1}}"
expect_status 400 "/apply-template, no messages" "'messages'" /apply-template '{}'
expect_status 400 "/tokenize, no content" "'content'" /tokenize '{"text":"x"}'
# no tools with tool_choice auto is a plain reply, as llama-server's
assert_eq "tools [] with tool_choice auto: a plain reply" "chat.completion stop-or-length" \
	"$(curl -s "$BASE/v1/chat/completions" -d "{\"messages\":[$U],\"tools\":[],\"tool_choice\":\"auto\",\"max_tokens\":3}" |
		jq -r '"\(.object) \(if (.choices[0].finish_reason | test("^(stop|length)$")) then "stop-or-length" else .choices[0].finish_reason end)"')"
# still serving, and the reply carries the shapes the clients read
got=$(curl -s "$BASE/v1/chat/completions" -d "{\"messages\":[$U],\"max_tokens\":4,\"temperature\":0}")
assert_eq "a chat after the refusals" "chat.completion assistant 4" \
	"$(jq -r '"\(.object) \(.choices[0].message.role) \(.usage.completion_tokens)"' <<<"$got")"
assert_eq "health after" ok "$(health status)"
stop_engine
