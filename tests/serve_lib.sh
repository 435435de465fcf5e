# tests/serve_lib.sh - sourced by tests/t_serve_*.sh after lib.sh: starting
# `infer --http` on a free port and driving it with the real OpenAI client.
NODE_DIR=$ROOT/tests/node

# need_node: node and the npm openai client, which make deps installs: a failure when missing
need_node() {
	need_cmd node nodejs
	[ -d "$NODE_DIR/node_modules/openai" ] || fail "no npm openai package in tests/node: make deps installs it"
}

# start_engine ARGS...: infer ARGS --http 127.0.0.1:0; sets EPID, PORT, BASE.
start_engine() {
	: >"$TMP/engine.err"
	"$INFER" "$@" --http 127.0.0.1:0 2>"$TMP/engine.err" &
	EPID=$!
	wait_for grep -q "listening on" "$TMP/engine.err" || fail "engine did not start: $(cat "$TMP/engine.err")"
	PORT=$(sed -n 's/.*listening on http:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$TMP/engine.err")
	BASE=http://127.0.0.1:$PORT
	ok "engine $EPID on $BASE: $*"
}

# free_port: a free loopback TCP port
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# demo_gguf TYPE OUT: the demo model as a GGUF file of TYPE (mkmodel)
demo_gguf() {
	"$MKMODEL" "$2" --gguf "$1" --from "$DEMO_MODEL" --vocab "$DEMO_TOK" >"$TMP/mk.err" 2>&1 ||
		fail "mkmodel --gguf $1: $(cat "$TMP/mk.err")"
}

# llama_on FILE ARGS...: llama-server (make llama-server) on FILE with ARGS
# on a free loopback port, up; sets lpid, lport, LBASE.
llama_on() {
	local server file=$1
	shift
	server=$("$ROOT/tools/build_llama_server.sh" --check) || fail "no llama-server fixture (make llama-server)"
	lport=$(free_port)
	"$server" -m "$file" "$@" --host 127.0.0.1 --port "$lport" >"$TMP/llama.log" 2>&1 &
	lpid=$!
	LBASE=http://127.0.0.1:$lport
	WAIT_S=60 wait_for curl -sf -o /dev/null "$LBASE/health" ||
		fail "llama-server did not start: $(tail -n 3 "$TMP/llama.log")"
}

# start_llama_server: llama-server on the demo model as Q8_0 GGUF, 8
# slots, one thread.
start_llama_server() {
	demo_gguf q8_0 "$TMP/m.gguf"
	llama_on "$TMP/m.gguf" -c 2048 -np 8 -t 1
}

# stop_engine: SIGTERM, and it must exit 0.
stop_engine() {
	kill -TERM "$EPID"
	wait "$EPID"
	local rc=$?
	[ $rc = 0 ] || fail "engine exited $rc: $(tail -n 5 "$TMP/engine.err")"
}

# stream_spec N MAX_TOKENS STEP [STAGGER_MS]: a client.js spec of N concurrent
# streaming greedy requests "Once upon a time I", request I asking for
# MAX_TOKENS + STEP * I tokens, sent STAGGER_MS apart.
stream_spec() {
	local i
	printf '{"concurrent": true, "stagger_ms": %d, "requests": [' "${4:-0}"
	for i in $(seq 0 $(($1 - 1))); do
		[ "$i" -gt 0 ] && printf ','
		printf '{"prompt": "Once upon a time %d", "max_tokens": %d, "temperature": 0, "stream": true}' \
			"$i" $(($2 + $3 * i))
	done
	printf ']}\n'
}

# greedy_spec CONCURRENT TOKENS STEP EXTRA PROMPT...: a client.js spec of one
# greedy request per prompt (JSON: a string or a list of ids), request I
# asking for TOKENS + STEP * I tokens and streaming when I is odd; EXTRA is
# more JSON fields for each (', "f": v', or empty).
greedy_spec() {
	local conc=$1 tokens=$2 step=$3 extra=$4 i=0 sep=
	shift 4
	printf '{"concurrent": %s, "requests": [' "$conc"
	for p in "$@"; do
		printf '%s{"prompt": %s, "max_tokens": %d, "temperature": 0, "stream": %s%s}' \
			"$sep" "$p" $((tokens + step * i)) "$([ $((i % 2)) = 1 ] && echo true || echo false)" "$extra"
		sep=,
		i=$((i + 1))
	done
	printf ']}\n'
}

# client SPEC OUT: runs SPEC (see tests/node/client.js); one JSON line per request in OUT.
client() { node "$NODE_DIR/client.js" "$BASE" run "$1" >"$2" 2>"$TMP/client.err" || fail "client: $(cat "$TMP/client.err")"; }

# health FIELD: a field of GET /health
health() { curl -s "$BASE/health" | jq -r ".$1"; }
# wire_done URL JSON: a streamed response as curl reads it off the wire
# (the openai SDK's iterator ends alike on [DONE] and on the body's end):
# "DONES LAST_DATA_LINE EVENTS", e.g. "1 [DONE] 17" for a stream that ends right
wire_done() {
	curl -sN --max-time 60 -H 'Content-Type: application/json' -d "$2" "$1" |
		awk '/^data: / { n++; last = substr($0, 7); if (last == "[DONE]") d++ }
		     END { printf "%d %s %d\n", d, last, n }'
}
# stat JQ: a field of GET /stats
stat() { curl -s "$BASE/stats" | jq -r "$1"; }

# same_outputs A B: per request, text, ids, finish_reason and usage are equal
# (but for the prompt tokens the prefix cache gave, which depend on what ran before).
# Each file must hold results that finished with ids: two files of errors,
# or both empty, would agree.
same_outputs() {
	local a b f q='{index, text, token_ids, finish_reason, usage: (.usage | del(.prompt_tokens_details?))}'
	for f in "$1" "$2"; do
		jq -e -s 'length > 0 and all(.finish_reason != null and (.token_ids | type) == "array")
			and (map(.token_ids | length) | add) > 0' "$f" >/dev/null ||
			{ echo "$f: no results, or one that did not finish with ids: $(head -c 300 "$f")" >&2; return 1; }
	done
	a=$(jq -c "$q" "$1" | sort)
	b=$(jq -c "$q" "$2" | sort)
	[ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b") | head -n 10 >&2; return 1; }
}
# For wait_for (which repeats its arguments as given, so the query must run inside):
health_is() { [ "$(health "$1")" = "$2" ]; }
health_ge() { [ "$(health "$1")" -ge "$2" ]; }
health_le() { [ "$(health "$1")" -le "$2" ]; }
stat_is() { [ "$(stat "$1")" = "$2" ]; }
