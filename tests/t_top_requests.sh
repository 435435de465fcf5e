#!/usr/bin/env bash
# t_top_requests.sh - `spantrace top -b -p` on the HTTP engine under 8
# concurrent streams (at most 4 running): the requests pane shows running and
# waiting within the engine's limits while traffic flows; once it drains, it
# shows 0 running and 0 waiting, one TTFT per request, tokens and ITL
# counts that equal the client's usage, the socket's ttft and e2e rows one
# per request (on by default for a listening -p PID; the request's TTFT is
# the socket's, the engine's is its part, "engine ttft"), the socket's
# requests in flight beside the engine's gauges (never more than were
# sent, 0 once drained), and prefix cache hits, cached tokens and cache
# size that equal the engine's /stats.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_bpf
need_node
need_cmd jq jq
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
N=8 MAXSEQS=4

start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --max-seqs $MAXSEQS
"$SPANTRACE" top -b -d 0.1 -w 110 -p "$EPID" >"$TMP/frames" 2>"$TMP/top.err" &
top=$!
wait_for grep -q "^spantrace top" "$TMP/frames" || fail "no frame: $(cat "$TMP/top.err")"

# long enough that the 4 waiting requests wait through several frames: at
# 60..130 tokens the faster cpu backend drained the first wave in ~0.1 s
stream_spec $N 160 10 >"$TMP/spec.json"
client "$TMP/spec.json" "$TMP/client.jsonl"
assert_eq "client results with usage" $N "$(jq -s 'map(select(.usage)) | length' "$TMP/client.jsonl")"
tokens=$(jq -s 'map(.usage.completion_tokens) | add' "$TMP/client.jsonl")
assert_pos "tokens the client got" "$tokens"

# last_frame: the newest complete frame (the one before the frame being written)
last_frame() {
	awk '/^spantrace top/ { if (n++) last = cur; cur = "" } { cur = cur $0 "\n" }
		END { printf "%s", last }' "$TMP/frames" >"$TMP/last"
}
row_count() { awk -v want="$1" '$1 == want { print $2; f = 1; exit } END { if (!f) print 0 }' "$TMP/last"; }
# engine_count ROW: the count of row "engine ROW" (the engine's part of a
# request the socket timed: top -p of a listening server times its HTTP
# requests by default)
engine_count() { awk -v want="$1" '$1 == "engine" && $2 == want { print $3; f = 1; exit } END { if (!f) print 0 }' "$TMP/last"; }
drained() {
	last_frame
	grep -q "requests: running 0  waiting 0" "$TMP/last" && grep -q "^in flight 0 (socket" "$TMP/last" && [ "$(row_count ttft)" = "$N" ] &&
		[ "$(row_count e2e)" = "$N" ]
}
wait_for drained || { cat "$TMP/last"; fail "no drained frame with $N TTFTs"; }
kill -TERM $top
wait $top || fail "top exited $?: $(cat "$TMP/top.err")"

# while traffic flowed: some frame had requests running, none more than the engine allows
grep -o "requests: running [0-9]*  waiting [0-9]*" "$TMP/frames" | awk '{ print $3, $5 }' >"$TMP/gauges"
busy=$(awk '$1 > 0' "$TMP/gauges" | wc -l)
[ "$busy" -gt 0 ] || fail "no frame showed a running request"
ok "$busy frames with requests running"
assert_le "most running in a frame" "$(sort -n "$TMP/gauges" | tail -n1 | cut -d' ' -f1)" $MAXSEQS
assert_le "most in flight in a frame" "$(awk '{ print $1 + $2 }' "$TMP/gauges" | sort -n | tail -n1)" $N
awk '$2 > 0' "$TMP/gauges" | grep -q . || fail "no frame showed a waiting request ($N streams, $MAXSEQS seqs)"
ok "a frame showed waiting requests"
# the socket's in flight: some frame had requests open, none more than were sent
grep -o "^in flight [0-9]* (socket" "$TMP/frames" | awk '{ print $3 }' >"$TMP/open"
assert_pos "frames with the socket's requests in flight" "$(awk '$1 > 0' "$TMP/open" | wc -l)"
assert_le "most in flight on the socket in a frame" "$(sort -n "$TMP/open" | tail -n1)" $N

assert_eq "itl count = tokens after each first" $((tokens - N)) "$(row_count itl)"
assert_eq "ttft count (from the socket) = the requests" "$N" "$(row_count ttft)"
assert_eq "e2e count (from the socket) = the requests" "$N" "$(row_count e2e)"
assert_eq "engine ttft count (the engine's part) = the requests" "$N" "$(engine_count ttft)"
awk '$1 == "ttft" { t = NR } $1 == "engine" && $2 == "ttft" { e = NR } END { exit !(t && e > t) }' "$TMP/last" ||
	fail "the socket's ttft row is not first, the engine's under it"
ok "one TTFT first (the socket's), the engine's part under it"
assert_eq "header tokens = the client's usage" "$tokens" "$(grep -o 'tokens [0-9]*' "$TMP/last" | head -n1 | cut -d' ' -f2)"
grep -q "oldest: none" "$TMP/last" || fail "drained frame still lists requests in flight"
ok "no request left in flight"
# the second wave shares "Once upon a time" with finished requests: prefix
# cache hits, which the pane counts as the engine does
read -r hits cached <<<"$(sed -n 's/.*prefix hits \([0-9]*\) (\([0-9]*\) tok).*/\1 \2/p' "$TMP/last")"
[ -n "$hits" ] || fail "no prefix cache in the drained frame: $(grep 'requests:' "$TMP/last")"
assert_le "some prefix hits (the second wave)" 1 "$hits"
assert_eq "pane's prefix hits = the engine's /stats" "$(stat .serving.prefix_hits)" "$hits"
assert_eq "pane's cached tokens = the engine's /stats" "$(stat .serving.prefix_cached_tokens)" "$cached"
read -r entries blocks <<<"$(sed -n 's/.*cached \([0-9]*\) req \([0-9]*\) blk.*/\1 \2/p' "$TMP/last")"
assert_eq "pane's cached requests = the engine's /stats" "$(stat .serving.prefix_cache_entries)" "$entries"
assert_eq "pane's cached blocks = the engine's /stats" "$(stat .serving.prefix_cache_blocks)" "$blocks"
stop_engine
