#!/usr/bin/env bash
# t_req_socket_hostile.sh - `record --http` under hostile traffic (issue 47,
# point 7), on `infer --http`: binary garbage, another protocol, a TLS
# handshake, a malformed request line, a client sending a byte every 0.1 s,
# 10,000 connections opened and dropped (closed, half a request, reset), a
# reset mid-stream and a request over 1 MiB. Nothing crashes or stops the
# tracer; the server serves on; the not-HTTP connections are counted (TLS
# apart), not guessed at; the connection and arrival maps are back where
# they were (bpftool counts their entries); every event is accounted for.
# Then nginx (its defaults: sendfile on), by its master's pid: 100 requests
# pipelined in one write, a sendfile response pipelined before another, a
# sendfile download reset midway and half a request; records plus the
# requests counted lost equal nginx's access log, none merged.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
source "$(dirname "$0")/nginx_lib.sh"
need_bpf
need_cmd jq jq
need_cmd curl curl
need_cmd bpftool bpftool
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
H=$ROOT/tests/helpers/hostile_http.py

start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --max-seqs 4 --max-conns 64
"$SPANTRACE" record -q --http -p "$EPID" --level coarse -o "$TMP/run.jsonl" --summary "$TMP/s.json" \
	2>"$TMP/record.err" &
rec=$!
wait_for grep -qs '"type":"session"' "$TMP/run.jsonl" || fail "record did not attach: $(cat "$TMP/record.err")"

# entries MAP: how many entries the newest map of that name holds
entries() {
	local id
	id=$(bpftool -j map show | jq -r --arg n "$1" '[.[] | select(.name == $n)] | max_by(.id) | .id')
	[ -n "$id" ] && [ "$id" != null ] || fail "no BPF map $1 loaded"
	bpftool -j map dump id "$id" | jq length
}
hostile() { timeout 60 python3 "$H" "$PORT" "$@" 2>&1 || fail "hostile_http $*: exit $?"; }
served() { curl -sf "$BASE/health" | jq -e '.status == "ok"' >/dev/null; }

served || fail "the server does not serve before the traffic"
conns0=$(entries http_conns) arrivals0=$(entries http_arrivals)
ok "maps before: http_conns $conns0, http_arrivals $arrivals0"
for c in garbage ssh tls badline slow reset huge; do
	ok "$(hostile $c)"
	served || fail "the server stopped serving after '$c'"
	kill -0 "$rec" 2>/dev/null || fail "the tracer died after '$c': $(cat "$TMP/record.err")"
done
# the maps grow while connections are open: 50 held with half a request each (the server takes 64)
hostile hold 50 4 >"$TMP/hold.out" &
held=$!
grown() { [ "$(entries http_conns)" -ge $((conns0 + 50)) ]; }
wait_for grown || fail "http_conns holds $(entries http_conns) entries with 50 connections open, $conns0 before"
ok "maps grow: http_conns $(entries http_conns) with 50 connections open"
wait "$held" || fail "hostile hold: exit $?"
ok "$(cat "$TMP/hold.out")"
ok "$(hostile storm 10000)"
served || fail "the server stopped serving after the storm"
# closes settle within a moment: wait for the connection table to drain
conns_back() { [ "$(entries http_conns)" -le "$conns0" ]; }
wait_for conns_back || fail "http_conns holds $(entries http_conns) entries after the traffic, $conns0 before"
arrivals_back() { [ "$(entries http_arrivals)" -le "$arrivals0" ]; }
wait_for arrivals_back || fail "http_arrivals holds $(entries http_arrivals) entries after the traffic, $arrivals0 before"
ok "maps after: http_conns $(entries http_conns), http_arrivals $(entries http_arrivals)"

stop_engine
wait "$rec" || fail "record exited $?: $(cat "$TMP/record.err")"
assert_eq "loss balanced" true "$(jq .loss.balanced "$TMP/s.json")"
assert_eq "events dropped" 0 "$(jq .loss.dropped "$TMP/s.json")"
# the 0x16 of TLS is not HTTP either; TLS is counted apart
# garbage, ssh, the bad line, 50 held and the storm's 3,333 half request lines
assert_eq "connections not parsed" $((3 + 50 + 3333)) "$(jq .http.unparsed_connections "$TMP/s.json")"
assert_eq "TLS connections" 1 "$(jq .http.tls_connections "$TMP/s.json")"
assert_eq "connection table full" 0 "$(jq .http.table_full "$TMP/s.json")"
assert_eq "requests open at the end (every connection closed)" 0 "$(jq .http.open_at_end "$TMP/s.json")"
# what was HTTP is recorded: the slow GET answered, the reset stream, the huge POST refused
python3 - "$TMP/run.jsonl" <<'PY' || fail "the hostile requests as recorded"
import json, sys
http = [json.loads(l) for l in open(sys.argv[1]) if '"type":"http"' in l]
def one(pred, what):
    got = [r for r in http if pred(r)]
    if not got:
        sys.exit(f"no record of {what} among {len(http)}")
    return got[0]
slow = one(lambda r: r["path"] == "/health" and r["read_wait_ns"] >= 0 and r["dur_ns"] > 3e9, "the slow GET")
assert slow["status"] == 200 and slow["start"] == "arrival", slow
reset = one(lambda r: r["stream"], "the reset stream")
assert reset["end"] == "reset" and reset["events"] >= 1, reset
huge = one(lambda r: r["status"] == 413, "the 413 for the huge body")
print(f"ok: slow GET {slow['dur_ns'] / 1e9:.1f} s from its first byte; stream ended by {reset['end']} "
      f"after {reset['events']} events; huge POST 413 after {huge['req_bytes']} bytes read; {len(http)} records")
PY

# ---- nginx: pipelining and sendfile ----
need_cmd nginx nginx-light
nginx_start "$TMP/ngx" 1
at_exit nginx_stop
rm -f "$TMP/run.jsonl"
"$SPANTRACE" record -q --engine none -p "$NGX_PID" -o "$TMP/run.jsonl" --summary "$TMP/s.json" 2>"$TMP/record.err" &
rec=$!
wait_for grep -qs '"type":"session"' "$TMP/run.jsonl" || fail "record did not attach: $(cat "$TMP/record.err")"
N=$ROOT/tests/helpers/hostile_nginx.py
for c in flood big_next abort half; do
	ok "$(timeout 60 python3 "$N" "$NGX_PORT" "$c" 2>&1)" || fail "hostile_nginx $c"
done
logged() { [ "$(grep -c '"type":"http"' "$TMP/run.jsonl")" -ge "$(($(nginx_log_lines) - 64))" ]; }
wait_for logged
sleep 0.5   # the last closes' records (a lost or unparsed one has no line to wait for)
kill -INT "$rec"
wait "$rec" || fail "record exited $?: $(cat "$TMP/record.err")"
jq -c 'select(.type == "http")' "$TMP/run.jsonl" >"$TMP/ngx.jsonl"
# nginx logs the half request too (a 400 at the close): it is counted unparsed
lost=$(jq '.http.lost_pipeline + .http.lost_boundary + .http.lost_closed + .http.unparsed_connections' "$TMP/s.json")
assert_eq "records + requests counted lost or unparsed = nginx's access log" "$(nginx_log_lines)" \
	$(($(wc -l <"$TMP/ngx.jsonl") + lost))
assert_eq "the half request line counted unparsed" 1 "$(jq .http.unparsed_connections "$TMP/s.json")"
assert_eq "nginx: requests open at the end (every connection closed)" 0 "$(jq .http.open_at_end "$TMP/s.json")"
# the sendfile response ends at its length, and the next one is its own
big=$((20 << 20))
assert_eq "20 MiB by sendfile, ended at its response" 1 \
	"$(jq -s --argjson b $big 'map(select(.path == "/big.bin" and .end == "response" and .resp_bytes > $b and .resp_bytes < $b + 1024)) | length' "$TMP/ngx.jsonl")"
assert_eq "the reset download ends by the reset (not a close, not merged)" 1 \
	"$(jq -s --argjson b $big 'map(select(.path == "/big.bin" and .end == "reset" and .resp_bytes < $b)) | length' "$TMP/ngx.jsonl")"
assert_eq "every k1.html response its own (1 KiB and headers)" 0 \
	"$(jq -s 'map(select(.path == "/k1.html" and (.end != "response" or .resp_bytes > 1024 + 512))) | length' "$TMP/ngx.jsonl")"
