#!/usr/bin/env bash
# tools/bench_alwayson.sh - what `spantrace daemon --all-engines` (socket
# requests on, its default) costs a serving engine: SSE events/s delivered to
# 8 continuous streams (tests/node/sse_client.js, counted by the client),
# untraced and under the daemon, in ABBA rounds (untraced, daemon, daemon,
# untraced) repeated ABBA times, on llama-server (-np 8) and on `infer
# --http` (8 seqs), with THREADS engine threads, both on the stories110M shape as
# Q8_0 GGUF. Each ratio is the median over the rounds of each daemon run's
# figure over its neighbouring untraced run's (the machine drifts: runs of
# one mode move by tens of percent between minutes on a shared 2-core VM):
# events/s, and the server's CPU time per event (user + system: what the
# traps and the syscall programs cost it, whatever the scheduler did).
#
#   tools/bench_alwayson.sh          (make llama-server first)
#   ABBA=3 CLIENT_ROUNDS=2 TOKENS=64 tools/bench_alwayson.sh
export BENCH_NAME=bench_alwayson
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
ABBA=${ABBA:-3}
CLIENT_ROUNDS=${CLIENT_ROUNDS:-4}
TOKENS=${TOKENS:-64}
[ "$(id -u)" = 0 ] || skipped "needs root to load BPF programs"
command -v node >/dev/null || skipped "no node (make deps)"
SERVER=$("$ROOT/tools/build_llama_server.sh" --check 2>/dev/null) || skipped "no llama-server (make llama-server)"
need_built "$INFER" "$SPANTRACE" "$BUILD/mkmodel"
# A core stays free for the client and the tracer: on a 2-core machine the
# engine on both swung runs of one mode by 2x (their ratios 0.48..1.97).
THREADS=${THREADS:-$(($(nproc) > 2 ? $(nproc) - 1 : 1))}

SPID= DPID=
bench_cleanup_hook() {
	[ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null
	[ -n "$SPID" ] && kill "$SPID" 2>/dev/null
	return 0
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_server NAME GGUF: sets SPID and PORT once it answers /health.
start_server() {
	PORT=$(free_port)
	if [ "$1" = llama-server ]; then
		"$SERVER" -m "$2" -c 4096 -np 8 -t "$THREADS" --host 127.0.0.1 --port "$PORT" >"$TMP/server.log" 2>&1 &
	else
		"$INFER" "$2" --max-seqs 8 --threads "$THREADS" --http "127.0.0.1:$PORT" 2>"$TMP/server.log" &
	fi
	SPID=$!
	wait_until 120 curl -sf -o /dev/null "http://127.0.0.1:$PORT/health" || die "$1 did not start: $(tail -n 3 "$TMP/server.log")"
}

start_daemon() {
	"$SPANTRACE" daemon --all-engines --listen 127.0.0.1:0 >"$TMP/daemon.log" 2>&1 &
	DPID=$!
	wait_until 60 grep -q 'metrics at http' "$TMP/daemon.log" || die "daemon did not start: $(cat "$TMP/daemon.log")"
	grep -q "engine pid $SPID" "$TMP/daemon.log" || die "the daemon did not find pid $SPID: $(cat "$TMP/daemon.log")"
}

stop_daemon() {
	kill -TERM "$DPID"
	wait "$DPID" || die "daemon exited $?"
	DPID=
}

# cpu_ticks PID: its user + system time so far, in clock ticks (traps and
# the BPF programs that run in its syscalls are charged to it)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# one_run: 8 streams x CLIENT_ROUNDS of TOKENS tokens; prints the client's
# SSE events over the wall time the rounds took, and the server's CPU
# milliseconds per event (the cost the machine's noise does not swing).
one_run() {
	local t0 t1 c0 c1
	c0=$(cpu_ticks "$SPID") t0=$(date +%s%N)
	CLIENT_KEEPALIVE=0 node "$ROOT/tests/node/sse_client.js" "http://127.0.0.1:$PORT" 8 "$CLIENT_ROUNDS" "$TOKENS" \
		>"$TMP/client.jsonl" 2>"$TMP/client.err" || die "client: $(cat "$TMP/client.err")"
	t1=$(date +%s%N) c1=$(cpu_ticks "$SPID")
	jq -rs --argjson ns $((t1 - t0)) --argjson ticks $((c1 - c0)) --argjson hz "$(getconf CLK_TCK)" \
		'(map(.events) | add) as $e | "\($e / ($ns / 1e9)) \($ticks / $hz * 1000 / $e)"' "$TMP/client.jsonl"
}

make_s110m "$TMP/m" q8_0
echo "always-on cost: daemon --all-engines (socket requests on), 8 continuous streams of $TOKENS tokens x $CLIENT_ROUNDS rounds,"
echo "stories110M shape Q8_0, $THREADS threads; ABBA x $ABBA; CPU: $(cpu_model)"
for server in llama-server infer; do
	name=${server/-/_}
	start_server "$server" "$TMP/m_q8_0.gguf"
	CLIENT_KEEPALIVE=0 node "$ROOT/tests/node/sse_client.js" "http://127.0.0.1:$PORT" 8 1 8 >/dev/null 2>&1 # warm
	: >"$TMP/off" && : >"$TMP/on" && : >"$TMP/off.cpu" && : >"$TMP/on.cpu"
	for ((r = 0; r < ABBA; r++)); do
		for mode in off on on off; do
			[ "$mode" = on ] && start_daemon
			read -r v cpu <<<"$(one_run)"
			[ "$mode" = on ] && stop_daemon
			echo "$v" >>"$TMP/$mode"
			echo "$cpu" >>"$TMP/$mode.cpu"
			echo "  $server $mode: $v events/s, $cpu server CPU ms/event"
		done
	done
	echo "$server: untraced $(tr '\n' ' ' <"$TMP/off")events/s; daemon $(tr '\n' ' ' <"$TMP/on")events/s;" \
		"ratios $(paired_list "$TMP/on" "$TMP/off"); CPU/event ratios $(paired_list "$TMP/on.cpu" "$TMP/off.cpu")"
	ratio "alwayson_${name}_events" "$(paired_ratio "$TMP/on" "$TMP/off")" ">=0.99"
	ratio "alwayson_${name}_cpu_per_event" "$(paired_ratio "$TMP/on.cpu" "$TMP/off.cpu")" "<=1.01"
	kill "$SPID"
	wait "$SPID" 2>/dev/null
	SPID=
done
