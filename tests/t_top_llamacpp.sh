#!/usr/bin/env bash
# t_top_llamacpp.sh - `spantrace top -b -p` of a running llama-server,
# under 8 concurrent streams: llama.cpp tells no queue, so running and
# waiting read as unknown, with the reason (never a false 0), and the
# requests in flight come from the socket (some frame above 0, none above
# the 8 sent, 0 once drained); the request's one TTFT is
# the socket's, first, with the engine's part ("engine ttft") under it; the
# socket's ttft and e2e rows count the client's requests exactly; KV not
# told since the attach reads as unknown, with the reason, not "-".
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_bpf
need_node
need_cmd jq jq
need_cmd curl curl
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
N=8

start_llama_server
at_exit 'kill $lpid 2>/dev/null'
BASE="http://127.0.0.1:$lport"
"$SPANTRACE" top -b -d 0.1 -w 140 -p "$lpid" >"$TMP/frames" 2>"$TMP/top.err" &
top=$!
at_exit 'kill $top 2>/dev/null'
wait_long grep -q "^in flight" "$TMP/frames" || fail "no frame with the requests pane: $(cat "$TMP/top.err")"

stream_spec $N 120 10 >"$TMP/spec.json"
client "$TMP/spec.json" "$TMP/client.jsonl"
assert_eq "client results with usage" $N "$(jq -s 'map(select(.usage)) | length' "$TMP/client.jsonl")"

last_frame() {
	awk '/^spantrace top/ { if (n++) last = cur; cur = "" } { cur = cur $0 "\n" }
		END { printf "%s", last }' "$TMP/frames" >"$TMP/last"
}
row_count() { awk -v want="$1" '$1 == want { print $2; f = 1; exit } END { if (!f) print 0 }' "$TMP/last"; }
drained() {
	last_frame
	grep -q "^in flight 0 (socket" "$TMP/last" && [ "$(row_count ttft)" = "$N" ] && [ "$(row_count e2e)" = "$N" ]
}
wait_for drained || { cat "$TMP/last"; fail "no drained frame with $N socket TTFTs"; }
kill -TERM $top
wait $top || fail "top exited $?: $(cat "$TMP/top.err")"

in_flight() {
	grep -o "^in flight [0-9]* (socket" "$TMP/frames" | awk '{ print $3 }' >"$TMP/open"
	assert_pos "frames with the socket's requests in flight" "$(awk '$1 > 0' "$TMP/open" | wc -l)"
	assert_le "most in flight on the socket in a frame" "$(sort -n "$TMP/open" | tail -n1)" $N
}
untold_queue() {
	grep -q "requests: running ?  waiting ? (the engine tells no queue)" "$TMP/last" ||
		fail "llama.cpp's untold queue not said so: $(grep '^requests:' "$TMP/last")"
	ok "running and waiting read as unknown, with the reason"
	grep -q "requests: running [0-9]" "$TMP/frames" && fail "a frame showed llama.cpp's untold queue as a number"
	ok "no frame shows a false 0 running"
}
untold_kv() {
	grep -q "kv -" "$TMP/frames" && fail "a frame showed KV as '-', not why it is unknown"
	ok "no frame shows KV as a bare '-'"
}
socket_first() {
	assert_eq "ttft (the socket's) = the client's requests" $N "$(row_count ttft)"
	assert_eq "e2e (the socket's) = the client's requests" $N "$(row_count e2e)"
	awk '$1 == "ttft" { t = NR } $1 == "engine" && $2 == "ttft" { e = NR } END { exit !(t && e > t) }' "$TMP/last" ||
		{ cat "$TMP/last"; fail "the socket's ttft row is not first, with the engine's under it"; }
	ok "one TTFT first (the socket's), the engine's part under it"
}
test_case "in flight from the socket" in_flight
test_case "llama.cpp's queue untold" untold_queue
test_case "KV untold since the attach" untold_kv
test_case "the socket's TTFT first" socket_first
