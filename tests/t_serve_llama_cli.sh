#!/usr/bin/env bash
# t_serve_llama_cli.sh - llama-server's command line starts `infer` too
# (issue 58, part 7), llama-server as the witness: the same argument vector
# (-m, --host, --port, -c, -np, -t, -a, --jinja, -ngl 0) given to both, each
# listens where it was told, names the model by its alias, and answers
# max_tokens -1 with the same usage and finish_reason (the context filled);
# -t is threads there, not a temperature; -ngl 0 is the CPU backend and
# -ngl 99 the one infer picks without -b (auto); -c below the model's
# context is each request's context and the pool's size; an option neither knows, or one missing its value, is
# refused by name with exit status 2.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_cmd curl curl
need_cmd jq jq
need_cmd python3 python3
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"
SERVER=$("$ROOT/tools/build_llama_server.sh" --check) || fail "no llama-server fixture (make llama-server)"
demo_gguf q8_0 "$TMP/m.gguf"
ctx=256  # the demo model's context (stories15M's shape), checked below

# serve WHO PORT EXTRA...: WHO (ours or llama) started with llama-server's words
serve() {
	local who=$1 port=$2 bin=$INFER
	shift 2
	[ "$who" = llama ] && bin=$SERVER
	"$bin" -m "$TMP/m.gguf" --host 127.0.0.1 --port "$port" -c "$ctx" -np 1 -t 1 -a storyteller --jinja "$@" \
		>"$TMP/$who.out" 2>"$TMP/$who.err" &
	eval "${who}_pid=$!"
	WAIT_S=60 wait_for curl -sf -o /dev/null "http://127.0.0.1:$port/health" ||
		fail "$who did not start with llama-server's command line: $(tail -n 3 "$TMP/$who.err")"
}
oport=$(free_port)
serve ours "$oport" -ngl 0
lport=$(free_port)
serve llama "$lport" -ngl 0
assert_eq "the model's context" $ctx "$(curl -s "http://127.0.0.1:$oport/stats" | jq -r .model.seq_len)"
grep -q 'cpu backend' "$TMP/ours.err" || fail "-ngl 0 did not give the cpu backend: $(cat "$TMP/ours.err")"
grep -q -- '--jinja: accepted' "$TMP/ours.err" || fail "--jinja was taken without its note"
for who in ours llama; do
	port=$oport
	[ $who = llama ] && port=$lport
	assert_eq "$who: /v1/models names the alias" storyteller "$(curl -s "http://127.0.0.1:$port/v1/models" | jq -r '.data[0].id')"
	curl -s "http://127.0.0.1:$port/v1/completions" \
		-d '{"prompt":"Once upon a time","max_tokens":-1,"temperature":0,"logit_bias":{"1":-100,"2":-100}}' |
		jq -c '[.usage.prompt_tokens, .usage.completion_tokens, .choices[0].finish_reason]' >"$TMP/$who.ctx"
done
assert_eq "max_tokens -1 with -c $ctx: ours = llama-server's [prompt, completion, finish]" \
	"$(cat "$TMP/llama.ctx")" "$(cat "$TMP/ours.ctx")"
kill "$ours_pid" "$llama_pid"
wait "$ours_pid" "$llama_pid" 2>/dev/null

# -ngl 99: the default backend (auto: OpenCL on a GPU, else the CPU), the one
# infer picks without -b
serve ours "$(free_port)" -ngl 99
grep -q -- '-ngl 99: the whole model runs on one backend' "$TMP/ours.err" || fail "-ngl 99 without its note"
want=$("$INFER" "$TMP/m.gguf" -n 1 --ids --stats "$TMP/auto.json" 2>/dev/null >/dev/null && jq -r .backend "$TMP/auto.json")
got=$(sed -n 's/.*listening on [^ ]* (\([a-z]*\) backend.*/\1/p' "$TMP/ours.err")
assert_eq "-ngl 99: the backend infer picks without -b" "$want" "$got"
kill "$ours_pid"
wait "$ours_pid" 2>/dev/null
# -c below the model's context: requests get that many positions (llama-server
# rounds a context up to 256, so this one is ours alone)
p=$(free_port)
"$INFER" -m "$TMP/m.gguf" --port "$p" -c 64 -np 2 >/dev/null 2>"$TMP/small.err" &
small=$!
wait_for curl -sf -o /dev/null "http://127.0.0.1:$p/health" || fail "-c 64: $(cat "$TMP/small.err")"
assert_eq "-c 64: max_tokens -1 fills 64 positions [prompt, completion, finish]" '[5,59,"length"]' \
	"$(curl -s "http://127.0.0.1:$p/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":-1,"temperature":0,"logit_bias":{"1":-100,"2":-100}}' |
		jq -c '[.usage.prompt_tokens, .usage.completion_tokens, .choices[0].finish_reason]')"
grep -q '4 KV blocks of 16' "$TMP/small.err" || fail "-c 64: the pool is not 64 positions: $(cat "$TMP/small.err")"
kill "$small"
wait "$small" 2>/dev/null
for bad in "--api-key k" "--temp 0.5" "-c" "--port"; do
	# shellcheck disable=SC2086
	"$INFER" -m "$TMP/m.gguf" $bad >/dev/null 2>"$TMP/bad.err"
	rc=$?
	assert_eq "'$bad': exit status" 2 "$rc"
	grep -q -- "'${bad%% *}'" "$TMP/bad.err" || fail "'$bad': the error does not name it: $(cat "$TMP/bad.err")"
done
ok "options that are not served, or lack a value: refused by name"
