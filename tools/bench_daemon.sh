#!/usr/bin/env bash
# tools/bench_daemon.sh - what always-on tracing costs the engine, and what a
# Prometheus scrape costs the daemon.
#
#  1. decode tok/s of the stories15M-shaped demo model (REQUESTS greedy
#     requests of TOKENS tokens each, one `infer --serve`), rounds interleaving
#     untraced / under `spantrace daemon --binary build/infer` (default level)
#     / under `spantrace record --level detail`; medians and ratios. Every
#     traced run must show up in the tracer with the engine's token count.
#     Because those ratios drown in the machine's noise, they are also
#     estimated from counts: the engine's own probe hits per token (--stats)
#     times the tracer's per-hit cost (TRACER_KERNEL_HIT_NS /
#     TRACER_STREAM_HIT_NS, which tools/bench.sh takes from the tracer section).
#  2. 100 idle `infer --serve` processes (stories260K, one request each) under
#     one daemon: /metrics latency (curl time_total, median of SCRAPES) and
#     the daemon's RSS.
#
#   tools/bench_daemon.sh        (root)
#   ROUNDS=10 TOKENS=256 REQUESTS=4 SERVERS=100 SCRAPES=20 BUILD=build tools/bench_daemon.sh
export BENCH_NAME=bench_daemon
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
TOKENS=${TOKENS:-256}
REQUESTS=${REQUESTS:-4}
SERVERS=${SERVERS:-100}
SCRAPES=${SCRAPES:-20}
INTERVAL=1  # the daemon's map-read interval: shorter than the default 5 s so runs show up fast

[ "$(id -u)" = 0 ] || skipped "needs root to load BPF programs"
command -v curl >/dev/null || skipped "curl not installed"
command -v jq >/dev/null || skipped "jq not installed"
need_built "$INFER" "$SPANTRACE"
[ -r "$DEMO_MODEL" ] || die "no $DEMO_MODEL: run make models first"

DPID=
SERVER_PIDS=()
bench_cleanup_hook() {
	[ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null
	[ ${#SERVER_PIDS[@]} -gt 0 ] && kill "${SERVER_PIDS[@]}" 2>/dev/null
	return 0
}

# start_daemon LOG: a daemon on a free loopback port; sets DPID and DPORT.
start_daemon() {
	"$SPANTRACE" daemon --binary "$INFER" --listen 127.0.0.1:0 --interval "$INTERVAL" >"$1" 2>&1 &
	DPID=$!
	wait_until 30 grep -qs 'metrics at http' "$1" || die "daemon did not start: $(tail -n3 "$1")"
	DPORT=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$1")
	[ -n "$DPORT" ] || die "no port in the daemon's log: $(cat "$1")"
	sleep 1  # always-on means steady state: let start-up work finish before timing
}

stop_daemon() {
	kill -TERM "$DPID"
	wait "$DPID" || die "daemon exited with status $? on SIGTERM"
	DPID=
}

scrape() { curl -sf --max-time 10 "http://127.0.0.1:$DPORT/metrics" -o "$1"; }

# metric_sum FILE NAME PID: sum of NAME's samples for pid PID.
metric_sum() {
	awk -v n="$2" -v p="pid=\"$3\"" 'index($0, n "{") == 1 && index($0, p) { s += $NF } END { printf "%d\n", s }' "$1"
}

# ---- 1. decode tok/s: untraced / daemon / record --level detail ----
BACKEND=$(engine_backend "$DEMO_MODEL")
echo "engine backend: $BACKEND$([ "$BACKEND" = cpu ] && echo " (the default, opencl, does not run here)")"
ENGINE=("$INFER" "$DEMO_MODEL" -b "$BACKEND" -n "$TOKENS" -t 0 --ids --serve)
make_requests "$TMP/requests" "$REQUESTS"

# hits_per_token STATS LEVEL: probe hits per generated token that a tracer at
# LEVEL sees; coarse leaves op_begin/op_end/cl_batch unattached.
hits_per_token() {
	jq -r --arg level "$2" '.probes as $p
		| (if $level == "coarse" then $p | del(.op_begin, .op_end, .cl_batch) else $p end)
		| ([.[]] | add) / $tokens' --argjson tokens "$(jq .tokens "$1")" "$1"
}

# engine ERRFILE: one decode run of the demo model, in the background; sets EPID.
engine() {
	"${ENGINE[@]}" <"$TMP/requests" >/dev/null 2>"$1" &
	EPID=$!
}


run_untraced() {
	engine "$TMP/u$1.err"
	wait_deadline "$EPID" 300 || die "engine failed: $(tail -n1 "$TMP/u$1.err")"
	tok_s "$TMP/u$1.err" >>"$TMP/untraced"
}

# The daemon must have counted exactly the tokens the engine reported.
run_daemon() {
	local err=$TMP/d$1.err n
	start_daemon "$TMP/daemon$1.log"
	engine "$err"
	wait_deadline "$EPID" 300 || die "engine failed under the daemon: $(tail -n1 "$err")"
	n=$(tok_n "$err")
	daemon_has_tokens() { scrape "$TMP/m.txt" && [ "$(metric_sum "$TMP/m.txt" spantrace_tokens_total "$EPID")" = "$n" ]; }
	wait_until 15 daemon_has_tokens ||
		die "daemon shows $(metric_sum "$TMP/m.txt" spantrace_tokens_total "$EPID") tokens for pid $EPID, engine says $n"
	stop_daemon
	tok_s "$err" >>"$TMP/daemon"
}

# record's summary must agree with the engine's token count; drops are summed.
run_record() {
	local err=$TMP/r$1.err sum=$TMP/r$1.json n
	timeout 300 "$SPANTRACE" record -q --level detail -o /dev/null --summary "$sum" -- \
		"${ENGINE[@]}" <"$TMP/requests" >/dev/null 2>"$err" ||
		die "record failed: $(tail -n2 "$err")"
	n=$(tok_n "$err")
	[ "$(jq -r .tokens_generated "$sum")" = "$n" ] ||
		die "record counted $(jq -r .tokens_generated "$sum") tokens, engine says $n"
	jq -r .dropped "$sum" >>"$TMP/record_drops"
	tok_s "$err" >>"$TMP/record"
}

: >"$TMP/untraced"; : >"$TMP/daemon"; : >"$TMP/record"; : >"$TMP/record_drops"
for r in $(seq "$ROUNDS"); do
	# alternate the order so drift in the machine's load favours no variant
	if [ $((r % 2)) = 1 ]; then
		run_untraced "$r"; run_daemon "$r"; run_record "$r"
	else
		run_record "$r"; run_daemon "$r"; run_untraced "$r"
	fi
	echo "round $r/$ROUNDS: untraced $(tail -n1 "$TMP/untraced")  daemon $(tail -n1 "$TMP/daemon")  record detail $(tail -n1 "$TMP/record") tok/s" >&2
done
untraced=$(median <"$TMP/untraced")
daemon=$(median <"$TMP/daemon")
record=$(median <"$TMP/record")
drops=$(awk '{ s += $1 } END { print s + 0 }' "$TMP/record_drops")
echo "decode tok/s, $BACKEND, $REQUESTS requests x $TOKENS tokens a run, median of $ROUNDS interleaved rounds:"
echo "  untraced                   $untraced"
echo "  spantrace daemon (coarse)  $daemon   (tokens counted = engine's, every run)"
echo "  spantrace record detail    $record   (tokens counted = engine's; events dropped in all runs: $drops)"
echo "ratios: median over rounds of traced / the same round's untraced (cancels slow drift in load)"
echo "  per-round daemon/untraced: $(paired_list "$TMP/daemon" "$TMP/untraced")"
echo "  per-round record/untraced: $(paired_list "$TMP/record" "$TMP/untraced")"
ratio daemon_decode_over_untraced "$(paired_ratio "$TMP/daemon" "$TMP/untraced")" ">=0.99"
ratio record_detail_decode_over_untraced "$(paired_ratio "$TMP/record" "$TMP/untraced")" ">=0.95"
# One more untraced run, with the engine's own probe counters.
"${ENGINE[@]}" --stats "$TMP/stats.json" <"$TMP/requests" >/dev/null 2>&1 || die "engine --stats run failed"
coarse_hits=$(hits_per_token "$TMP/stats.json" coarse)
detail_hits=$(hits_per_token "$TMP/stats.json" detail)
daemon_est=$(expected_ratio "$coarse_hits" "${TRACER_KERNEL_HIT_NS:-}" "$untraced")
record_est=$(expected_ratio "$detail_hits" "${TRACER_STREAM_HIT_NS:-}" "$untraced")
printf 'probe hits per token (engine --stats): coarse %.1f, detail %.1f\n' "$coarse_hits" "$detail_hits"
echo "  expected from hits x per-hit cost: daemon $daemon_est (at ${TRACER_KERNEL_HIT_NS:-n/a} ns/hit)," \
	"record detail $record_est (at ${TRACER_STREAM_HIT_NS:-n/a} ns/hit)"
ratio daemon_expected_from_hit_counts "$daemon_est" ">=0.99"
ratio record_detail_expected_from_hit_counts "$record_est" ">=0.95"

# ---- 2. /metrics latency with SERVERS pids' worth of series ----
SMALL_MODEL=$MODELS/stories260K.bin
if [ ! -r "$SMALL_MODEL" ]; then
	echo "scrape latency: skipped: no $SMALL_MODEL"
	exit 0
fi
start_daemon "$TMP/daemon_scrape.log"
FIFO_FDS=()
for i in $(seq "$SERVERS"); do
	mkfifo "$TMP/in$i"
	OMP_NUM_THREADS=1 "$INFER" "$SMALL_MODEL" -b cpu --threads 1 --ids --serve -n 16 -t 0 \
		<"$TMP/in$i" >"$TMP/out$i" 2>"$TMP/serr$i" &
	SERVER_PIDS+=($!)
	exec {fd}>"$TMP/in$i"  # held open: the server idles after its request
	FIFO_FDS+=("$fd")
	echo "" >&"$fd"        # one request: BOS prompt
done
all_answered() {
	local i
	for i in $(seq "$SERVERS"); do [ "$(wc -l <"$TMP/out$i")" -ge 1 ] || return 1; done
}
wait_until 120 all_answered || die "not every serve process answered its request"
# Every server's request must be in the metrics before we time scrapes.
all_seen() {
	scrape "$TMP/m.txt" || return 1
	local seen
	seen=$(grep '^spantrace_requests_total{' "$TMP/m.txt" | grep -o 'pid="[0-9]*"' | sort -u | wc -l)
	[ "$seen" -ge "$SERVERS" ]
}
wait_until 30 all_seen || die "daemon shows requests for fewer than $SERVERS pids"
series=$(grep -vc '^#' "$TMP/m.txt")
bytes=$(stat -c %s "$TMP/m.txt")
for s in $(seq "$SCRAPES"); do
	curl -sf --max-time 10 -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$DPORT/metrics" ||
		die "scrape $s failed"
done | awk '{ print $1 * 1000 }' >"$TMP/scrape_ms"
scrape_ms=$(median <"$TMP/scrape_ms" | awk '{ printf "%.1f\n", $1 }')
rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$DPID/status")
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$DPID/status")
for fd in "${FIFO_FDS[@]}"; do exec {fd}>&-; done  # EOF: the servers exit
for p in "${SERVER_PIDS[@]}"; do wait_deadline "$p" 10 || echo "bench_daemon: a serve process exited with status $?" >&2; done
SERVER_PIDS=()
stop_daemon
echo "/metrics with $SERVERS idle serve processes: $series series, $bytes bytes; scrape $scrape_ms ms (median of $SCRAPES)"
echo "daemon RSS: $rss kB (peak $hwm kB)"
ratio "scrape_ms_${SERVERS}_pids" "$scrape_ms" info
ratio "daemon_rss_kb_${SERVERS}_pids" "$rss" info
