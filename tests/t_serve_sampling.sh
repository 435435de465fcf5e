#!/usr/bin/env bash
# t_serve_sampling.sh - every sampling field the HTTP engine accepts acts as
# its definition says (issue 58, part 3), with llama-server as the witness:
#   - frequency_penalty, presence_penalty, repeat_penalty and repeat_last_n:
#     greedy ids from the same F32 GGUF file (llama-server with an F32 KV
#     cache, as ours) equal llama-server's for 40 tokens, each setting
#     changing them from the unpenalized ids; where the two part, it is at a
#     near-tie that llama-server's own logprobs show (under 0.01 apart) and
#     the check names it; the window holds the prompt's tokens, as
#     llama-server's does (a presence penalty on the prompt's ids);
#   - top_k 1 and min_p 1 at temperature 1.5 are greedy, whatever the seed,
#     while the seeds alone give other texts, each its own;
#   - max_tokens -1 and n_predict -1 run to the context, and a max_tokens
#     past the context stops there with finish_reason length, as
#     llama-server does; 0 and out-of-range values are a 400 naming the field.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_cmd jq jq
need_cmd curl curl
need_cmd python3 python3
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"
N=40

demo_gguf f32 "$TMP/m.gguf"
llama_on "$TMP/m.gguf" -c 512 -np 1 -t 1 -ctk f32 -ctv f32
start_engine "$TMP/m.gguf" -b cpu

ours() { # PROMPT_JSON EXTRA: our greedy ids
	curl -s "$BASE/v1/completions" -d "{\"prompt\":$1,\"max_tokens\":$N,\"temperature\":0$2}" |
		jq -c '.choices[0].token_ids'
}
theirs() { # PROMPT_JSON EXTRA: llama-server's greedy ids
	curl -s "$LBASE/completion" -d "{\"prompt\":$1,\"n_predict\":$N,\"temperature\":0,\"return_tokens\":true,\"cache_prompt\":false$2}" |
		jq -c '.tokens'
}
PROMPT=$(curl -s "$BASE/tokenize" -d '{"content":"Once upon a time","add_special":true}' | jq -c .tokens)
[ "$(jq length <<<"$PROMPT")" -ge 3 ] || fail "tokenize: $PROMPT"
plain=$(ours "$PROMPT" "")
assert_eq "unpenalized: ours = llama-server's" "$(theirs "$PROMPT" "")" "$plain"

# agree NAME PROMPT EXTRA: equal ids, or parted at a near-tie llama-server shows
agree() {
	local name=$1 a b at logp
	a=$(ours "$2" "$3")
	b=$(theirs "$2" "$3")
	[ "$(jq length <<<"$a")" = $N ] || fail "$name: ours gave $a"
	[ "$a" != "$plain" ] || fail "$name: the same ids as without it: it did nothing"
	[ "$a" = "$b" ] && { ok "$name: $N greedy ids = llama-server's, and not the unpenalized ones"; return; }
	at=$(jq -n --argjson a "$a" --argjson b "$b" 'first(range(0; $a | length) | select($a[.] != $b[.]))')
	logp=$(curl -s "$LBASE/completion" -d "{\"prompt\":$(jq -nc --argjson p "$2" --argjson a "$a" --argjson i "$at" '$p + $a[:$i]'),\"n_predict\":1,\"temperature\":0,\"n_probs\":40,\"cache_prompt\":false}" |
		jq -c --argjson a "$a" --argjson b "$b" --argjson i "$at" \
			'[.completion_probabilities[0].top_logprobs[] | select(.id == $a[$i] or .id == $b[$i]) | .logprob]')
	python3 -c 'import json,sys; v=json.loads(sys.argv[1]); sys.exit(not (len(v) == 2 and abs(v[0] - v[1]) < 0.01))' "$logp" ||
		fail "$name: parted at token $at, not at a near-tie (llama-server's logprobs $logp): ours $a, llama-server $b"
	ok "$name: ids = llama-server's up to token $at, where they part at a near-tie (llama-server's logprobs $logp)"
}
agree "frequency_penalty 1.5" "$PROMPT" ',"frequency_penalty":1.5'
agree "frequency_penalty -1" "$PROMPT" ',"frequency_penalty":-1'
agree "presence_penalty 1" "$PROMPT" ',"presence_penalty":1.0'
agree "repeat_penalty 1.3" "$PROMPT" ',"repeat_penalty":1.3'
agree "repeat_penalty 0.8" "$PROMPT" ',"repeat_penalty":0.8'
agree "all three over repeat_last_n 8" "$PROMPT" ',"repeat_penalty":1.2,"repeat_last_n":8,"frequency_penalty":0.5,"presence_penalty":0.3'
# the prompt is in the window: the unpenalized run's first ids as the prompt
echoed=$(jq -c --argjson g "$plain" '. + $g[:3]' <<<"$PROMPT")
agree "presence_penalty 2 on the prompt's own ids" "$echoed" ',"presence_penalty":2'
[ "$(ours "$PROMPT" ',"frequency_penalty":1.5,"repeat_last_n":0')" = "$plain" ] ||
	fail "repeat_last_n 0 did not turn the penalties off"
ok "repeat_last_n 0: no penalty, as llama.cpp"

# top_k 1 and min_p 1 leave one token: greedy, whatever the seed
for seed in 1 2 3; do
	for f in '"top_k":1' '"min_p":1'; do
		got=$(curl -s "$BASE/v1/completions" -d "{\"prompt\":$PROMPT,\"max_tokens\":$N,\"temperature\":1.5,\"seed\":$seed,$f}" |
			jq -c '.choices[0].token_ids')
		assert_eq "$f at temperature 1.5, seed $seed: greedy" "$plain" "$got"
	done
	free=$(curl -s "$BASE/v1/completions" -d "{\"prompt\":$PROMPT,\"max_tokens\":$N,\"temperature\":1.5,\"seed\":$seed}" |
		jq -c '.choices[0].token_ids')
	[ "$free" != "$plain" ] || fail "seed $seed at temperature 1.5 without top_k gave the greedy ids: the check above proves nothing"
	echo "$free" >>"$TMP/frees"
done
assert_eq "seeds 1, 2 and 3 draw three different replies (2 and 3 were once one)" 3 "$(sort -u "$TMP/frees" | wc -l)"
ok "without top_k or min_p, the same seeds give other ids"

# the context, as the engine's /stats gives it
ctx=$(curl -s "$BASE/stats" | jq -r .model.seq_len)
assert_pos "the model's context" "$ctx"
nopr=$(jq length <<<"$PROMPT")
nobos='"logit_bias":{"1":-100,"2":-100}'  # BOS and EOS would end a story early
for f in '"max_tokens":-1' '"n_predict":-1' '"max_tokens":100000'; do
	curl -s "$BASE/v1/completions" -d "{\"prompt\":$PROMPT,\"temperature\":0,$nobos,$f}" >"$TMP/ctx.json"
	assert_eq "$f: completion tokens = the context left, finish_reason length" \
		"$((ctx - nopr)) length" "$(jq -r '"\(.usage.completion_tokens) \(.choices[0].finish_reason)"' "$TMP/ctx.json")"
done
bad() { # NAME BODY: a 400 naming the field
	local code
	code=$(curl -s -o "$TMP/body" -w '%{http_code}' "$BASE/v1/completions" -d "$2")
	assert_eq "$1: status" 400 "$code"
	grep -q "'${1%% *}'" "$TMP/body" || fail "$1: the error does not name it: $(cat "$TMP/body")"
}
bad "max_tokens 0" '{"prompt":"x","max_tokens":0}'
bad "max_tokens -2" '{"prompt":"x","max_tokens":-2}'
bad "n_predict 0" '{"prompt":"x","n_predict":0}'
bad "frequency_penalty 3" '{"prompt":"x","frequency_penalty":3}'
bad "presence_penalty a string" '{"prompt":"x","presence_penalty":"high"}'
bad "repeat_penalty 0" '{"prompt":"x","repeat_penalty":0}'
bad "repeat_last_n -2" '{"prompt":"x","repeat_last_n":-2}'
bad "top_k -1" '{"prompt":"x","top_k":-1}'
bad "min_p 2" '{"prompt":"x","min_p":2}'
ok "out-of-range sampling fields: 400s that name them"
kill "$lpid"
wait "$lpid" 2>/dev/null
stop_engine
