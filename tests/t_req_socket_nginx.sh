#!/usr/bin/env bash
# t_req_socket_nginx.sh - HTTP requests of a server nobody here wrote, by
# the master's pid: Debian's nginx with its defaults (the body by sendfile),
# 2 pre-fork workers, its access log the witness. Keep-alive load (ab -k,
# wrk), pipelined requests (3 and 10 in one write), gzip's chunked
# responses on one connection, HEAD, a 20 MiB file and a reload (new
# workers, forked after the attach): records = access-log lines, exactly,
# each ending at its response. Garbage pipelined after a request is one
# lost request, counted, never merged. Then one worker by its own pid,
# and a process with no socket, which is told about.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nginx_lib.sh"
need_bpf
need_cmd jq jq
need_cmd curl curl
need_cmd nginx nginx-light
need_cmd ab apache2-utils
need_cmd wrk wrk
P=$ROOT/tests/helpers/pipeline_http.py
at_exit 'nginx_stop; [ -n "${rec:-}" ] && kill "$rec" 2>/dev/null'

# record PID [FLAGS]: a record of PID's requests in the background
record() {
	local pid=$1
	shift
	rm -f "$TMP/run.jsonl"
	"$SPANTRACE" record -q --engine none -p "$pid" "$@" -o "$TMP/run.jsonl" --summary "$TMP/s.json" \
		2>"$TMP/record.err" &
	rec=$!
	wait_for grep -qs '"type":"session"' "$TMP/run.jsonl" || fail "record did not attach: $(cat "$TMP/record.err")"
}
stop_record() {
	kill -INT "$rec"
	wait "$rec" || fail "record exited $?: $(cat "$TMP/record.err")"
	rec=
}
records() { jq -c 'select(.type == "http")' "$TMP/run.jsonl"; }
U=http://127.0.0.1

nginx_start "$TMP/ngx" 2
record "$NGX_PID"
base=$(nginx_log_lines)
run_ok "ab -k" ab -q -k -n 2000 -c 4 "$U:$NGX_PORT/k1.html" >/dev/null
mono_ns() { python3 -c 'import time; print(time.monotonic_ns())'; }   # the records' clock
wrk0=$(mono_ns)
run_ok "wrk" wrk -t1 -c8 -d2s "$U:$NGX_PORT/k1.html" >/dev/null
wrk1=$(mono_ns)
assert_eq "3 pipelined answered" 3 "$(python3 "$P" "$NGX_PORT" 3 /k1.html)"
assert_eq "10 pipelined answered" 10 "$(python3 "$P" "$NGX_PORT" 10 /k1.html)"
run_ok "gzip x3 on one connection" curl -sf --compressed -o /dev/null -o /dev/null -o /dev/null \
	"$U:$NGX_PORT/gz/text.txt" "$U:$NGX_PORT/gz/text.txt" "$U:$NGX_PORT/gz/text.txt"
run_ok "HEAD" curl -sf -I -o /dev/null "$U:$NGX_PORT/k1.html"
run_ok "20 MiB by sendfile" curl -sf -o /dev/null "$U:$NGX_PORT/big.bin"
# new workers, forked after the attach, are traced too
old=$(pgrep -P "$NGX_PID" | sort | tr '\n' ' ')
kill -HUP "$NGX_PID"
renewed() { [ "$(pgrep -P "$NGX_PID" | sort | tr '\n' ' ')" != "$old" ] && [ "$(pgrep -c -P "$NGX_PID")" = 2 ]; }
WAIT_S=20 wait_for renewed || fail "nginx's workers were not replaced on reload"
run_ok "ab -k after the reload" ab -q -k -n 500 -c 2 "$U:$NGX_PORT/k1.html" >/dev/null
# garbage after a pipelined request: nginx answers it 400 and closes
assert_eq "garbage pipelined" 2 "$(python3 "$P" "$NGX_PORT" 1 /k1.html $'GARBAGE\r\n\r\n')"
logged() { [ "$(records | wc -l)" -ge $(($(nginx_log_lines) - base - 1)) ]; }
wait_for logged
stop_record
want=$(($(nginx_log_lines) - base))
lost=$(jq '.http.lost_boundary' "$TMP/s.json")
assert_eq "records + the garbage counted lost = access-log lines" "$want" $(($(records | wc -l) + lost))
assert_eq "lost: the garbage" 1 "$lost"
# wrk's end closes its 8 connections, each with at most one request in
# flight: those may end where the client went (reset or close), nothing
# else may. Every other record ends at its response.
cut=$(records | jq -s --argjson a "$wrk0" --argjson b "$wrk1" \
	'map(select(.start_ns >= $a and .start_ns <= $b and .end != "response"))')
assert_le "wrk's requests cut by its end (one a connection at most)" "$(jq length <<<"$cut")" 8
assert_empty "wrk's cut requests that ended otherwise than reset or close" \
	"$(jq -r '.[] | select(.end != "reset" and .end != "close") | .end' <<<"$cut")"
assert_eq "records outside wrk's end that did not end at their response" 0 \
	"$(records | jq -s --argjson a "$wrk0" --argjson b "$wrk1" \
		'map(select((.start_ns < $a or .start_ns > $b) and .end != "response")) | length')"
assert_eq "responses' statuses other than 200" 0 "$(records | jq -s 'map(select(.end == "response" and .status != 200)) | length')"
assert_eq "gzip responses" 3 "$(records | jq -s 'map(select(.path == "/gz/text.txt")) | length')"
assert_eq "HEAD" 1 "$(records | jq -s 'map(select(.method == "HEAD")) | length')"
assert_ge "20 MiB response's bytes" "$(records | jq -s 'map(select(.path == "/big.bin")) | .[0].resp_bytes')" $((20 << 20))
assert_eq "processes seen (2 workers, 2 after the reload)" 4 "$(records | jq -s 'map(.pid) | unique | length')"
for k in lost_closed lost_pipeline unparsed_connections table_full; do
	assert_eq "summary http.$k" 0 "$(jq ".http.$k" "$TMP/s.json")"
done
nginx_stop

# one worker by its own pid
nginx_start "$TMP/ngx1" 1
w=$(pgrep -P "$NGX_PID")
record "$w" --no-children
base=$(nginx_log_lines)
run_ok "ab -k, one worker" ab -q -k -n 1000 -c 4 "$U:$NGX_PORT/k1.html" >/dev/null
assert_eq "5 pipelined, one worker" 5 "$(python3 "$P" "$NGX_PORT" 5 /k1.html)"
wait_for logged
stop_record
assert_eq "records = access-log lines (worker's pid)" $(($(nginx_log_lines) - base)) "$(records | wc -l)"
nginx_stop

# a process that serves nothing: the tracer says why nothing comes
sleep 30 &
quiet=$!
"$SPANTRACE" record --engine none -p "$quiet" -o /dev/null 2>"$TMP/quiet.err" &
rec=$!
told() { grep -q "listens on no TCP port" "$TMP/quiet.err"; }
wait_for told || fail "no warning for a process without sockets: $(cat "$TMP/quiet.err")"
ok "$(grep -m1 'listens on no TCP port' "$TMP/quiet.err")"
kill -INT "$rec"; wait "$rec"; rec=
kill "$quiet"
