#!/usr/bin/env bash
# t_fleet_daemon_hygiene.sh - a thousand short-lived engines in a row under
# `daemon --binary`: the daemon's RSS, once their series are gone, stays flat (from the 100th
# to the 1000th is under 2 MiB), every engine's series expires --expire
# seconds after it exits (the last engine's are gone between 0.8 and 3 s after
# it exits, with --expire 1; no pid of ours is left in /metrics), the
# spantrace_traced_processes gauge counts a live engine and falls to 0 once
# it exits, and no kernel table filled up (each full table has a counter).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_models
need_daemon_build

# A private copy of the engine (it finds libinfer.so beside it): engines
# that others start from build/ meanwhile are not traced, so the gauge of
# traced processes counts ours only.
mkdir "$TMP/app"
cp "$INFER" "$BUILD/libinfer.so" "$TMP/app/"
INFER=$TMP/app/infer
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
	metrics >"$TMP/now" && grep -q '^spantrace_up' "$TMP/now" || fail "no /metrics from the daemon"
	grep -o 'pid="[0-9]*"' "$TMP/now" | sort -u >"$TMP/seen"
	awk 'NR == FNR { seen[$0] = 1; next } ("pid=\"" $0 "\"") in seen { n++ } END { print n + 0 }' \
		"$TMP/seen" "$TMP/pids"
}
none_left() { [ "$(ours_left)" = 0 ]; }
# The last engine exited just before: with --expire 1 its series go 1 s
# after the daemon sees it dead, and the daemon looks every 0.2 s (one tick
# to see the exit, one to pass the grace): 1.4 s. 3 s leaves the rest for
# ticks late on a shared 2-core machine; 0.8 s (not 1) for the time between
# the exit and this clock read. 30 s (wait_long) would not be "--expire".
quiet() {
	local t0 ms
	t0=$(date +%s%N)
	wait_long none_left || fail "series of $(ours_left) exited engines still in /metrics"
	ms=$((($(date +%s%N) - t0) / 1000000))
	assert_between "ms from the last engine's exit to none of our series left" 800 "$ms" 3000
	sleep 1   # five more ticks (0.2 s) with nothing to expire: the RSS settles (quiet_rss)
}
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
assert_eq "spantrace_traced_processes once every engine exited" 0 "$(msum "$TMP/m.txt" spantrace_traced_processes)"

# The gauge counts a live engine (one waiting on a fifo), and falls back once
# it exits and expires: so the 0 above is a count, not a missing series.
mkfifo "$TMP/in"
"$INFER" "$MODELS/stories260K.bin" -b cpu --serve --ids <"$TMP/in" >/dev/null 2>&1 &
srv=$!
exec {hold}>"$TMP/in"
echo $srv >>"$TMP/pids"
traced() { metrics >"$TMP/m.txt" && [ "$(msum "$TMP/m.txt" spantrace_traced_processes)" -ge 1 ]; }
wait_long traced || fail "spantrace_traced_processes never counted the live engine $srv"
ok "spantrace_traced_processes = $(msum "$TMP/m.txt" spantrace_traced_processes) with engine $srv alive"
exec {hold}>&-
wait $srv || fail "the serving engine exited $?"
quiet
metrics >"$TMP/m.txt" || fail "no /metrics"
assert_eq "spantrace_traced_processes after it exited" 0 "$(msum "$TMP/m.txt" spantrace_traced_processes)"

for c in spantrace_agg_table_full_total spantrace_alloc_table_full_total spantrace_request_table_full_total; do
	grep -q "^$c " "$TMP/m.txt" || fail "no $c in /metrics"
	assert_eq "$c" 0 "$(msum "$TMP/m.txt" "$c")"
done
stop_daemon
