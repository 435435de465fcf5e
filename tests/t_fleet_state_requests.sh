#!/usr/bin/env bash
# t_fleet_state_requests.sh - the serving gauges at attach: `daemon -p` on an
# HTTP engine with long requests in flight knows running/waiting from the
# state dump, before any request is admitted or finishes (before, the series
# were absent until the next lifecycle probe), and they equal the engine's
# own. An attach during which a request was admitted or finished proves
# nothing (a lifecycle probe told the daemon), so it is tried again.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_node
need_daemon_build
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"

start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --max-seqs 2 --kv-blocks 64 --block-size 16
# eight long requests, two running and the rest waiting, for many seconds
stream_spec 8 240 0 >"$TMP/a.json"
node "$NODE_DIR/client.js" "$BASE" run "$TMP/a.json" >"$TMP/a.out" 2>"$TMP/a.err" &
ca=$!
wait_for health_ge running 2 || fail "the requests are not running"
# running, waiting, and the count of lifecycle events so far
gauges_now() {
	curl -s "$BASE/stats" | jq -c '.serving // {} | [.running, .waiting,
		(.queued // 0) + (.admitted // 0) + (.preempted // 0) + ([(.finished // {})[]] | add // 0)]'
}
has_gauges() { metrics >"$TMP/m.txt" && grep -q "^spantrace_requests_running{pid=\"$EPID\"" "$TMP/m.txt"; }
gauge() { msum "$TMP/m.txt" "spantrace_requests_$1" "pid=\"$EPID\""; }
compared=0
for attempt in 1 2 3 4 5; do
	# The engine is stopped while the daemon attaches, so the window in
	# which a lifecycle event could beat the state dump is the moment after
	# SIGCONT, not the whole attach.
	h0=$(gauges_now)
	kill -STOP "$EPID"
	start_daemon --level coarse -p "$EPID" --interval 0.1
	kill -CONT "$EPID"
	# within a second: no lifecycle probe need come first
	for i in $(seq 10); do has_gauges && break; sleep 0.1; done
	has_gauges || fail "no running/waiting series after the attach: $(grep requests_ "$TMP/m.txt" | head -5)"
	h1=$(gauges_now)
	if [ "$h0" = "$h1" ] && [ "$(echo "$h1" | jq '.[0]')" -gt 0 ]; then
		assert_eq "gauges right after the attach = the engine's (attempt $attempt)" "$(echo "$h1" | jq -c '.[0:2]')" \
			"[$(gauge running),$(gauge waiting)]"
		compared=1
		break
	fi
	ok "attempt $attempt: a request was admitted or finished during the attach ($h0 -> $h1); again"
	stop_daemon
done
[ $compared = 1 ] || fail "every attach overlapped a lifecycle event"
stop_daemon
kill $ca 2>/dev/null
wait $ca 2>/dev/null
stop_engine
