#!/usr/bin/env bash
# t_daemon_prometheus.sh - a real Prometheus server scrapes the daemon while
# the engine runs twice (a restart under the daemon): per-pid span, token and
# request counters equal the engine's own --stats counts, /metrics passes
# promtool, and PromQL histogram_quantile over the buckets returns a median
# between the log2 bucket edges around the engine's own median; a live
# engine's pool gauges show the weights mapping live and reserved in pages.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_models
need_daemon_build
need_cmd prometheus prometheus
need_cmd promtool prometheus

start_daemon --level coarse

# Prometheus on a free loopback port, scraping every second.
PPORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$TMP/prom.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: spantrace
    static_configs:
      - targets: ['127.0.0.1:$DPORT']
YML
prometheus --config.file="$TMP/prom.yml" --storage.tsdb.path="$TMP/tsdb" \
	--web.listen-address="127.0.0.1:$PPORT" > "$TMP/prometheus.log" 2>&1 &
wait_long curl -sf "http://127.0.0.1:$PPORT/-/ready" -o /dev/null || fail "prometheus did not start"

# Two engine runs: the second is a new process of the same binary.
run_engine "$TMP/stats1.json"; pid1=$EPID
run_engine "$TMP/stats2.json"; pid2=$EPID
expect_tokens=$(jq -r .tokens "$TMP/stats2.json")
assert_pos "engine tokens (run 2)" "$expect_tokens"
has_tokens() { metrics > "$TMP/m.txt" && [ "$(msum "$TMP/m.txt" spantrace_tokens_total "pid=\"$pid2\"")" = "$expect_tokens" ]; }
wait_for has_tokens || fail "daemon never showed pid $pid2's $expect_tokens tokens"

for n in 1 2; do
	if [ $n = 1 ]; then pid=$pid1; else pid=$pid2; fi
	stats=$TMP/stats$n.json
	for kind in forward layer; do
		assert_eq "pid $pid $kind spans (run $n)" "$(stat_count "$stats" $kind)" \
			"$(msum "$TMP/m.txt" spantrace_span_duration_seconds_count "span=\"$kind\"" "pid=\"$pid\"")"
	done
	assert_eq "pid $pid tokens" "$(jq -r .tokens "$stats")" \
		"$(msum "$TMP/m.txt" spantrace_tokens_total "pid=\"$pid\"")"
	assert_eq "pid $pid requests" "$(jq -r .requests "$stats")" \
		"$(msum "$TMP/m.txt" spantrace_requests_total "pid=\"$pid\"")"
done
assert_eq "span events lost" 0 "$(msum "$TMP/m.txt" spantrace_events_dropped_total)"

out=$(promtool check metrics < "$TMP/m.txt" 2>&1) || fail "promtool check metrics: $out"
ok "promtool check metrics accepts the live /metrics"

# PromQL over what Prometheus scraped.
query() {
	curl -sf "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1" \
		| jq -r '.data.result[0].value[1] // empty'
}
# Wait for a scrape taken after the second run ended, then ask PromQL.
count_q='sum(spantrace_span_duration_seconds_count{span="layer",pid="'$pid2'"})'
expect_layers=$(stat_count "$TMP/stats2.json" layer)
scraped() { [ "$(query "$count_q")" = "$expect_layers" ]; }
wait_long scraped || fail "Prometheus never saw pid $pid2's $expect_layers layer spans (has '$(query "$count_q")')"
ok "Prometheus layer span count, pid $pid2 = $expect_layers"
q='histogram_quantile(0.5, sum by (le) (spantrace_span_duration_seconds_bucket{span="forward",pid="'$pid2'"}))'
median_s=$(query "$q")
[ -n "$median_s" ] || fail "no result for $q"
engine_median_ns=$(jq -r .spans.forward.median_ns "$TMP/stats2.json")
ok "PromQL median forward = ${median_s}s, engine median = ${engine_median_ns}ns"
# Prometheus interpolates inside the log2 bucket holding the median. The
# tracer's median lies within 2 us of the engine's (t_trace_counts), so the
# answer lies between the lower edge of the bucket of (median - 2 us) and the
# upper edge of the bucket of (median + 2 us): one bucket, or two when the
# median sits on a power of two.
read -r lo_s hi_s < <(awk -v m="$engine_median_ns" 'BEGIN {
	lo = 1; while (lo * 2 <= m - 2000) lo *= 2
	hi = 1; while (hi <= m + 2000) hi *= 2
	printf "%.9f %.9f\n", lo / 1e9, hi / 1e9 }')
assert_le "PromQL median at or above the lower bucket edge" "$lo_s" "$median_s"
assert_le "PromQL median at or below the upper bucket edge" "$median_s" "$hi_s"
up=$(query 'up{job="spantrace"}')
assert_eq "Prometheus target up" 1 "$up"

# A live engine's pools: the weights mapping is live at its file size and
# reserves whole pages; its heap pools reserve at least what they hold.
mkfifo "$TMP/in"
"$INFER" "$MODELS/stories260K.bin" -b cpu --serve --ids < "$TMP/in" > /dev/null 2>&1 &
srv=$!
exec {hold}>"$TMP/in"   # keeps the server waiting for a prompt
size=$(stat -c %s "$MODELS/stories260K.bin")
page=$(getconf PAGESIZE)
weights_live() { metrics > "$TMP/m.txt" &&
	[ "$(msum "$TMP/m.txt" spantrace_pool_live_bytes 'pool="weights"' "pid=\"$srv\"")" = "$size" ]; }
wait_for weights_live || fail "no live weights pool for pid $srv: $(grep "pid=\"$srv\"" "$TMP/m.txt" | grep pool_ | head -5)"
assert_eq "live weights reserve whole pages" $(( (size + page - 1) / page * page )) \
	"$(msum "$TMP/m.txt" spantrace_pool_reserved_bytes 'pool="weights"' "pid=\"$srv\"")"
for pool in kv_cache activations; do
	live=$(msum "$TMP/m.txt" spantrace_pool_live_bytes "pool=\"$pool\"" "pid=\"$srv\"")
	assert_pos "$pool live bytes for pid $srv" "$live"
	assert_le "$pool: live <= reserved" "$live" "$(msum "$TMP/m.txt" spantrace_pool_reserved_bytes "pool=\"$pool\"" "pid=\"$srv\"")"
done
exec {hold}>&-
wait "$srv" || fail "server exited $? when its input closed"
stop_daemon
