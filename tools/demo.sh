#!/usr/bin/env bash
# make demo: the engine on the generated stories15M-shape model, under the tracer.
# 1. `spantrace record` of one run: JSONL, CSV, metrics and a summary in build/demo/.
# 2. The HTTP engine (infer --http) under 8 concurrent streaming requests from the
#    official OpenAI client, with `spantrace record -p` attached: its per-step forward
#    spans, and the serving probes counted from outside by bpftrace, against the
#    engine's own /stats.
# 3. `spantrace top` on a stream of requests: interactive on a terminal (q quits),
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
echo "== infer --http: 8 concurrent streaming requests (npm openai), traced live =="
if command -v node >/dev/null && [ -d tests/node/node_modules/openai ]; then
	"$B/infer" "$MODEL" -z "$TOK" --http 127.0.0.1:0 2>"$OUT/http.err" &
	http=$!
	for _ in $(seq 100); do grep -q "listening on" "$OUT/http.err" && break; sleep 0.1; done
	base=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$OUT/http.err")
	printf '{"concurrent": true, "requests": [%s]}\n' "$(for i in $(seq 8); do
		printf '%s{"prompt": "Once upon a time %d", "max_tokens": 64, "temperature": 0.8, "seed": %d, "stream": true}' \
			"$([ "$i" = 1 ] || echo ,)" "$i" "$i"; done)" >"$OUT/http-spec.json"
	"$B/spantrace" record -q --level coarse -p "$http" -o "$OUT/http-trace.jsonl" \
		--summary "$OUT/http-summary.json" --duration 8 2>/dev/null &
	rec=$!
	bt=
	if command -v bpftrace >/dev/null; then
		# exit() on an interval, not a SIGINT from outside: bpftrace 0.17 can miss a
		# SIGINT that lands between two of its waits (tests/lib.sh, stop_bpftrace)
		bpftrace -p "$http" -e "
			interval:s:8 { exit(); }
			usdt:$B/libinfer.so:infer:token_emit { @tokens = count(); }
			usdt:$B/libinfer.so:infer:step_end { @steps = count(); @batch = lhist(arg2, 1, 9, 1); }
			usdt:$B/libinfer.so:infer:req_finished { @finish_reason[arg1] = count(); }" >"$OUT/http-bpftrace.txt" 2>/dev/null &
		bt=$!
	fi
	sleep 2 # both attached
	node tests/node/client.js "$base" run "$OUT/http-spec.json" >"$OUT/http-results.jsonl"
	jq -r '"request \(.index): TTFT \(.ttft_ms | floor) ms, \(.usage.completion_tokens) tokens, \(.finish_reason): \(.text[0:50])"' \
		"$OUT/http-results.jsonl" || true
	wait $rec 2>/dev/null || true
	[ -z "$bt" ] || wait "$bt" 2>/dev/null || true
	curl -s "$base/stats" >"$OUT/http-stats.json" || true
	kill -TERM $http; wait $http 2>/dev/null || true
	echo
	echo "engine's own counts: $(jq -c '.serving | {queued, finished, steps, emitted_tokens, max_step_seqs, preempted}' "$OUT/http-stats.json" 2>/dev/null)"
	echo "spantrace record -p (per-step forward spans): $(jq -c '{forward: .spans.forward.count, p50_ms: (.spans.forward.p50_ns / 1e6)}' "$OUT/http-summary.json" 2>/dev/null)"
	[ -z "$bt" ] || { echo "bpftrace on the serving probes (finish_reason 0=stop 1=length):"; grep -v '^$' "$OUT/http-bpftrace.txt" | head -n 20; }
else
	echo "(skipped: no node or npm openai; make deps installs them)"
fi

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
