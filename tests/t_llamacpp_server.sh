#!/usr/bin/env bash
# t_llamacpp_server.sh - llama-server's requests seen from outside (issue 24).
# llama-server (built from the source node-llama-cpp ships: make llama-server)
# serves the stories15M shape as GGUF with 8 slots; `record -p` attaches to
# it while the official OpenAI client runs 8 concurrent streaming requests.
# Each request the tracer reconstructs from llama_decode's batches equals
# the server's own `timings` (prompt_n, predicted_n), its /metrics counters
# moved by the tracer's totals, and its TTFT is never above the client's; the
# socket's TTFT (record -p times a listening server's sockets) lies closer.
source "$(dirname "$0")/lib.sh"
need_bpf
for c in jq:jq curl:curl python3:python3 node:nodejs; do need_cmd "${c%%:*}" "${c#*:}"; done
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
[ -d "$ROOT/tests/node/node_modules/openai" ] || fail "no openai client (make deps)"
SERVER=$("$ROOT/tools/build_llama_server.sh" --check) || fail "no llama-server fixture (make llama-server)"
"$MKMODEL" "$TMP/d15.gguf" --gguf f32 --from "$DEMO_MODEL" --vocab "$DEMO_TOK" >"$TMP/mk.err" 2>&1 ||
	fail "mkmodel: $(cat "$TMP/mk.err")"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# One compute thread: the client and the tracer share the 2 vCPUs with it.
"$SERVER" -m "$TMP/d15.gguf" -c 2048 -np 8 -t 1 --metrics --host 127.0.0.1 --port "$port" \
	>"$TMP/server.log" 2>&1 &
SPID=$!
trap 'kill $SPID 2>/dev/null; rm -rf "$TMP"' EXIT
up() { curl -sf "http://127.0.0.1:$port/health" >/dev/null; }
wait_for up || fail "llama-server did not come up: $(tail -n 5 "$TMP/server.log")"
ok "llama-server $SERVER (pid $SPID) on port $port"
counter() { curl -sf "http://127.0.0.1:$port/metrics" | awk -v n="llamacpp:$1" '$1==n{print $2}'; }

# 8 prompts of different lengths and max_tokens 24..31, so that each
# request's figures tell it apart.
python3 - >"$TMP/spec.json" <<'EOF'
import json
words = ["Once upon a time", "The little dog", "A girl named Lily", "In the big forest",
         "Tom and his friend", "The sun was shining", "One day, a bird", "There was a cat"]
reqs = [{"prompt": w + " and" + " then" * (3 * i), "max_tokens": 24 + i, "temperature": 0, "stream": True}
        for i, w in enumerate(words)]
print(json.dumps({"concurrent": True, "requests": reqs}))
EOF
before_p=$(counter prompt_tokens_total) before_g=$(counter tokens_predicted_total) before_d=$(counter n_decode_total)
need_num "llama-server's /metrics counters before" "$before_p" "$before_g" "$before_d"

"$SPANTRACE" record --capture-tokens -p $SPID -o "$TMP/r.jsonl" 2>"$TMP/rec.err" &
RPID=$!
wait_for grep -qs '"type":"session"' "$TMP/r.jsonl" || fail "record -p: $(cat "$TMP/rec.err")"
assert_eq "session: engine" llamacpp "$(jq -r 'select(.type=="session") | .engine' "$TMP/r.jsonl")"
timeout 120 node "$ROOT/tests/node/client.js" "http://127.0.0.1:$port" run "$TMP/spec.json" >"$TMP/client.out" ||
	fail "client: $(tail -n 3 "$TMP/client.out")"
kill -INT $RPID
wait $RPID || fail "record: $(tail -n 3 "$TMP/rec.err")"
[ "$(jq -s 'map(select(.timings and .finish_reason == "length")) | length' "$TMP/client.out")" = 8 ] ||
	fail "the client's results: $(head -c 600 "$TMP/client.out")"

# Each request: [prompt_n, predicted_n] of the server's timings = [prompt, generated] of the tracer's.
want=$(jq -sc 'map([.timings.prompt_n, .timings.predicted_n]) | sort' "$TMP/client.out")
got=$(jq -sc 'map(select(.type=="request") | [.prompt_tokens, .generated_tokens]) | sort' "$TMP/r.jsonl")
assert_eq "per request [prompt, generated] = the server's timings" "$want" "$got"
assert_eq "llamacpp:prompt_tokens_total moved by" "$(jq -s 'map(select(.type=="request") | .prompt_tokens) | add' "$TMP/r.jsonl")" \
	"$(($(counter prompt_tokens_total) - before_p))"
assert_eq "llamacpp:tokens_predicted_total moved by" "$(jq -s 'map(select(.type=="emit")) | length' "$TMP/r.jsonl")" \
	"$(($(counter tokens_predicted_total) - before_g))"
assert_eq "llamacpp:n_decode_total moved by (forward spans)" \
	"$(jq -s 'map(select(.type=="span" and .name=="forward")) | length' "$TMP/r.jsonl")" \
	"$(($(counter n_decode_total) - before_d))"
assert_pos "emit records" "$(jq -s 'map(select(.type=="emit")) | length' "$TMP/r.jsonl")"
# The token each request's first emit names is the text the client got first
# (the server's /detokenize reads the id back).
jq -sr '(map(select(.type=="request")) | map({key: (.req | tostring), value: .generated_tokens}) | from_entries) as $n
	| .[] | select(.type=="emit" and .first) | "\($n[.req | tostring]) \(.token_id)"' "$TMP/r.jsonl" >"$TMP/first.txt"
# (no first emits, or a /detokenize that fails and reads as "", would pass)
assert_eq "first emits, one per request" 8 "$(wc -l <"$TMP/first.txt")"
while read -r n id; do
	need_num "first emit's [generated tokens, token id]" "$n" "$id"
	text=$(run_ok "/detokenize of $id" curl -sf "http://127.0.0.1:$port/detokenize" -d "{\"tokens\":[$id]}" | jq -r .content)
	want=$(jq -r --argjson n "$n" 'select(.timings.predicted_n == $n) | .text' "$TMP/client.out")
	[ -n "$text" ] && [ "$text" != null ] || fail "request of $n tokens: /detokenize of $id gave no text"
	[ -n "$want" ] || fail "no client result of $n tokens"
	[[ $want == "$text"* ]] || fail "request of $n tokens: first token $id is '$text', the client's text starts '${want:0:20}'"
done <"$TMP/first.txt"
ok "first token of each request: its id reads back as the client's first text ($(wc -l <"$TMP/first.txt") requests)"

# TTFT, matched by the request's length (max_tokens 24..31: each its own).
# The engine's own TTFT: each request is joined with its HTTP request
# (from "socket", its prompt tokenized on the thread that read it), whose
# times it then carries; the engine's are kept as engine_ttft_ns.
assert_eq "requests joined with their socket's" 8 \
	"$(jq -s 'map(select(.type=="request" and .from=="socket" and .engine_ttft_ns > 0)) | length' "$TMP/r.jsonl")"
jq -s '[.[] | select(.type=="request") | {key: (.generated_tokens | tostring), value: (.engine_ttft_ns / 1e6)}] | from_entries' \
	"$TMP/r.jsonl" >"$TMP/tracer_ttft.json"
jq -sr --slurpfile t "$TMP/tracer_ttft.json" \
	'.[] | "\(.timings.predicted_n) \(.ttft_ms) \($t[0][.timings.predicted_n | tostring])"' "$TMP/client.out" \
	>"$TMP/ttft.txt"
assert_eq "TTFT pairs (the median below reads lines 4 and 5)" 8 "$(wc -l <"$TMP/ttft.txt")"
while read -r n client tracer; do
	assert_le "request of $n tokens: tracer's TTFT (ms) <= the client's" "$tracer" "$client"
done <"$TMP/ttft.txt"
median=$(awk '{print $2 - $3}' "$TMP/ttft.txt" | sort -g | awk '{v[NR]=$1} END{print (v[4] + v[5]) / 2}')
# The engine's TTFT starts at the server's first llama.cpp call for the
# request (its prompt's tokenization), which a loaded server makes late:
# 4-22 ms after the client's send on a quiet run, 37 ms once under the
# suite (issue 47). The socket's view, on by default for -p of a listening
# server, starts when the request reached the socket: its gap holds only
# the openai client's own work (12-15 ms here, quiet; t_req_socket holds a
# lean client to 2 ms) and must be the smaller one. Each http
# record pairs with the client's result of the same length (max_tokens
# 24..31: a stream's events are its tokens plus a constant).
jq -s '[.[] | select(.type == "http" and .stream)] | sort_by(.events) | .[].ttft_ns / 1e6' "$TMP/r.jsonl" >"$TMP/sock.txt"
jq -s 'sort_by(.timings.predicted_n) | .[].ttft_ms' "$TMP/client.out" >"$TMP/cl.txt"
assert_eq "socket records of streamed requests" 8 "$(wc -l <"$TMP/sock.txt")"
smedian=$(paste "$TMP/cl.txt" "$TMP/sock.txt" | awk '{print $1 - $2}' | sort -g | awk '{v[NR]=$1} END{print (v[4] + v[5]) / 2}')
need_num "median client - socket TTFT (ms)" "$smedian"
assert_le "median client - socket TTFT (ms)" "$smedian" 40
assert_le "the socket's gap is the smaller: socket's median vs the engine's (ms)" "$smedian" "$median"
assert_le "median client - engine TTFT (ms)" "$median" 100
