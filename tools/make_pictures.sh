#!/usr/bin/env bash
# tools/make_pictures.sh - remakes README's pictures in docs/img/:
#   top.png     spantrace top -b on the HTTP engine serving 8 concurrent
#               streams of the openai client (the last of 3 frames)
#   report.png  the report's per-layer heatmap of a detail-level run of the
#               demo model (device clock)
# Needs root (BPF), `make all models` and `make deps` (node, resvg, matplotlib).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
OUT=$ROOT/docs/img
TMP=$(mktemp -d /tmp/spantrace-pictures.XXXXXX)
EPID=
cleanup() { [ -z "$EPID" ] || kill "$EPID" 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
mkdir -p "$OUT"
MODEL=$BUILD/models/demo15M.bin TOK=$BUILD/models/demo_tokenizer.bin

# top on a serving engine
"$BUILD/infer" "$MODEL" -z "$TOK" --max-seqs 8 --http 127.0.0.1:0 2>"$TMP/engine.log" &
EPID=$!
for _ in $(seq 100); do grep -q "listening on" "$TMP/engine.log" && break; sleep 0.1; done
port=$(sed -n 's/.*listening on http:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$TMP/engine.log")
python3 - >"$TMP/spec.json" <<'PY'
import json
print(json.dumps({"concurrent": True, "stagger_ms": 40, "requests": [
    {"prompt": "Once upon a time %d" % i, "max_tokens": 160, "temperature": 0.8, "stream": True}
    for i in range(8)]}))
PY
(for _ in 1 2 3 4; do node "$ROOT/tests/node/client.js" "http://127.0.0.1:$port" run "$TMP/spec.json" >/dev/null; done) &
load=$!
"$BUILD/spantrace" top -b -d 1 -n 3 -p "$EPID" >"$TMP/frames.txt" 2>/dev/null
wait "$load" || true
awk '/^spantrace top/{f=""} {f = f $0 "\n"} END{printf "%s", f}' "$TMP/frames.txt" | cut -c1-110 >"$TMP/frame.txt"
node "$ROOT/tools/text2png.mjs" <"$TMP/frame.txt" >"$OUT/top.png"
kill "$EPID"; wait "$EPID" 2>/dev/null || true; EPID=

# the report's heatmap
"$BUILD/spantrace" record -q --level detail -o "$TMP/run.jsonl" -- "$BUILD/infer" "$MODEL" --ids -n 96 >/dev/null
"$BUILD/spantrace" report "$TMP/run.jsonl" -o "$TMP/report" >/dev/null
cp "$TMP/report/layer_heatmap.png" "$OUT/report.png"
ls -l "$OUT"
