#!/usr/bin/env bash
# bench_socket.sh - what tracing HTTP from the sockets costs a busy server,
# and what it costs everybody else on the host.
#
# nginx (Debian's, its defaults: sendfile on), 1 worker, a 1 KiB file at
# saturation with wrk (-t1 -c32, SECS a round). Rounds interleave untraced
# / `record --engine none -p MASTER` / `daemon --engine none -p MASTER`,
# each tracer attached before the round and stopped after it; every traced
# round must count exactly the access log's requests. Per round: requests/s
# and the worker's CPU (utime + stime) per request. Then the host-wide tax:
# an untraced syscall-bound process (dd bs=1, 2 M system calls) timed with
# and without the daemon tracing nginx, interleaved.
#
#   tools/bench_socket.sh        (root)
#   ROUNDS=6 SECS=3 BUILD=build tools/bench_socket.sh
export BENCH_NAME=bench_socket
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
# shellcheck source=tests/nginx_lib.sh
source "$ROOT/tests/nginx_lib.sh"
SECS=${SECS:-3}
ROUNDS=${ROUNDS_SOCKET:-$REPEAT}
[ "$(id -u)" = 0 ] || skipped "needs root to load BPF programs"
for c in nginx wrk curl; do command -v $c >/dev/null || die "no $c (make deps)"; done
need_built "$SPANTRACE"

TRACER=
bench_cleanup_hook() { [ -n "$TRACER" ] && kill -TERM "$TRACER" 2>/dev/null; nginx_stop; return 0; }
nginx_start "$TMP/ngx" 1
WORKER=$(pgrep -P "$NGX_PID")
URL=http://127.0.0.1:$NGX_PORT/k1.html
ticks() { awk '{ print $14 + $15 }' "/proc/$WORKER/stat"; }
HZ=$(getconf CLK_TCK)

# load OUT: one timed round; "rps us_per_request requests" into OUT
load() {
	local t0 t1 l0 l1 rps
	l0=$(nginx_log_lines) t0=$(ticks)
	rps=$(wrk -t1 -c32 -d"${SECS}s" "$URL" | awk '/^Requests\/sec/ { print $2 }')
	t1=$(ticks) l1=$(nginx_log_lines)
	ROUND_REQS=$((l1 - l0))
	echo "$rps $(awk -v t=$((t1 - t0)) -v hz="$HZ" -v n=$ROUND_REQS 'BEGIN { printf "%.3f", t / hz * 1e6 / n }')" >>"$1"
}
run_untraced() { load "$TMP/untraced"; }
run_record() {
	rm -f "$TMP/run.jsonl"
	"$SPANTRACE" record -q --engine none -p "$NGX_PID" -o "$TMP/run.jsonl" 2>"$TMP/record.err" &
	TRACER=$!
	wait_until 30 grep -qs '"type":"session"' "$TMP/run.jsonl" || die "record did not attach: $(cat "$TMP/record.err")"
	load "$TMP/record"
	kill -INT "$TRACER"; wait "$TRACER" || die "record exited $?: $(cat "$TMP/record.err")"; TRACER=
	local n
	n=$(grep -c '"type":"http"' "$TMP/run.jsonl")
	[ "$n" = "$ROUND_REQS" ] || die "record: $n http records, nginx logged $ROUND_REQS"
}
start_daemon() {
	"$SPANTRACE" daemon --engine none -p "$NGX_PID" --listen 127.0.0.1:0 --interval 1 >"$TMP/daemon.log" 2>&1 &
	TRACER=$!
	wait_until 30 grep -qs 'metrics at http' "$TMP/daemon.log" || die "daemon did not start: $(tail -n3 "$TMP/daemon.log")"
	DPORT=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")
}
daemon_requests() {
	curl -sf --max-time 10 "http://127.0.0.1:$DPORT/metrics" |
		awk '/^spantrace_http_requests_total\{/ { s += $NF } END { print s + 0 }'
}
run_daemon() {
	start_daemon
	load "$TMP/daemon"
	counted() { [ "$(daemon_requests)" = "$ROUND_REQS" ]; }
	wait_until 15 counted || die "daemon counted $(daemon_requests) requests, nginx logged $ROUND_REQS"
	kill -TERM "$TRACER"; wait "$TRACER" || die "daemon exited $?"; TRACER=
}

wrk -t1 -c32 -d1s "$URL" >/dev/null   # warm-up
: >"$TMP/untraced"; : >"$TMP/record"; : >"$TMP/daemon"
for r in $(seq "$ROUNDS"); do
	rotate3 "$r" run_untraced run_record run_daemon
	echo "round $r/$ROUNDS req/s (worker us/req): untraced $(tail -n1 "$TMP/untraced")  record $(tail -n1 "$TMP/record")  daemon $(tail -n1 "$TMP/daemon")" >&2
done
col() { awk -v c="$2" '{ print $c }' "$1" >"$1.$2"; }
for f in untraced record daemon; do col "$TMP/$f" 1; col "$TMP/$f" 2; done
us0=$(median <"$TMP/untraced.2")
echo "nginx 1 worker, 1 KiB by sendfile, wrk -c32 ${SECS}s, median of $ROUNDS interleaved rounds ($(cpu_model)):"
echo "  untraced  $(median <"$TMP/untraced.1") req/s, worker $us0 us/request"
echo "  record    $(median <"$TMP/record.1") req/s, worker $(median <"$TMP/record.2") us/request (records = access log, every round)"
echo "  daemon    $(median <"$TMP/daemon.1") req/s, worker $(median <"$TMP/daemon.2") us/request (requests counted = access log, every round)"
echo "  per-round record/untraced: $(paired_list "$TMP/record.1" "$TMP/untraced.1")"
echo "  per-round daemon/untraced: $(paired_list "$TMP/daemon.1" "$TMP/untraced.1")"
ratio socket_nginx_record_over_untraced "$(paired_ratio "$TMP/record.1" "$TMP/untraced.1")" ">=0.90"
ratio socket_nginx_daemon_over_untraced "$(paired_ratio "$TMP/daemon.1" "$TMP/untraced.1")" ">=0.93"
added() { paste "$1" "$TMP/untraced.2" | awk '{ print $1 - $2 }' | median; }
ratio socket_record_worker_us_added_per_request "$(added "$TMP/record.2")" "<=1"
ratio socket_daemon_worker_us_added_per_request "$(added "$TMP/daemon.2")" "<=1"

# The host-wide tax: a process nobody traces, while the daemon traces nginx.
dd_secs() {
	local t0 t1
	t0=$(date +%s%N)
	dd if=/dev/zero of=/dev/null bs=1 count=1000000 2>/dev/null
	t1=$(date +%s%N)
	awk -v d=$((t1 - t0)) 'BEGIN { printf "%.4f\n", d / 1e9 }'
}
: >"$TMP/dd0"; : >"$TMP/dd1"
dd_alone() { dd_secs >>"$TMP/dd0"; }
dd_with_daemon() { start_daemon; dd_secs >>"$TMP/dd1"; kill -TERM "$TRACER"; wait "$TRACER"; TRACER=; }
for r in $(seq "$ROUNDS"); do   # ABBA: the order alternates
	if [ $((r % 2)) = 1 ]; then dd_alone; dd_with_daemon; else dd_with_daemon; dd_alone; fi
done
echo "untraced dd bs=1 (2 M system calls): $(median <"$TMP/dd0") s alone, $(median <"$TMP/dd1") s with the daemon tracing nginx"
echo "  per-round with/without: $(paired_list "$TMP/dd1" "$TMP/dd0")"
ratio socket_host_syscalls_with_daemon_over_without "$(paired_ratio "$TMP/dd1" "$TMP/dd0")" "<=1.01"
