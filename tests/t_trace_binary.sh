#!/usr/bin/env bash
# t_trace_binary.sh - `record --binary build/infer` attaches to the file (pid
# -1): two engine processes started after the tracer are both traced, each
# under its own pid, with complete counts per process.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
for b in "$INFER" "$SPANTRACE"; do [ -x "$b" ] || fail "no $b (build first)"; done

"$SPANTRACE" record -q --binary "$INFER" -o "$TMP/t.jsonl" --summary "$TMP/s.json" 2>"$TMP/rec.err" &
rec=$!
wait_for [ -s "$TMP/t.jsonl" ] || fail "tracer did not attach: $(cat "$TMP/rec.err")"
assert_eq "session mode" binary "$(head -n1 "$TMP/t.jsonl" | jq -r .mode)"

"$INFER" "$MODELS/stories260K.bin" -b cpu -n 10 -t 0 --ids >/dev/null 2>&1 &
a=$!
"$INFER" "$MODELS/stories260K.bin" -b cpu -n 14 -t 0 --ids >/dev/null 2>&1 &
b=$!
wait $a || fail "engine a failed"
wait $b || fail "engine b failed"
kill -INT $rec
wait $rec || fail "record exited $?: $(cat "$TMP/rec.err")"

tokens_of() { jq -c "select(.type == \"token\" and .pid == $1)" "$TMP/t.jsonl" | wc -l; }
assert_eq "tokens of process a ($a)" 10 "$(tokens_of $a)"
assert_eq "tokens of process b ($b)" 14 "$(tokens_of $b)"
assert_eq "forward spans of a" 10 "$(jq -c "select(.type == \"span\" and .name == \"forward\" and .pid == $a)" "$TMP/t.jsonl" | wc -l)"
assert_eq "pids with spans" 2 "$(jq -r 'select(.type == "span") | .pid' "$TMP/t.jsonl" | sort -u | wc -l)"
assert_eq "pools per pid in the summary" 2 "$(jq '.pools | length' "$TMP/s.json")"
assert_eq "loss balanced" true "$(jq .loss.balanced "$TMP/s.json")"
