#!/usr/bin/env bash
# fast
# t_serve_logprobs.sh - logprobs on both APIs (issue 58, part 3), with
# llama-server as the witness, on the same F32 GGUF file (llama-server with
# an F32 KV cache, as ours):
#   - completions, logprobs 5, greedy: each token's logprob and its five
#     alternatives (text and logprob) equal llama-server's within 0.01, the
#     alternatives in its order but where two are within 0.01 (a near-tie);
#     the drawn token is the first alternative; text_offset adds up;
#   - chat, logprobs true, top_logprobs 3, through the official openai
#     client, whole and streamed: one entry per reply token, its bytes its
#     text's, the same figures both ways;
#   - top_logprobs without logprobs, and out of range, are 400s naming it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_node
need_cmd jq jq
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"
demo_gguf f32 "$TMP/m.gguf"
llama_on "$TMP/m.gguf" -c 512 -np 1 -t 1 -ctk f32 -ctv f32
start_engine "$TMP/m.gguf" -b cpu --chat-template chatml

body='{"prompt":"Once upon a time","max_tokens":16,"temperature":0,"logprobs":5}'
curl -s "$BASE/v1/completions" -d "$body" >"$TMP/ours.json"
curl -s "$LBASE/v1/completions" -d "$body" >"$TMP/llama.json"
/usr/bin/python3 - "$TMP/ours.json" "$TMP/llama.json" <<'PY' || fail "completions logprobs differ from llama-server's"
import json, math, sys
ours = json.load(open(sys.argv[1]))["choices"][0]
theirs = json.load(open(sys.argv[2]))["choices"][0]["logprobs"]["content"]
lp = ours["logprobs"]
n = len(lp["tokens"])
assert n == 16 == len(ours["token_ids"]) == len(theirs), (n, len(theirs))
off = 0
for i in range(n):
    t = theirs[i]
    assert lp["tokens"][i] == t["token"], (i, lp["tokens"][i], t["token"])
    assert abs(lp["token_logprobs"][i] - t["logprob"]) < 0.01, (i, lp["token_logprobs"][i], t["logprob"])
    alts = list(lp["top_logprobs"][i].items())
    assert len(alts) == 5 and alts[0][0] == lp["tokens"][i], (i, alts)
    assert abs(alts[0][1] - lp["token_logprobs"][i]) < 1e-6, (i, alts[0], lp["token_logprobs"][i])
    for k, (a, b) in enumerate(zip(alts, t["top_logprobs"])):
        assert abs(a[1] - b["logprob"]) < 0.01, (i, k, a, b)
        if a[0] != b["token"]:  # a near-tie: the two swap
            assert abs(a[1] - b["logprob"]) < 0.01 and any(x["token"] == a[0] for x in t["top_logprobs"]), (i, k, a, b)
    assert sum(math.exp(v) for _, v in alts) <= 1.0 + 1e-5
    assert lp["text_offset"][i] == off, (i, lp["text_offset"], off)
    off += len(lp["tokens"][i].encode())
print("ok: completions: 16 tokens, each logprob and 5 alternatives = llama-server's within 0.01")
PY

cat >"$TMP/chat.json" <<'J'
{"concurrent": false, "requests": [
 {"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 12, "temperature": 0, "logprobs": true, "top_logprobs": 3},
 {"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 12, "temperature": 0, "logprobs": true, "top_logprobs": 3, "stream": true}
]}
J
for i in 0 1; do
	curl -s "$BASE/v1/chat/completions" -d "$(jq -c ".requests[$i]" "$TMP/chat.json")" >"$TMP/chat$i.raw"
done
jq -c '.choices[0].logprobs.content' "$TMP/chat0.raw" >"$TMP/whole.lp"
sed -n 's/^data: //p' "$TMP/chat1.raw" | grep -v '^\[DONE\]' |
	jq -c '.choices[0].logprobs.content // empty | .[]' | jq -sc . >"$TMP/stream.lp"
cmp -s "$TMP/whole.lp" "$TMP/stream.lp" || fail "chat: streamed logprobs differ: $(head -c 300 "$TMP/stream.lp") vs $(head -c 300 "$TMP/whole.lp")"
ok "chat: streamed logprobs = whole ones ($(jq length "$TMP/whole.lp") entries)"
/usr/bin/python3 - "$TMP/chat0.raw" <<'PY' || fail "chat logprobs"
import json, sys
r = json.load(open(sys.argv[1]))
c = r["choices"][0]
content = c["logprobs"]["content"]
text = "".join(e["token"] for e in content)
assert text == c["message"]["content"], (text, c["message"]["content"])
for e in content:
    assert bytes(e["bytes"]) == e["token"].encode(), e
    assert len(e["top_logprobs"]) == 3 and e["top_logprobs"][0]["logprob"] >= e["logprob"] - 1e-6, e
    assert e["logprob"] <= 0
print("ok: chat: %d entries, their texts the reply's, bytes their texts'" % len(content))
PY
# the official client reads them
client "$TMP/chat.json" "$TMP/client.out"
assert_eq "the openai client: both chats ended" "2" "$(jq -s '[.[] | select(.finish_reason != null)] | length' "$TMP/client.out")"

bad() { # NAME BODY: a 400 naming top_logprobs or logprobs
	local code
	code=$(curl -s -o "$TMP/body" -w '%{http_code}' "$BASE/v1/chat/completions" -d "$2")
	assert_eq "$1: status" 400 "$code"
	grep -q "'top_logprobs'\|'logprobs'" "$TMP/body" || fail "$1: does not name the field: $(cat "$TMP/body")"
}
U='{"role":"user","content":"x"}'
bad "top_logprobs without logprobs" "{\"messages\":[$U],\"top_logprobs\":2}"
bad "top_logprobs 21" "{\"messages\":[$U],\"logprobs\":true,\"top_logprobs\":21}"
bad "logprobs a number in a chat" "{\"messages\":[$U],\"logprobs\":3}"
code=$(curl -s -o "$TMP/body" -w '%{http_code}' "$BASE/v1/completions" -d '{"prompt":"x","logprobs":21}')
assert_eq "completions logprobs 21: status" 400 "$code"
kill "$lpid"
wait "$lpid" 2>/dev/null
stop_engine
