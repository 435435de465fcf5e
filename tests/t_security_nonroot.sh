#!/usr/bin/env bash
# t_security_nonroot.sh - least privilege, proven (issue 44): a user that is
# not root, holding only the capabilities docs/setup.md lists (CAP_BPF,
# CAP_PERFMON, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH, CAP_KILL, as ambient
# capabilities), traces root's `infer --http` with `record -p`, `top -b -p`
# and `daemon -p`, and each sees the requests served. Without
# CAP_SYS_PTRACE, `record -p` of root's process refuses in one line that
# names CAP_SYS_PTRACE; without CAP_KILL it traces, and says it cannot ask
# the engine for its state, naming CAP_KILL.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_root
need_bpf
need_node
need_cmd setpriv util-linux
need_cmd jq jq
need_cmd curl curl
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"

USER_NAME=spantrace-test
id "$USER_NAME" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$USER_NAME" ||
	fail "cannot create user $USER_NAME"
OUT=$(mktemp -d /tmp/spantrace-nonroot.XXXXXX)
chown "$USER_NAME" "$OUT"
at_exit 'rm -rf "$OUT"'   # lib.sh's own exit trap stays: it stops what the test started
CAPS=+bpf,+perfmon,+sys_ptrace,+dac_read_search,+kill

# as CAPS CMD...: CMD as the user, with exactly CAPS (inheritable and ambient);
# it execs: in the background its pid is the tracer's, for signals; in the
# foreground call it in a subshell
as() {
	local caps=$1; shift
	exec setpriv --reuid="$USER_NAME" --regid="$USER_NAME" --clear-groups --inh-caps=-all,"$caps" \
		--ambient-caps=-all,"$caps" --bounding-set=-all,"$caps" -- "$@"
}

start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --max-seqs 4
stream_spec 4 12 0 >"$TMP/spec.json"

# record -p: the requests and the socket's view of them
as "$CAPS" "$SPANTRACE" record -q -p "$EPID" -o "$OUT/r.jsonl" 2>"$TMP/rec.err" &
rec=$!
wait_for grep -qs '"type":"session"' "$OUT/r.jsonl" || fail "record as $USER_NAME did not attach: $(cat "$TMP/rec.err")"
client "$TMP/spec.json" "$TMP/c1.jsonl"
wait_for grep -qs '"type":"http"' "$OUT/r.jsonl"
kill -INT "$rec"
wait "$rec" || fail "record as $USER_NAME exited $?: $(cat "$TMP/rec.err")"
assert_eq "record as $USER_NAME: request records" 4 "$(jq -s 'map(select(.type == "request")) | length' "$OUT/r.jsonl")"
assert_eq "record as $USER_NAME: http records" 4 "$(jq -s 'map(select(.type == "http")) | length' "$OUT/r.jsonl")"

# top -b -p: a frame with the requests
as "$CAPS" "$SPANTRACE" top -b -d 0.2 -p "$EPID" >"$TMP/frames" 2>"$TMP/top.err" &
top=$!
wait_for grep -q "^spantrace top" "$TMP/frames" || fail "top as $USER_NAME: no frame: $(cat "$TMP/top.err")"
client "$TMP/spec.json" "$TMP/c2.jsonl"
four() { awk '$1 == "ttft" && $2 == 4 { f = 1 } END { exit !f }' "$TMP/frames"; }
wait_for four || fail "top as $USER_NAME: no frame with 4 TTFTs: $(tail -n 20 "$TMP/frames")"
kill -TERM "$top"
wait "$top" || fail "top as $USER_NAME exited $?: $(cat "$TMP/top.err")"
ok "top as $USER_NAME: a frame with the 4 requests"

# daemon -p: the socket's request counter
as "$CAPS" "$SPANTRACE" daemon -p "$EPID" --listen 127.0.0.1:0 --interval 0.2 >"$TMP/daemon.log" 2>&1 &
dpid=$!
WAIT_S=30 wait_for grep -q 'metrics at http' "$TMP/daemon.log" || fail "daemon as $USER_NAME: $(cat "$TMP/daemon.log")"
dport=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")
client "$TMP/spec.json" "$TMP/c3.jsonl"
served() { curl -sf "http://127.0.0.1:$dport/metrics" | grep -q '^spantrace_http_requests_total{status="200".* 4$'; }
wait_for served || fail "daemon as $USER_NAME: $(curl -sf "http://127.0.0.1:$dport/metrics" | grep http_requests_total)"
kill -TERM "$dpid"
wait "$dpid" || fail "daemon as $USER_NAME exited $?: $(tail -n 3 "$TMP/daemon.log")"
ok "daemon as $USER_NAME: 4 requests on /metrics"

# without CAP_SYS_PTRACE: root's /proc/PID/maps is closed, and the error says why
RC=0
(as +bpf,+perfmon,+dac_read_search,+kill "$SPANTRACE" record -p "$EPID" -o "$OUT/x.jsonl" --duration 1) \
	>/dev/null 2>"$TMP/err" || RC=$?
[ "$RC" != 0 ] || fail "record -p of root's process without CAP_SYS_PTRACE exited 0"
grep -q "CAP_SYS_PTRACE" "$TMP/err" || fail "the refusal does not name CAP_SYS_PTRACE: $(cat "$TMP/err")"
assert_eq "the refusal: lines" 1 "$(grep -c . "$TMP/err")"
ok "without CAP_SYS_PTRACE: exit $RC, $(cat "$TMP/err")"
# without CAP_KILL: the trace runs, and the one thing it cannot do (ask the
# engine for its state, a signal) is said, naming CAP_KILL
(as +bpf,+perfmon,+sys_ptrace,+dac_read_search "$SPANTRACE" record -p "$EPID" -o "$OUT/k.jsonl" --duration 1) \
	>/dev/null 2>"$TMP/kill.err" || fail "record -p without CAP_KILL exited $?: $(cat "$TMP/kill.err")"
grep -q "CAP_KILL" "$TMP/kill.err" || fail "without CAP_KILL, nothing names it: $(cat "$TMP/kill.err")"
assert_eq "without CAP_KILL: the trace ran (session and summary records)" 2 \
	"$(jq -s 'map(select(.type == "session" or .type == "summary")) | length' "$OUT/k.jsonl")"
ok "without CAP_KILL: $(grep CAP_KILL "$TMP/kill.err")"
stop_engine
