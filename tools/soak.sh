#!/usr/bin/env bash
# tools/soak.sh - the soak bench (`make soak`): SOAK_SECONDS (default 600) of
# `infer --serve` traffic under both long-running tracer modes at once, each on
# its own engine:
#   record  `spantrace record -p PID` (detail level, JSONL to a file)
#   daemon  `spantrace daemon --binary infer -p PID`, /metrics scraped each sample
# Every SOAK_INTERVAL seconds (default 10) it samples each tracer's VmRSS
# (/proc/PID/status) and open fds (/proc/PID/fd), prints the curve, and ends
# with PASS/FAIL per tracer for "RSS flat within 1 MB after the warm-up
# (SOAK_WARMUP seconds, default 60) and no fd growth", plus the record
# summary's loss accounting. Exit 0 only when both pass.
#
#   SOAK_SECONDS=120 tools/soak.sh         a short check
#   BUILD=build-x tools/soak.sh            another build directory
#   SOAK_KEEP=1                            keep the work directory
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
SECONDS_TOTAL=${SOAK_SECONDS:-600}
INTERVAL=${SOAK_INTERVAL:-10}
WARMUP=${SOAK_WARMUP:-60}
RSS_SLACK_KB=1024
INFER=$BUILD/infer
SPANTRACE=$BUILD/spantrace
MODEL=$BUILD/models/demo15M.bin
TOK=$BUILD/models/demo_tokenizer.bin

die() { echo "soak: $*" >&2; exit 2; }
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_uint "$SECONDS_TOTAL" && is_uint "$INTERVAL" && is_uint "$WARMUP" && [ "$INTERVAL" -gt 0 ] ||
	die "SOAK_SECONDS, SOAK_INTERVAL and SOAK_WARMUP must be whole seconds (INTERVAL > 0)"
[ "$WARMUP" -lt "$SECONDS_TOTAL" ] || die "SOAK_WARMUP ($WARMUP s) must be shorter than SOAK_SECONDS ($SECONDS_TOTAL s)"
for f in "$INFER" "$SPANTRACE"; do [ -x "$f" ] || die "no $f (make all)"; done
for f in "$MODEL" "$TOK"; do [ -r "$f" ] || die "no $f (make models)"; done
[ "$(id -u)" = 0 ] || die "needs root (CAP_BPF and CAP_PERFMON)"
command -v curl >/dev/null || die "needs curl"

WORK=$(mktemp -d /tmp/spantrace-soak.XXXXXX)
cleanup() {
	jobs -p | xargs -r kill 2>/dev/null
	wait 2>/dev/null
	[ "${SOAK_KEEP:-0}" = 1 ] && echo "soak: kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

# feeder NAME: starts an engine in --serve mode and keeps it busy until
# $WORK/stop appears: one prompt, wait for its reply, the next. Writes the
# engine's pid to $WORK/NAME.pid and the replies so far to $WORK/NAME.count.
start_feeder() {
	local name=$1
	OMP_NUM_THREADS=1 /usr/bin/python3 - "$INFER" "$MODEL" "$TOK" "$WORK" "$name" <<'PY' 2>"$WORK/$name.feeder.err" &
import os, subprocess, sys
infer, model, tok, work, name = sys.argv[1:]
prompts = ["once upon a time", "the little dog", "one day a girl", "there was a big tree"]
eng = subprocess.Popen([infer, model, "-z", tok, "--serve", "-n", "8", "-b", "cpu", "-t", "0"],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True, bufsize=1)
open(os.path.join(work, name + ".pid"), "w").write("%d\n" % eng.pid)
n = 0
while not os.path.exists(os.path.join(work, "stop")):
    eng.stdin.write(prompts[n % len(prompts)] + "\n")
    if not eng.stdout.readline():
        sys.exit("engine %d closed its output after %d replies" % (eng.pid, n))
    n += 1
    if n % 16 == 0:
        open(os.path.join(work, name + ".count"), "w").write("%d\n" % n)
open(os.path.join(work, name + ".count"), "w").write("%d\n" % n)
eng.stdin.close()
sys.exit(eng.wait())
PY
	FEEDERS+=($!)
}

wait_file() { # FILE SECONDS
	local i
	for i in $(seq $(($2 * 10))); do [ -s "$1" ] && return 0; sleep 0.1; done
	return 1
}

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
count() { cat "$WORK/$1.count" 2>/dev/null || echo 0; }

FEEDERS=()
start_feeder rec
start_feeder dmn
wait_file "$WORK/rec.pid" 30 && wait_file "$WORK/dmn.pid" 30 || die "the engines did not start"
EREC=$(cat "$WORK/rec.pid") EDMN=$(cat "$WORK/dmn.pid")

"$SPANTRACE" record -q -p "$EREC" -o "$WORK/t.jsonl" --summary "$WORK/s.json" 2>"$WORK/record.err" &
REC=$!
mkdir "$WORK/tail"
"$SPANTRACE" daemon --binary "$INFER" -p "$EDMN" --listen 127.0.0.1:0 --jsonl-dir "$WORK/tail" \
	--interval 1 >"$WORK/daemon.log" 2>&1 &
DMN=$!
wait_file "$WORK/t.jsonl" 30 || die "record did not attach: $(cat "$WORK/record.err")"
for i in $(seq 300); do grep -q 'metrics at http' "$WORK/daemon.log" && break; sleep 0.1; done
PORT=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$WORK/daemon.log")
[ -n "$PORT" ] || die "daemon did not start: $(cat "$WORK/daemon.log")"

echo "soak: ${SECONDS_TOTAL}s, sample every ${INTERVAL}s, warm-up ${WARMUP}s; engines $EREC (record) and $EDMN (daemon)"
echo "soak: record pid $REC, daemon pid $DMN (http://127.0.0.1:$PORT/metrics); work dir $WORK"
printf '%6s %12s %8s %12s %8s %9s %9s\n' t_s rec_rss_kb rec_fds dmn_rss_kb dmn_fds rec_reqs dmn_reqs | tee "$WORK/curve.txt"
start=$(date +%s)
while :; do
	t=$(($(date +%s) - start))
	kill -0 $REC 2>/dev/null || die "record died at ${t}s: $(tail -n 3 "$WORK/record.err")"
	kill -0 $DMN 2>/dev/null || die "daemon died at ${t}s: $(tail -n 3 "$WORK/daemon.log")"
	curl -sf "http://127.0.0.1:$PORT/metrics" >/dev/null || echo "soak: /metrics scrape failed at ${t}s" >&2
	printf '%6d %12d %8d %12d %8d %9d %9d\n' "$t" "$(rss_kb $REC)" "$(fds $REC)" "$(rss_kb $DMN)" "$(fds $DMN)" \
		"$(count rec)" "$(count dmn)" | tee -a "$WORK/curve.txt"
	[ "$t" -ge "$SECONDS_TOTAL" ] && break
	# sample on a fixed grid: start + k * INTERVAL
	next=$(((t / INTERVAL + 1) * INTERVAL))
	[ "$next" -gt "$SECONDS_TOTAL" ] && next=$SECONDS_TOTAL
	sleep $((start + next - $(date +%s)))
done

# Stop: the tracers first (their summaries), then the traffic.
kill -INT $REC
wait $REC
rec_rc=$?
kill -TERM $DMN
wait $DMN
dmn_rc=$?
touch "$WORK/stop"
for f in "${FEEDERS[@]}"; do wait "$f" || echo "soak: a feeder failed: $(cat "$WORK"/*.feeder.err)" >&2; done

# verdict COLUMN_RSS COLUMN_FDS NAME: judged on the samples after the warm-up.
verdict() {
	awk -v w="$WARMUP" -v slack="$RSS_SLACK_KB" -v r="$1" -v f="$2" -v name="$3" '
		NR > 1 && $1 >= w {
			if (n == 0) { lo = hi = $r; fd0 = $f; fdmax = $f }
			if ($r < lo) lo = $r
			if ($r > hi) hi = $r
			if ($f > fdmax) fdmax = $f
			n++
		}
		END {
			if (n < 2) { printf "%s: FAIL (only %d samples after the warm-up)\n", name, n; exit 1 }
			ok = (hi - lo <= slack) && (fdmax <= fd0)
			printf "%s: %s  RSS %d..%d kB after warm-up (spread %d kB, limit %d), fds %d -> max %d, %d samples\n",
				name, ok ? "PASS" : "FAIL", lo, hi, hi - lo, slack, fd0, fdmax, n
			exit !ok
		}' "$WORK/curve.txt"
}
status=0
verdict 2 3 record || status=1
verdict 4 5 daemon || status=1
[ $rec_rc = 0 ] || { echo "record: FAIL  exit status $rec_rc on SIGINT: $(tail -n 2 "$WORK/record.err")"; status=1; }
[ $dmn_rc = 0 ] || { echo "daemon: FAIL  exit status $dmn_rc on SIGTERM"; status=1; }
if [ -s "$WORK/s.json" ] && command -v jq >/dev/null; then
	echo "record summary: $(jq -r '"\(.requests) requests, \(.loss.fired) events fired, \(.loss.delivered) delivered, \(.loss.dropped) dropped, balanced \(.loss.balanced)"' "$WORK/s.json"); JSONL $(du -h "$WORK/t.jsonl" | cut -f1)"
	[ "$(jq .loss.balanced "$WORK/s.json")" = true ] || { echo "record: FAIL  loss accounting unbalanced"; status=1; }
fi
echo "engines served: record $(count rec) requests, daemon $(count dmn) requests"
[ $status = 0 ] && echo "soak: PASS" || echo "soak: FAIL"
exit $status
