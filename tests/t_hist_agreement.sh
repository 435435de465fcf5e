#!/usr/bin/env bash
# t_hist_agreement.sh - one engine run, three tracers at once: `record`
# (summary, exact nearest-rank), `top -b` (its window histogram) and the
# daemon scraped by a real Prometheus (histogram_quantile over the kernel's
# buckets). Their p50/p95/p99 of the same spans agree within the histogram's
# stated bound (docs/histograms.md: 12.5%), and top's and PromQL's estimates,
# read off the same buckets (bpf/hist.h's; each session counts its own),
# lie within one bucket of each other. Also counts the daemon's
# series per process, which must stay under the stated cap (and above what
# the forward and layer histograms alone take).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_daemon_build
need_cmd prometheus prometheus
[ -x "$MKMODEL" ] || fail "no $MKMODEL (build first)"
if [ ! -r "$DEMO_MODEL" ]; then
	mkdir -p "$(dirname "$DEMO_MODEL")"
	"$MKMODEL" "$DEMO_MODEL" --shape stories15M --seed 1 --tokenizer "$DEMO_TOK" >/dev/null ||
		fail "cannot make $DEMO_MODEL"
fi
BOUND=${BOUND:-0.125}        # docs/histograms.md: relative error of a histogram estimate
# docs/histograms.md: a histogram series has 8 edges per power of two its kind spans, so
# the count per process follows the spread of the durations (245-372 here on
# a quiet machine); 1000 is the ceiling we promise for one coarse process.
SERIES_CAP=${SERIES_CAP:-1000}

# The engine waits on a fifo until every tracer is attached.
mkfifo "$TMP/in"
exec 3<>"$TMP/in"
"$INFER" "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --serve -n 96 -t 0 --stats "$TMP/stats.json" \
	<"$TMP/in" >"$TMP/engine.out" 2>"$TMP/engine.err" 3>&- &
epid=$!

start_daemon --level coarse -p "$epid" 3>&-
"$SPANTRACE" record -q -p "$epid" --level coarse --summary "$TMP/summary.json" -o "$TMP/run.jsonl" \
	2>"$TMP/record.err" 3>&- &
rec=$!
"$SPANTRACE" top -v -b -d 60 -w 120 -p "$epid" --level coarse >"$TMP/frames" 2>"$TMP/top.err" 3>&- &
top=$!
wait_for grep -qs '"type":"session"' "$TMP/run.jsonl" || fail "record did not attach: $(cat "$TMP/record.err")"
wait_for grep -qs "attached to" "$TMP/top.err" || fail "top did not attach: $(cat "$TMP/top.err")"

PPORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$TMP/prom.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: spantrace
    static_configs:
      - targets: ['127.0.0.1:$DPORT']
YML
prometheus --config.file="$TMP/prom.yml" --storage.tsdb.path="$TMP/tsdb" \
	--web.listen-address="127.0.0.1:$PPORT" > "$TMP/prometheus.log" 2>&1 3>&- &
wait_long curl -sf "http://127.0.0.1:$PPORT/-/ready" -o /dev/null || fail "prometheus did not start"

for p in "once upon a time" "the little dog" "a big red ball" "she went home"; do echo "$p" >&3; done
exec 3>&-
wait "$epid" || fail "engine exited $?: $(cat "$TMP/engine.err")"
wait "$rec" || fail "record exited $?: $(cat "$TMP/record.err")"
wait "$top" || fail "top exited $?: $(cat "$TMP/top.err")"
forwards=$(jq -r .spans.forward.count "$TMP/stats.json")
assert_eq "record saw every forward pass" "$forwards" "$(jq -r .spans.forward.count "$TMP/summary.json")"

query() {
	curl -sf "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1" |
		jq -r '.data.result[0].value[1] // empty'
}
count_q='sum(spantrace_span_duration_seconds_count{span="forward",pid="'$epid'"})'
scraped() { [ "$(query "$count_q")" = "$forwards" ]; }
wait_long scraped || fail "Prometheus never saw $forwards forward spans (has '$(query "$count_q")')"
metrics >"$TMP/m.txt" || fail "no /metrics from the daemon"

# top's last frame: the row's P50/P95/P99 cells (columns 6..8 after the name).
awk '/^spantrace top/ { n++ } { print > ("'"$TMP"'/frame." n) }' "$TMP/frames"
last=$(ls "$TMP"/frame.* | sort -t. -k2 -n | tail -1)
top_ns() {  # ROW COLUMN(1=P50,2=P95,3=P99) -> ns
	awk -v want="$1" -v col="$2" '{ line = $0; sub(/^ *[-+]? */, "", line)
		if (index(line, want " ") != 1) next
		n = split(substr(line, length(want) + 1), f, " ")
		v = f[4 + col]; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
		m = u == "ns" ? 1 : u == "us" ? 1e3 : u == "ms" ? 1e6 : 1e9
		printf "%.0f\n", v * m; exit }' "$last"
}

# close NAME REF_NS X_NS BOUND WHAT: |X - REF| <= BOUND * REF, plus 1% for
# top's 3-digit cells and 2 us for the sessions' own clock reads.
close() {
	need_num "$1" "$2" "$3"
	awk -v e="$2" -v x="$3" -v b="$4" 'BEGIN { d = x - e; if (d < 0) d = -d
		exit !(d <= b * e + 0.01 * e + 2000) }' ||
		fail "$1: $3 ns is not within $4 of $5 $2 ns"
	ok "$1: $3 ns vs $5 $2 ns ($(awk -v e="$2" -v x="$3" 'BEGIN { printf "%+.2f%%", (x - e) * 100 / e }'))"
}
# within NAME EXACT_NS ESTIMATE_NS: an estimate against the exact value.
within() { close "$1" "$2" "$3" "$BOUND" exact; }
# agree NAME PROMQL_NS TOP_NS: top and PromQL read their percentiles off the
# same buckets, each session counting the same spans. Only a span within the
# sessions' clock-read difference (~1 us) of an edge can land in the
# neighbouring bucket in one of them, so their estimates lie at most one
# bucket apart (PAIR_BOUND, 12.5%: where the exact value allows 25% between
# them). Measured: 1.3% apart at most.
PAIR_BOUND=${PAIR_BOUND:-0.125}
agree() { close "$1" "$2" "$3" "$PAIR_BOUND" "PromQL's"; }
for span in forward layer; do
	row=$span; [ $span = layer ] && row="layers ($(jq .model.n_layers "$TMP/stats.json"))"
	col=0
	for q in 50 95 99; do
		col=$((col + 1))
		exact=$(jq -r ".spans.$span.p${q}_ns" "$TMP/summary.json")
		[ "$(jq -r ".spans.$span.exact" "$TMP/summary.json")" = true ] || fail "summary $span not exact"
		prom_s=$(query "histogram_quantile(0.$q, sum by (le) (spantrace_span_duration_seconds_bucket{span=\"$span\",pid=\"$epid\"}))")
		[ -n "$prom_s" ] || fail "no PromQL p$q for $span"
		prom_ns=$(awk -v s="$prom_s" 'BEGIN { printf "%.0f\n", s * 1e9 }')
		tns=$(top_ns "$row" $col)
		[ -n "$tns" ] || fail "no $row row in top's last frame: $(cat "$last")"
		within "$span p$q PromQL" "$exact" "$prom_ns"
		within "$span p$q top -b" "$exact" "$tns"
		agree "$span p$q top -b vs PromQL" "$prom_ns" "$tns"
	done
done

series=$(grep -c "pid=\"$epid\"" "$TMP/m.txt")
ok "daemon series for pid $epid: $series"
# at least the forward and per-layer duration histograms' +Inf, _sum and
# _count lines: a count of nothing is not under the cap
assert_between "series per process (coarse)" $((3 * (1 + $(jq .model.n_layers "$TMP/stats.json")))) "$series" "$SERIES_CAP"
stop_daemon
