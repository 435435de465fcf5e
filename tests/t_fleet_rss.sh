#!/usr/bin/env bash
# t_fleet_rss.sh - RSS split into what the engine's pools hold and the rest,
# on an engine attached after it started: in top (-p), in record's summary
# and in the daemon's Prometheus series. pools + other = RSS everywhere, and
# pools is the pools' reserved bytes (the engine's own, thanks to the state
# dump) as long as they fit in RSS.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_daemon_build
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"

fifo_engine
ask   # every weight page is read once: the mapping is resident
rss_now() { echo $(( $(awk '{print $2}' /proc/$SRV/statm) * $(getconf PAGESIZE) )); }

# top
"$SPANTRACE" top -b -n 2 -d 0.5 -w 200 -p $SRV >"$TMP/frames" 2>"$TMP/top.err" 3>&- ||
	fail "top exited $?: $(cat "$TMP/top.err")"
line=$(grep -o 'rss [^)]*)' "$TMP/frames" | tail -n1)
[[ $line =~ ^rss\ [0-9.]+[KMG]?\ \(pools\ [0-9.]+[KMG]?,\ other\ [0-9.]+[KMG]?\)$ ]] || fail "top's rss line: '$line'"
ok "top: $line"

# record's summary
"$SPANTRACE" record -q -p $SRV -o /dev/null --summary "$TMP/s.json" --duration 1 2>"$TMP/rec.err" 3>&- ||
	fail "record exited $?: $(cat "$TMP/rec.err")"
r=$(jq ".rss[\"$SRV\"]" "$TMP/s.json")
[ "$r" != null ] || fail "no rss for $SRV in the summary: $(jq -c .rss "$TMP/s.json")"
assert_eq "summary: pools + other = rss" "$(jq .rss_bytes <<<"$r")" "$(jq '.pools_bytes + .other_bytes' <<<"$r")"
reserved=$(jq "[.pools[\"$SRV\"][] | .reserved_bytes] | add" "$TMP/s.json")
assert_eq "summary: pools = the pools' reserved bytes (they fit in RSS)" "$reserved" "$(jq .pools_bytes <<<"$r")"
rss=$(rss_now)
assert_between "summary: rss within 10% of /proc now" $((rss * 9 / 10)) "$(jq .rss_bytes <<<"$r")" $((rss * 11 / 10))

# Prometheus
"$SPANTRACE" daemon -p $SRV --listen 127.0.0.1:0 --interval 0.2 >"$TMP/daemon.log" 2>&1 3>&- &
DPID=$!
wait_for grep -q 'metrics at http' "$TMP/daemon.log" || fail "daemon did not start: $(cat "$TMP/daemon.log")"
DPORT=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")
has_rss() { metrics >"$TMP/m.txt" && [ "$(msum "$TMP/m.txt" spantrace_process_resident_bytes "pid=\"$SRV\"" 'part="pools"')" -gt 0 ]; }
wait_long has_rss || fail "no spantrace_process_resident_bytes for $SRV: $(grep resident "$TMP/m.txt")"
pools=$(msum "$TMP/m.txt" spantrace_process_resident_bytes "pid=\"$SRV\"" 'part="pools"')
other=$(msum "$TMP/m.txt" spantrace_process_resident_bytes "pid=\"$SRV\"" 'part="other"')
assert_eq "prometheus: part=pools = spantrace_pool_reserved_bytes" \
	"$(msum "$TMP/m.txt" spantrace_pool_reserved_bytes "pid=\"$SRV\"")" "$pools"
rss=$(rss_now)
assert_between "prometheus: pools + other within 10% of /proc's RSS" $((rss * 9 / 10)) "$((pools + other))" $((rss * 11 / 10))
stop_daemon
exec 3>&-
wait $SRV || fail "engine exited $?"
