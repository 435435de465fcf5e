#!/usr/bin/env bash
# t_req_socket_servers.sh - streaming servers nobody here wrote, each driven
# by the official openai client with its default keep-alive agent, each
# traced by the pid it was started as: Node's http (its res.end writes the
# last event, [DONE] and the chunk terminator in one writev of 9 iovecs),
# Go's net/http, and uvicorn (FastAPI) with 2 workers, by the master's pid.
# One record per request, ending at its response, with every event: the
# client's chunks plus its [DONE].
source "$(dirname "$0")/lib.sh"
need_bpf
need_cmd jq jq
need_cmd node nodejs
need_cmd go golang-go
[ -d "$ROOT/tests/node/node_modules/openai" ] || fail "no npm openai in tests/node (make deps)"
/usr/bin/python3 -c 'import fastapi, uvicorn' 2>/dev/null || fail "no FastAPI or uvicorn (make deps: python3-fastapi python3-uvicorn)"
S=$ROOT/tests/servers
N=6
srv=
at_exit '[ -n "${rec:-}" ] && kill "$rec" 2>/dev/null; [ -n "$srv" ] && kill "$srv" 2>/dev/null; wait 2>/dev/null'
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# check NAME: record the server $srv on $port through N client requests
check() {
	local name=$1 out want
	listening() { curl -s -o /dev/null "http://127.0.0.1:$port/"; [ $? != 7 ]; }
	WAIT_S=30 wait_for listening || fail "$name does not listen on $port: $(cat "$TMP/srv.log")"
	rm -f "$TMP/run.jsonl"
	"$SPANTRACE" record -q --engine none -p "$srv" -o "$TMP/run.jsonl" --summary "$TMP/s.json" 2>"$TMP/record.err" &
	rec=$!
	wait_for grep -qs '"type":"session"' "$TMP/run.jsonl" || fail "record did not attach: $(cat "$TMP/record.err")"
	out=$(node "$ROOT/tests/node/openai_seq.js" "http://127.0.0.1:$port" "$N") || fail "$name: the client failed"
	want=$(($(jq .chunks <<<"$out") + N))
	seen() { [ "$(jq -s 'map(select(.type == "http")) | length' "$TMP/run.jsonl")" -ge "$N" ]; }
	wait_for seen
	kill -INT "$rec"; wait "$rec" || fail "record exited $?: $(cat "$TMP/record.err")"; rec=
	local r
	r=$(jq -s 'map(select(.type == "http"))' "$TMP/run.jsonl")
	assert_eq "$name: records" "$N" "$(jq length <<<"$r")"
	assert_eq "$name: records not ended at their response" 0 "$(jq 'map(select(.end != "response")) | length' <<<"$r")"
	assert_eq "$name: event streams" "$N" "$(jq 'map(select(.stream and .status == 200)) | length' <<<"$r")"
	assert_eq "$name: events (the client's chunks + [DONE]s)" "$want" "$(jq 'map(.events) | add' <<<"$r")"
	kill "$srv"; wait "$srv" 2>/dev/null; srv=
}

port=$(free_port)
node "$S/sse_node.js" "$port" >"$TMP/srv.log" 2>&1 &
srv=$!
check node

go build -o "$TMP/sse_go" "$S/sse_go.go" || fail "go build failed"
port=$(free_port)
"$TMP/sse_go" "$port" >"$TMP/srv.log" 2>&1 &
srv=$!
check go

port=$(free_port)
/usr/bin/python3 -m uvicorn --app-dir "$S" sse_fastapi:app --port "$port" --workers 2 --log-level warning \
	>"$TMP/srv.log" 2>&1 &
srv=$!
workers() { [ "$(pgrep -c -P "$srv")" -ge 2 ]; }
WAIT_S=30 wait_for workers || fail "uvicorn's workers did not start: $(cat "$TMP/srv.log")"
check "uvicorn --workers 2 (master's pid)"
