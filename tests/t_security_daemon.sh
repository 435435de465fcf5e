#!/usr/bin/env bash
# t_security_daemon.sh - the daemon is private by default:
#  * with no --listen (and no SPANTRACE_LISTEN) its metrics endpoint binds
#    loopback only: `ss -ltn` shows 127.0.0.1:9464 held by the daemon and no
#    wildcard socket; the host's own non-loopback address is refused;
#  * the slow-span JSONL files it creates have mode 0640 or tighter (even
#    under umask 000), and every line is valid JSON.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
source "$ROOT/tests/daemon_lib.sh"
need_bpf
need_models
need_daemon_build # and curl: a missing one would "refuse" the host's address too
need_cmd ss iproute2
need_cmd ip iproute2
PORT=9464
ss -Htln "sport = :$PORT" | grep -q . && skip "port $PORT is in use on this machine (another daemon?): cannot check the default"

unset SPANTRACE_LISTEN SPANTRACE_JSONL_DIR SPANTRACE_SLOW_MS SPANTRACE_SLOW_PCT SPANTRACE_BINARY
mkdir "$TMP/j"
(umask 000 && exec "$SPANTRACE" daemon --binary "$INFER" --jsonl-dir "$TMP/j" --slow-ms 0 --interval 0.2) >"$TMP/daemon.log" 2>&1 &
DPID=$!
wait_for grep -q 'metrics at http' "$TMP/daemon.log" || { cat "$TMP/daemon.log" >&2; fail "daemon did not start"; }
ok "$(grep -o 'metrics at http[^ ]*' "$TMP/daemon.log")"

sockets=$(ss -Htlnp "sport = :$PORT")
echo "$sockets"
assert_eq "listening sockets on :$PORT" 1 "$(echo "$sockets" | grep -c .)"
assert_eq "bound address" "127.0.0.1:$PORT" "$(echo "$sockets" | awk '{ print $4 }')"
echo "$sockets" | grep -q "pid=$DPID," || fail "the socket on :$PORT is not the daemon's"
DPORT=$PORT
metrics >"$TMP/m.txt" || fail "no /metrics on 127.0.0.1:$PORT"
ok "loopback serves $(grep -c . "$TMP/m.txt") metric lines"
addr=$(ip -4 -o addr show scope global 2>/dev/null | awk '{ sub("/.*", "", $4); print $4; exit }')
if [ -n "$addr" ]; then
	if curl -s -m 2 -o /dev/null "http://$addr:$PORT/metrics"; then
		fail "the metrics endpoint answers on $addr (not loopback only)"
	fi
	ok "refused on the host's address $addr"
fi

run_engine "$TMP/e.json"
has_files() { [ -n "$(ls -A "$TMP/j")" ] && [ -s "$(ls -d "$TMP"/j/* | head -n1)" ]; }
wait_for has_files || fail "the daemon wrote no JSONL under $TMP/j"
stop_daemon
for f in "$TMP"/j/*; do
	mode=$(stat -c %a "$f")
	[ $((8#$mode & 8#137)) = 0 ] || fail "$(basename "$f") has mode $mode under umask 000 (want 0640 or tighter)"
	ok "$(basename "$f"): mode $mode, $(jsonl_check "$f") valid JSON lines"
done
# a host with no address but loopback leaves that promise unchecked: not a pass
[ -n "$addr" ] || skip "no non-loopback IPv4 address on this host: refusal off loopback not checked"
