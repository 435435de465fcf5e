#!/usr/bin/env bash
# t_chat_llamacpp.sh - `infer --http` as a drop-in for llama-server's chat
# (issue 49), against llama-server built from the source node-llama-cpp
# ships. For each template family (llama2, chatml, llama3, mistral, zephyr,
# gemma, phi3), mkmodel writes a stories15M-shape GGUF (the shared 32000-token
# llama2.c vocabulary, the family's special tokens added as control tokens,
# and its template as tokenizer.chat_template); then:
#   - for 11 conversations (system, developer, multi-turn, padded and
#     multi-line content, text parts, non-ASCII, special tokens' text in the
#     content, roles out of turn), our /apply-template equals llama-server's
#     to the byte, our tokens equal llama.cpp's tokenization of its prompt
#     (add_special, parse_special: as its chat completions tokenize), and
#     our chat completion counts exactly those prompt tokens; a conversation
#     llama-server's template refuses, ours refuses (chat_compare.py);
#   - with chatml and llama-3 templates, the same client code (the official
#     `openai` npm client's chat.completions.create, streaming and not) runs
#     against both servers: the shapes (object, role, finish_reason, usage,
#     chunk objects, [DONE]) and the prompt token counts agree, and each
#     server streams what it answers whole;
#   - a stop string ends the text just before its first occurrence, in the
#     chat and the completions API, streamed or not, on both servers;
#   - generation pushed (logit_bias) onto <|im_end|>, EOS or BOS ends, or not,
#     with the same text, finish_reason and token count on both servers;
#   - a traced chat (record -p) is a request like any other: its prompt
#     tokens are the template's, joined with its socket.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_node
need_bpf
for c in jq:jq curl:curl python3:python3; do need_cmd "${c%%:*}" "${c#*:}"; done
[ -r "$MODELS/tokenizer.bin" ] || skip "no ../shared/models/tokenizer.bin beside the project"
SERVER=$("$ROOT/tools/build_llama_server.sh" --check) || fail "no llama-server fixture (make llama-server)"

start_llama() {
	lport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	"$SERVER" -m "$1" -c 512 -np 2 -t 1 --host 127.0.0.1 --port "$lport" >"$TMP/llama.log" 2>&1 &
	lpid=$!
	LBASE=http://127.0.0.1:$lport
	WAIT_S=60 wait_for curl -sf -o /dev/null "$LBASE/health" ||
		fail "llama-server did not start: $(tail -n 3 "$TMP/llama.log")"
}
stop_llama() { kill "$lpid"; wait "$lpid" 2>/dev/null; }

# run_both SPEC NAME: the spec's requests against our engine and llama-server
# (a new connection per request: llama-server fails one that follows a
# stream on the same connection), into $TMP/NAME.ours and $TMP/NAME.llama.
run_both() {
	client "$1" "$TMP/$2.ours"
	CLIENT_KEEPALIVE=0 node "$NODE_DIR/client.js" "$LBASE" run "$1" >"$TMP/$2.llama" 2>"$TMP/client.err" ||
		fail "client against llama-server: $(cat "$TMP/client.err")"
}
# r FILE I JQ: field JQ of result I in FILE
r() { sed -n "$(($2 + 1))p" "$1" | jq -r "$3"; }

# The openai client's chat, streaming and not, the same code against both.
check_clients() {
	local f=$1 out
	cat >"$TMP/chat.json" <<'J'
{"concurrent": false, "requests": [
 {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a story"}],
  "max_tokens": 16, "temperature": 0},
 {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a story"}],
  "max_tokens": 16, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}},
 {"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 6, "temperature": 0.8,
  "top_p": 0.9, "seed": 5}
]}
J
	run_both "$TMP/chat.json" "$f"
	for out in "$TMP/$f.ours" "$TMP/$f.llama"; do
		local who=${out##*.}
		assert_eq "$f $who: object, role" "chat.completion assistant 1" \
			"$(r "$out" 0 '"\(.object) \(.role) \(.choices)"')"
		assert_eq "$f $who: the SDK's stream ended, role" "true assistant" "$(r "$out" 1 '"\(.done) \(.role)"')"
		assert_eq "$f $who: chunks, every one a chat.completion.chunk" true \
			"$(r "$out" 1 '(.chunk_objects | length) > 0 and ([.chunk_objects[] == "chat.completion.chunk"] | all)')"
		assert_eq "$f $who: streamed text = whole text" "$(r "$out" 0 .text)" "$(r "$out" 1 .text)"
		assert_eq "$f $who: streamed usage = whole usage" "$(r "$out" 0 '.usage.total_tokens')" \
			"$(r "$out" 1 '.usage.total_tokens')"
		assert_eq "$f $who: finish_reason" true "$(r "$out" 0 '.finish_reason == "length" or .finish_reason == "stop"')"
		assert_eq "$f $who: max_completion_tokens honoured" true "$(r "$out" 2 '.usage.completion_tokens <= 6 and .usage.completion_tokens > 0')"
	done
	# [DONE] as the wire has it, from each server (the SDK does not say)
	local base dones last events
	for base in "$BASE" "$LBASE"; do
		read -r dones last events < <(wire_done "$base/v1/chat/completions" \
			'{"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "temperature": 0, "stream": true}')
		assert_eq "$f $base: chat stream on the wire ends with one [DONE]" "1 [DONE]" "$dones $last"
		assert_ge "$f $base: chat events before it" "$events" 2
	done
	assert_eq "$f: prompt tokens, ours = llama-server's" "$(r "$TMP/$f.llama" 0 .usage.prompt_tokens)" \
		"$(r "$TMP/$f.ours" 0 .usage.prompt_tokens)"
	if [ "$(r "$TMP/$f.ours" 0 .text)" = "$(r "$TMP/$f.llama" 0 .text)" ]; then
		ok "$f: the greedy replies are equal too"
	else # not asserted: greedy ids are t_gguf_llamacpp's, with its near-tie rule
		ok "$f: greedy replies differ (ours '$(r "$TMP/$f.ours" 0 .text)', llama '$(r "$TMP/$f.llama" 0 .text)')"
	fi
}

# stop strings: each server's greedy text cut just before the first
# occurrence of a 3-byte piece of its own middle, both APIs, streamed or not.
check_stop() {
	local who base text stop want got i
	printf '{"requests": [{"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 24, "temperature": 0},
	 {"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0}]}' >"$TMP/full.json"
	run_both "$TMP/full.json" full
	for who in ours llama; do
		for i in 0 1; do
			text=$(r "$TMP/full.$who" "$i" .text)
			[ "${#text}" -ge 12 ] || fail "$who: a greedy text of ${#text} bytes, too short to cut: '$text'"
			stop=${text:7:3}
			want=${text%%"$stop"*}
			jq -c --arg s "$stop" --argjson i "$i" '.requests[$i] | (., . + {stream: true}) | . + {stop: [$s]}' \
				"$TMP/full.json" | jq -s '{requests: .}' >"$TMP/stop.json"
			if [ $who = ours ]; then client "$TMP/stop.json" "$TMP/stop.out"; else
				CLIENT_KEEPALIVE=0 node "$NODE_DIR/client.js" "$LBASE" run "$TMP/stop.json" >"$TMP/stop.out" ||
					fail "stop against llama-server"
			fi
			for k in 0 1; do
				got=$(r "$TMP/stop.out" "$k" .text)
				[ "$got" = "$want" ] || fail "$who api $i stream $k: stop '$stop' gave '$got', want '$want'"
				assert_eq "$who api $i stream $k: finish_reason at '$stop'" stop "$(r "$TMP/stop.out" "$k" .finish_reason)"
			done
		done
	done
}

# Where generation ends, pushed there by logit_bias, both APIs: the
# template's end of turn and EOS end it, with no text; BOS does not (a GGUF
# vocabulary's requests end as llama.cpp's). Both servers must agree.
check_ends() {
	local api bias body a b end=$(($(jq -r '.tokens[0]' <(curl -s "$BASE/tokenize" -d '{"content":"<|im_end|>"}'))))
	[ "$end" -ge 32000 ] || fail "<|im_end|> is not one added token: $end"
	for api in chat/completions completions; do
		for bias in "$end" 2 1; do
			if [ $api = chat/completions ]; then body='{"messages":[{"role":"user","content":"Hi"}]'
			else body='{"prompt":"Hi"'; fi
			body="$body,\"max_tokens\":6,\"temperature\":0,\"logit_bias\":{\"$bias\":100}}"
			a=$(curl -s "$BASE/v1/$api" -d "$body" | jq -c '[.choices[0].message.content // .choices[0].text, .choices[0].finish_reason, .usage.completion_tokens]')
			b=$(curl -s "$LBASE/v1/$api" -d "$body" | jq -c '[.choices[0].message.content // .choices[0].text, .choices[0].finish_reason, .usage.completion_tokens]')
			[[ $a == '["",'* ]] || fail "$api, token $bias forced: no reply: $a"
			assert_eq "$api, token $bias forced: ours = llama-server's" "$b" "$a"
		done
	done
	assert_eq "chat at <|im_end|>: stopped at once, no text" '["","stop",1]' \
		"$(curl -s "$BASE/v1/chat/completions" -d "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":6,\"logit_bias\":{\"$end\":100}}" |
			jq -c '[.choices[0].message.content, .choices[0].finish_reason, .usage.completion_tokens]')"
}

# record -p on our engine while it serves a chat: a request like any other.
check_traced() {
	"$SPANTRACE" record -q -p "$EPID" --level coarse -o "$TMP/run.jsonl" 2>"$TMP/record.err" &
	local rec=$!
	wait_for grep -qs '"type":"session"' "$TMP/run.jsonl" || fail "record did not attach: $(cat "$TMP/record.err")"
	curl -s "$BASE/v1/chat/completions" -d '{"messages":[{"role":"system","content":"Be brief."},
		{"role":"user","content":"Hello there"}],"max_tokens":5,"temperature":0}' >"$TMP/traced.json"
	wait_for grep -qs '"type":"request"' "$TMP/run.jsonl" || fail "record wrote no request record: $(cat "$TMP/record.err")"
	kill -INT "$rec"
	wait "$rec" || fail "record exited $?: $(cat "$TMP/record.err")"
	assert_eq "traced chat: one request, its prompt and reply tokens, joined with its socket" \
		"$(jq -r '"\(.usage.prompt_tokens) \(.usage.completion_tokens) socket"' "$TMP/traced.json")" \
		"$(jq -r 'select(.type == "request") | "\(.prompt_tokens) \(.generated_tokens) \(.from)"' "$TMP/run.jsonl")"
}

for f in llama2 chatml llama3 mistral zephyr gemma phi3; do
	"$MKMODEL" "$TMP/$f.gguf" --shape stories15M --gguf q8_0 --vocab "$MODELS/tokenizer.bin" \
		--chat-template "$f" >"$TMP/mk.err" 2>&1 || fail "mkmodel --chat-template $f: $(cat "$TMP/mk.err")"
	start_llama "$TMP/$f.gguf"
	start_engine "$TMP/$f.gguf" -b cpu
	grep -q "chat template $f" "$TMP/engine.err" || fail "$f: the engine did not recognize the template"
	python3 "$ROOT/tests/helpers/chat_compare.py" "$BASE" "$LBASE" >"$TMP/cmp.$f" 2>&1 ||
		fail "$f: $(tail -n 4 "$TMP/cmp.$f")"
	ok "$f: $(tail -n 1 "$TMP/cmp.$f")"
	case $f in chatml | llama3) check_clients "$f" ;; esac
	[ $f = chatml ] && check_stop && check_ends
	[ $f = llama3 ] && check_traced
	stop_engine
	stop_llama
done
