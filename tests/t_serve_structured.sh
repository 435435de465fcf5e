#!/usr/bin/env bash
# t_serve_structured.sh - structured output (issue 58, part 2): through the
# official openai client, chat and completions with response_format
# json_schema (nested objects, optional and required properties, enums,
# const, a type list, anyOf, arrays with bounds, strings with maxLength, an
# array at the root) and json_object, greedy and at temperature 1 with three
# seeds, whole and streamed: even this random-weight model's replies end
# with "stop" and are JSON that python3-jsonschema finds valid against their
# schemas, every streamed reply equal to the whole one; json_object replies
# that end are JSON objects. A schema keyword the compiler lacks is a 400
# naming it (t_chat_badinput).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_node
need_cmd jq jq
/usr/bin/python3 -c 'import jsonschema' 2>/dev/null || fail "no python3-jsonschema: make deps installs it"
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --chat-template chatml

cat >"$TMP/schemas.json" <<'J'
[
 {"type": "object", "properties": {
   "name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
   "color": {"enum": ["red", "green", "blue"]}, "ok": {"type": "boolean"},
   "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "minItems": 1, "maxItems": 3}},
  "required": ["name", "age", "color", "ok"], "additionalProperties": false},
 {"type": "object", "properties": {
   "user": {"type": "object", "properties": {"id": {"type": "integer"},
            "email": {"type": ["string", "null"], "maxLength": 20}}, "required": ["id"]},
   "scores": {"type": "array", "items": {"type": "number"}, "maxItems": 4}},
  "required": ["user"]},
 {"type": "object", "properties": {
   "value": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 8}, {"type": "null"}]},
   "flag": {"const": true}, "note": {"type": "string", "minLength": 2, "maxLength": 4}},
  "required": ["value", "flag", "note"]},
 {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4}
]
J
# every schema, both APIs (the array root only as a completion: OpenAI's chat
# takes object roots), greedy and three seeds at temperature 1, whole then
# streamed
jq -c '[to_entries[] | .key as $i | .value as $s |
	(["completions", "chat"][] | select(. == "completions" or $i < 3)) as $api |
	([{temperature: 0}, {temperature: 1, seed: 1}, {temperature: 1, seed: 2}, {temperature: 1, seed: 3}][]) as $t |
	(false, true) as $stream |
	(if $api == "chat" then {messages: [{role: "user", content: "Describe a person as JSON."}]}
	 else {prompt: "Once upon a time"} end) + $t +
	{max_tokens: 300, stream: $stream,
	 response_format: {type: "json_schema", json_schema: {name: "s\($i)", schema: $s}}}] |
	{concurrent: false, requests: .}' "$TMP/schemas.json" >"$TMP/spec.json"
client "$TMP/spec.json" "$TMP/results"
/usr/bin/python3 "$ROOT/tests/helpers/structured_check.py" "$TMP/spec.json" "$TMP/results" >"$TMP/check.out" 2>&1 ||
	fail "$(tail -n 3 "$TMP/check.out")"
ok "$(tail -n 1 "$TMP/check.out") ($(jq '.requests | length' "$TMP/spec.json") requests)"

# json_object: free keys and strings need not end in a random model; those
# that end are objects, and some do
jq -nc '{concurrent: false, requests: [range(1; 9) as $s |
	{prompt: "Once upon a time", max_tokens: 120, temperature: 1.5, seed: $s,
	 response_format: {type: "json_object"}}]}' >"$TMP/obj.json"
client "$TMP/obj.json" "$TMP/obj"
jq -c 'select(.finish_reason == "stop")' "$TMP/obj" >"$TMP/obj.stop"
[ -s "$TMP/obj.stop" ] || fail "json_object: no reply of 8 ended: $(head -c 300 "$TMP/obj")"
while read -r line; do
	jq -e '.text | fromjson | type == "object"' <<<"$line" >/dev/null ||
		fail "json_object: an ended reply that is not a JSON object: $line"
done <"$TMP/obj.stop"
ok "json_object: $(wc -l <"$TMP/obj.stop") of 8 replies ended, each a JSON object"
stop_engine
