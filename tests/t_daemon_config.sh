#!/usr/bin/env bash
# t_daemon_config.sh - bad daemon configuration fails fast with a clear
# one-line error and a non-zero exit: bad interval, bad address, conflicting
# thresholds, a port in use, an unwritable JSONL directory.
# fast
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ -x "$SPANTRACE" ] || fail "build $SPANTRACE first"

# expect_daemon_fail WHAT PATTERN ARGS...: exits non-zero, prints PATTERN, in < 10 s.
expect_daemon_fail() {
	local what=$1 pattern=$2; shift 2
	local rc=0
	timeout 10 "$SPANTRACE" daemon "$@" > "$TMP/out" 2>&1 || rc=$?
	[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "$what: exit $rc, output: $(cat "$TMP/out")"
	grep -q -- "$pattern" "$TMP/out" || fail "$what: no '$pattern' in: $(cat "$TMP/out")"
	ok "$what -> exit $rc: $(head -n 1 "$TMP/out")"
}

expect_daemon_fail "negative interval" "--interval must be" --binary /bin/true --interval -1
SPANTRACE_INTERVAL_SECS=0 expect_daemon_fail "zero interval from env" "SPANTRACE_INTERVAL_SECS must be" --binary /bin/true
expect_daemon_fail "host name address" "bad listen address" --binary /bin/true --listen localhost:9464
expect_daemon_fail "port out of range" "port must be" --binary /bin/true --listen 127.0.0.1:70000
expect_daemon_fail "both thresholds" "exclude each other" --binary /bin/true --slow-ms 1 --slow-pct 99
expect_daemon_fail "no binary" "need --binary" --interval 1
expect_daemon_fail "bad size" "--total-max must be" --binary /bin/true --total-max 12Q

# The rest loads BPF.
need_bpf
need_daemon_build
expect_daemon_fail "unwritable JSONL directory" "cannot create a file" --binary "$INFER" --listen 127.0.0.1:0 \
	--jsonl-dir /proc/self
: >"$TMP/plain"
expect_daemon_fail "JSONL directory below a file" "cannot create it: Not a directory" --binary "$INFER" \
	--listen 127.0.0.1:0 --jsonl-dir "$TMP/plain/logs"
expect_daemon_fail "address not on this host" "Cannot assign requested address" --binary "$INFER" \
	--listen 192.0.2.1:9464

# a missing --jsonl-dir is made, each level 0750 (as the systemd unit's LogsDirectoryMode)
start_daemon --jsonl-dir "$TMP/made/logs"
assert_eq "missing --jsonl-dir made, mode" 750 "$(stat -c %a "$TMP/made/logs")"
assert_eq "its missing parent too, mode" 750 "$(stat -c %a "$TMP/made")"
expect_daemon_fail "port in use" "Address already in use" --binary "$INFER" --listen "127.0.0.1:$DPORT"
curl -sf "http://127.0.0.1:$DPORT/healthz" | grep -qx ok || fail "first daemon stopped answering"
ok "first daemon still serves /healthz"
stop_daemon
