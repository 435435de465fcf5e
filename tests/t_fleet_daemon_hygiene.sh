#!/usr/bin/env bash
# t_fleet_daemon_hygiene.sh - a thousand short-lived engines in a row under
# `daemon --binary`: the daemon's RSS, once their series are gone, stays flat (from the 100th
# to the 1000th is under 2 MiB), every engine's series expires --expire
# seconds after it exits (no pid of ours is left in /metrics, none counted as
# traced), and no kernel table filled up (each full table has a counter).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_models
need_daemon_build

start_daemon --expire 1
drss() { echo $(( $(awk '{print $2}' /proc/$DPID/statm) * $(getconf PAGESIZE) )); }
: >"$TMP/pids"
run_many() {
	local i
	for i in $(seq "$1"); do
		"$INFER" "$MODELS/stories260K.bin" -b cpu -n 4 -t 0 --ids >/dev/null 2>&1 &
		echo $! >>"$TMP/pids"
		wait $! || fail "engine $i failed"
	done
}
# quiet_rss: the RSS once every engine so far has expired (no series of
# ours left) and a few more ticks went by. While engines are in flight the
# snapshot holds their histograms (~4 KB a series), so RSS then depends on
# how many ran in the last second, not on how many ran in all.
ours_left() {
	metrics | grep -o 'pid="[0-9]*"' | sort -u >"$TMP/seen"
	awk 'NR == FNR { seen[$0] = 1; next } ("pid=\"" $0 "\"") in seen { n++ } END { print n + 0 }' \
		"$TMP/seen" "$TMP/pids"
}
none_left() { [ "$(ours_left)" = 0 ]; }
wait_long() { local i; for i in $(seq 300); do "$@" && return 0; sleep 0.1; done; return 1; }
quiet() { wait_long none_left || fail "series of $(ours_left) exited engines still in /metrics"; sleep 1; }
run_many 100
quiet
rss100=$(drss)
run_many 900
quiet
rss1000=$(drss)
grep -E "^[0-9a-f]|^Rss" /proc/$DPID/smaps | paste - - | awk '{print $(NF-1), $1, $6}' | sort -n | tail -3 >"$TMP/smaps.top"
ok "daemon RSS after 100 engines $rss100, after 1000 $rss1000"
assert_le "RSS growth from the 100th to the 1000th engine (largest mappings: $(tr "\n" ";" <"$TMP/smaps.top"))" "$((rss1000 - rss100))" $((2 << 20))
metrics >"$TMP/m.txt" || fail "no /metrics"
left=0
while read -r pid; do
	grep -q "pid=\"$pid\"" "$TMP/m.txt" && left=$((left + 1))
done <"$TMP/pids"
assert_eq "series of our exited engines left in /metrics" 0 "$left"
grep -q "expire\|exited" "$TMP/daemon.log" || fail "no expiry logged"
for c in spantrace_agg_table_full_total spantrace_alloc_table_full_total spantrace_request_table_full_total; do
	grep -q "^$c " "$TMP/m.txt" || fail "no $c in /metrics"
	assert_eq "$c" 0 "$(msum "$TMP/m.txt" "$c")"
done
stop_daemon
