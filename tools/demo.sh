#!/usr/bin/env bash
# make demo: the engine on the generated stories15M-shape model, under the tracer.
# 1. `spantrace record` of one run: JSONL, CSV, metrics and a summary in build/demo/.
# 2. `spantrace top` on a stream of requests: interactive on a terminal (q quits),
#    plain-text intervals (-b) otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
MODEL=$B/models/demo15M.bin TOK=$B/models/demo_tokenizer.bin
OUT=$B/demo
mkdir -p "$OUT"

if [ "$(id -u)" != 0 ]; then
	echo "demo: spantrace needs root (CAP_BPF and CAP_PERFMON); running the engine alone"
	exec "$B/infer" "$MODEL" -z "$TOK" -n 128 -i "Once upon a time"
fi

echo "== spantrace record -- infer (detail level) =="
"$B/spantrace" record --level detail -o "$OUT/trace.jsonl" --csv "$OUT/ops.csv" \
	--metrics "$OUT/metrics.jsonl" --summary "$OUT/summary.json" -- \
	"$B/infer" "$MODEL" -z "$TOK" -n 200 -t 0.8 -s 42 -i "Once upon a time" --stats "$OUT/engine-stats.json"
echo
echo "wrote $OUT/{trace.jsonl,ops.csv,metrics.jsonl,summary.json} (engine's own counts: $OUT/engine-stats.json)"
jq -c '{tokens: .tokens_generated, tok_per_s, total_operations, drops}' "$OUT/summary.json" 2>/dev/null || true

echo
echo "== spantrace top -p PID of a serving engine (attached live, no restart) =="
feed() { for i in $(seq 1 2000); do echo "Once upon a time there was request $i"; sleep 0.05; done; }
feed | "$B/infer" "$MODEL" -z "$TOK" -n 64 --serve >/dev/null 2>"$OUT/serve.err" &
engine=$!
# Stop the engine on the way out, keeping the script's own exit status: the
# feeder then dies of SIGPIPE, and under set -e that status from `wait`
# would end the script with 141.
stop_engine() { local rc=$?; kill $engine 2>/dev/null; wait $engine 2>/dev/null || true; exit $rc; }
trap stop_engine EXIT
sleep 1
if [ -t 0 ] && [ -t 1 ]; then
	echo "(q quits, e expands layers, h for help)"; sleep 1
	"$B/spantrace" top -d 1 -p "$engine"
else
	# 12 s of frames; timeout's 124 is the expected end, anything else a failure
	rc=0
	timeout -s INT 12 "$B/spantrace" top -b -d 3 -p "$engine" || rc=$?
	[ "$rc" = 0 ] || [ "$rc" = 124 ] || exit "$rc"
fi
