#!/usr/bin/env bash
# t_demo.sh - `make demo`'s script (tools/demo.sh) without a terminal: it
# exits 0, its record run's summary counts the tokens the engine counted,
# the HTTP engine's 8 streamed completions are counted alike by the engine
# and bpftrace, and `top -b` on the serving engine prints frames with
# forward rows.
source "$(dirname "$0")/lib.sh"
need_bpf
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"
need_cmd jq jq
need_cmd bpftrace bpftrace
need_cmd node nodejs
[ -d "$ROOT/tests/node/node_modules/openai" ] || fail "no npm openai package in tests/node: make deps installs it"

D=$BUILD/demo
rm -rf "$D"   # a previous run's files must not stand in for this one's
rc=0
BUILD=$BUILD timeout 120 "$ROOT/tools/demo.sh" </dev/null >"$TMP/out" 2>"$TMP/err" || rc=$?
assert_eq "demo exit status" 0 "$rc"
for f in trace.jsonl ops.csv metrics.jsonl summary.json engine-stats.json; do
	[ -s "$D/$f" ] || fail "demo did not write $D/$f"
done
# Each comparison needs the engine's figure: two missing fields would agree.
tokens=$(jq .tokens "$D/engine-stats.json")
assert_pos "engine's tokens" "$tokens"
assert_eq "record summary tokens = engine's" "$tokens" "$(jq .tokens_generated "$D/summary.json")"
assert_eq "record dropped nothing" 0 "$(jq .loss.dropped "$D/summary.json")"
# the HTTP part: 8 streamed completions, counted alike by the engine and bpftrace
assert_eq "demo: HTTP completions" 8 "$(jq -s '[.[] | select(.finish_reason)] | length' "$D/http-results.jsonl")"
emitted=$(jq .serving.emitted_tokens "$D/http-stats.json")
assert_pos "demo: engine's emitted tokens" "$emitted"
assert_eq "demo: the completions' usage = engine's emitted tokens" "$emitted" \
	"$(jq -s '[.[].usage.completion_tokens] | add' "$D/http-results.jsonl")"
assert_eq "demo: bpftrace token_emit count = engine's" "$emitted" \
	"$(awk '$1 == "@tokens:" { print $2 }' "$D/http-bpftrace.txt")"
frames=$(grep -c '^spantrace top' "$TMP/out")
assert_le "top frames printed" 2 "$frames"
grep -Eq '^- forward +[1-9]' "$TMP/out" || fail "no forward row with a count in top's frames: $(tail -n 20 "$TMP/out")"
ok "top's frames show forward spans"
