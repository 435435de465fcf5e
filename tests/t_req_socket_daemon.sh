#!/usr/bin/env bash
# t_req_socket_daemon.sh - the daemon's socket-level requests (issue 47):
# spantrace_http_* from each traced server's sockets, counted when the
# response ends, not when a later event comes, on a server left idle.
# - `infer --http` under `daemon --all-engines` (engine="infer");
# - llama-server under `daemon --all-engines` (engine="llamacpp") and, at
#   the same time, `daemon --engine none -p PID` (engine="http": its sockets
#   only, no engine series);
# each served 8 concurrent streams x 2 rounds by a lean client
# (tests/node/sse_client.js). Within 1 s of the client's last response, with
# the daemons' interval at 5 s, /metrics says: requests = the client's, by
# status 200; TTFT observations = requests; SSE events = the client's
# "data:" lines; inter-event gaps = events - requests. The engines' own
# series count all 16 at the next tick, llama.cpp's too (its requests end
# with their HTTP responses, not at their slot's next event).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_node
need_daemon_build
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"

# daemon_on NAME ARGS...: a daemon whose log is $TMP/NAME.log; sets its
# port in the variable NAME_port and its pid in NAME_pid.
daemon_on() {
	local name=$1; shift
	"$SPANTRACE" daemon --listen 127.0.0.1:0 --interval 5 "$@" >"$TMP/$name.log" 2>&1 &
	printf -v "${name}_pid" %s $!
	WAIT_S=30 wait_for grep -q 'metrics at http' "$TMP/$name.log" || fail "daemon $name did not start: $(cat "$TMP/$name.log")"
	printf -v "${name}_port" %s "$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/$name.log")"
}

metrics_of() { curl -sf "http://127.0.0.1:$1/metrics"; }

# counts_match PORT FILE N EVENTS ENGINE: the daemon's socket counts for
# ENGINE's series equal N requests and EVENTS events (the scrape in FILE).
counts_match() {
	metrics_of "$1" >"$2" || return 1
	local sel="engine=\"$5\""
	[ "$(msum "$2" spantrace_http_requests_total "status=\"200\"" "$sel")" = "$3" ] &&
		[ "$(msum "$2" spantrace_http_time_to_first_token_seconds_count "$sel")" = "$3" ] &&
		[ "$(msum "$2" spantrace_http_response_events_sum "$sel")" = "$4" ] &&
		[ "$(msum "$2" spantrace_http_inter_token_latency_seconds_count "$sel")" = "$(($4 - $3))" ]
}

# serve_and_check PORT BASE ENGINE [PORT2 ENGINE2]: 8 x 2 streams from the
# client, then each daemon's counts must match within 1 s.
serve_and_check() {
	local port=$1 base=$2 engine=$3 port2=${4:-} engine2=${5:-} n events t0 dt
	node "$ROOT/tests/node/sse_client.js" "$base" 8 2 16 >"$TMP/client.jsonl" 2>"$TMP/client.err" ||
		fail "sse_client: $(cat "$TMP/client.err")"
	t0=$(date +%s%N)
	n=$(wc -l <"$TMP/client.jsonl")
	events=$(jq -s 'map(.events) | add' "$TMP/client.jsonl")
	assert_eq "the client's requests" 16 "$n"
	WAIT_S=1 wait_for counts_match "$port" "$TMP/m.txt" "$n" "$events" "$engine" ||
		fail "$engine: 1 s after the last response the daemon says $(grep -E '^spantrace_http_(requests_total|time_to_first_token_seconds_count|response_events_sum)' "$TMP/m.txt"), want $n requests and $events events"
	dt=$((($(date +%s%N) - t0) / 1000000))
	ok "$engine: $n requests, $n TTFT observations and $events events on /metrics ${dt} ms after the last response"
	assert_eq "$engine: the socket's requests in flight once all were answered" 0 \
		"$(awk '$1 == "spantrace_http_requests_in_flight" { print $2 }' "$TMP/m.txt")"
	if [ -n "$port2" ]; then
		counts_match "$port2" "$TMP/m2.txt" "$n" "$events" "$engine2" ||
			fail "$engine2: the daemon says $(grep -E '^spantrace_http_(requests_total|response_events_sum)' "$TMP/m2.txt"), want $n requests and $events events"
		ok "$engine2: the same counts from the sockets alone"
	fi
}

# ---- our engine ----
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --threads 1 --max-seqs 8
daemon_on a --all-engines
serve_and_check "$a_port" "$BASE" infer
# the engine's own count comes with the next tick (5 s)
engine_done() { metrics_of "$a_port" >"$TMP/m.txt" && [ "$(msum "$TMP/m.txt" spantrace_requests_total 'engine="infer"')" = 16 ]; }
WAIT_S=8 wait_for engine_done || fail "the engine's requests_total: $(grep '^spantrace_requests_total' "$TMP/m.txt")"
ok "the engine's own requests_total, at the next tick: 16"
stop_engine
kill -TERM "$a_pid"
wait "$a_pid" || fail "daemon a exited $?: $(tail -n 3 "$TMP/a.log")"

# ---- llama-server: its profile, and its sockets alone ----
start_llama_server
daemon_on b --all-engines
daemon_on c --engine none -p "$lpid"
CLIENT_KEEPALIVE=0 serve_and_check "$b_port" "http://127.0.0.1:$lport" llamacpp "$c_port" http
grep -q '^spantrace_requests_total{' "$TMP/m2.txt" && fail "--engine none: engine request series on /metrics"
ok "--engine none: no engine series, only the sockets'"
# what is not a request is counted by kind on /metrics: two connections
# that open with garbage and with a TLS handshake
python3 - "$lport" <<'PY' || fail "the not-HTTP connections"
import socket, sys
for payload in (b"\x00\x01garbage\r\n\r\n", bytes.fromhex("16030100a5010000a10303") + b"\x00" * 32):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    s.sendall(payload)
    s.settimeout(2)
    try:
        s.recv(4096)
    except OSError:
        pass
    s.close()
PY
losses_seen() {
	metrics_of "$c_port" >"$TMP/m3.txt" &&
		[ "$(msum "$TMP/m3.txt" spantrace_http_losses_total 'kind="unparsed"')" = 1 ] &&
		[ "$(msum "$TMP/m3.txt" spantrace_http_losses_total 'kind="tls"')" = 1 ]
}
WAIT_S=3 wait_for losses_seen || fail "losses on /metrics: $(grep '^spantrace_http_losses_total' "$TMP/m3.txt")"
assert_eq "requests lost, on /metrics" 0 "$(grep '^spantrace_http_losses_total{kind="lost_' "$TMP/m3.txt" | awk '{ s += $NF } END { print s + 0 }')"
ok "losses on /metrics by kind: unparsed 1, tls 1"
# llama.cpp's own requests (sequences, which end at a later event on their
# slot) end with their linked HTTP response: all 16 counted at the next
# tick, with TTFT observations, on a server that stays idle
llama_done() {
	metrics_of "$b_port" >"$TMP/m.txt" &&
		[ "$(msum "$TMP/m.txt" spantrace_requests_total 'engine="llamacpp"')" = 16 ] &&
		[ "$(msum "$TMP/m.txt" spantrace_time_to_first_token_seconds_count 'engine="llamacpp"')" = 16 ]
}
WAIT_S=8 wait_for llama_done ||
	fail "llama.cpp's requests_total on an idle server: $(grep -E '^spantrace_(requests_total|time_to_first_token_seconds_count)' "$TMP/m.txt")"
ok "llama.cpp's own requests_total and TTFT observations, idle, at the next tick: 16"
# their headline TTFT and e2e are the socket's (each ended by its response):
# the engine series' sums equal the same daemon's socket series' sums
for f in time_to_first_token_seconds_sum:http_time_to_first_token_seconds_sum \
	e2e_request_latency_seconds_sum:http_request_duration_seconds_sum; do
	eng=$(msumf "$TMP/m.txt" "spantrace_${f%%:*}" 'engine="llamacpp"')
	sock=$(msumf "$TMP/m.txt" "spantrace_${f#*:}" 'engine="llamacpp"')
	need_num "$f" "$eng" "$sock"
	assert_pos "llama.cpp's ${f%%:*}" "$eng"
	awk -v a="$eng" -v b="$sock" 'BEGIN { d = a - b; exit !(d < 1e-6 && d > -1e-6) }' ||
		fail "llama.cpp's ${f%%:*} $eng s is not the socket's ${f#*:} $sock s"
	ok "llama.cpp's ${f%%:*} $eng s = the socket's ${f#*:} $sock s"
done
assert_eq "llama.cpp's requests no HTTP request was proved to be (all 16 linked)" 0 \
	"$(msum "$TMP/m.txt" spantrace_request_unlinked_total 'engine="llamacpp"')"
# a prompt of token ids (llama-server never tokenizes it: nothing links it),
# then one of text, whose steps end it: counted as unlinked, the text one not
for p in '[1,2,3,4]' '"Once upon"'; do
	curl -sf "http://127.0.0.1:$lport/v1/completions" -H 'Content-Type: application/json' \
		-d "{\"prompt\":$p,\"max_tokens\":4,\"temperature\":0}" >/dev/null || fail "completion of $p failed"
done
unlinked_one() {
	metrics_of "$b_port" >"$TMP/m.txt" &&
		[ "$(msum "$TMP/m.txt" spantrace_requests_total 'engine="llamacpp"')" = 18 ]
}
WAIT_S=5 wait_for unlinked_one ||
	fail "llama.cpp's requests after a token-id prompt: $(grep -E '^spantrace_request(s|_unlinked)_total' "$TMP/m.txt")"
assert_eq "llama.cpp's unlinked requests: the token-id prompt" 1 \
	"$(msum "$TMP/m.txt" spantrace_request_unlinked_total 'engine="llamacpp"')"

# record --engine none: the sockets only
"$SPANTRACE" record -q --engine none -p "$lpid" -o "$TMP/none.jsonl" --chrome "$TMP/none.chrome.json" \
	2>"$TMP/none.err" &
nrec=$!
wait_for grep -qs '"type":"session"' "$TMP/none.jsonl" || fail "record --engine none did not attach: $(cat "$TMP/none.err")"
curl -sf "http://127.0.0.1:$lport/v1/completions" -H 'Content-Type: application/json' \
	-d '{"prompt":"Once upon","max_tokens":4,"temperature":0}' >/dev/null || fail "completion failed"
CLIENT_KEEPALIVE=0 node "$ROOT/tests/node/sse_client.js" "http://127.0.0.1:$lport" 2 1 8 >/dev/null 2>"$TMP/client.err" ||
	fail "sse_client: $(cat "$TMP/client.err")"
wait_for grep -qs '"type":"http"' "$TMP/none.jsonl" || fail "record --engine none wrote no http record"
kill -INT "$nrec"
wait "$nrec" || fail "record --engine none exited $?: $(cat "$TMP/none.err")"
assert_eq "record --engine none: the session's engine" none "$(jq -r 'select(.type == "session") | .engine' "$TMP/none.jsonl")"
assert_eq "record --engine none: engine records (all but session, http, drops, summary)" 0 \
	"$(jq -r 'select(.type | IN("session", "http", "drops", "summary") | not) | .type' "$TMP/none.jsonl" | wc -l)"
assert_eq "record --engine none: the requests" "POST /v1/completions 200 3" \
	"$(jq -rs 'map(select(.type == "http")) | "\(.[0].method) \(.[0].path) \(.[0].status) \(length)"' "$TMP/none.jsonl")"
# Chrome: each http record is a slice on its connection's track, from its
# arrival to its end, with its status and events
python3 - "$TMP/none.jsonl" "$TMP/none.chrome.json" <<'PY' || fail "the Chrome trace's http slices do not match the JSONL"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"http"' in l]
tr = json.load(open(sys.argv[2]))["traceEvents"]
sl = [e for e in tr if e.get("cat") == "http" and e.get("ph") == "X" and "status" in e.get("args", {})]
assert len(sl) == len(recs), f"{len(sl)} http slices, {len(recs)} http records"
names = {e["tid"]: e["args"]["name"] for e in tr if e.get("ph") == "M" and e.get("name") == "thread_name"}
left = sorted(sl, key=lambda e: e["ts"])
for r in sorted(recs, key=lambda r: r["start_ns"]):
    e = min(left, key=lambda e: abs(e["ts"] - r["start_ns"] / 1e3))
    left.remove(e)
    assert abs(e["ts"] - r["start_ns"] / 1e3) < 1 and abs(e["dur"] - r["dur_ns"] / 1e3) < 1, (e, r)
    assert e["name"] == f'{r["method"]} {r["path"]}' and e["args"]["status"] == r["status"], (e, r)
    assert e["args"]["events"] == r["events"] and names.get(e["tid"]) == f'http conn {r["conn"]}', (e, r)
print(f"ok: {len(recs)} http slices in the Chrome trace, as the JSONL has them")
PY

kill "$lpid"
wait "$lpid" 2>/dev/null
for d in b c; do
	p=${d}_pid
	kill -TERM "${!p}"
	wait "${!p}" || fail "daemon $d exited $?: $(tail -n 3 "$TMP/$d.log")"
done
echo PASS
