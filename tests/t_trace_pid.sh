#!/usr/bin/env bash
# t_trace_pid.sh - `record -p PID` on a running `infer --serve` fed through a
# fifo: every request sent after the attach is seen (request and token events,
# spans carrying the request id); after the tracer stops, and after a second
# tracer is SIGKILLed, the server still answers.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
for b in "$INFER" "$SPANTRACE"; do [ -x "$b" ] || fail "no $b (build first)"; done

if [ ! -r "$DEMO_MODEL" ]; then
	mkdir -p "$(dirname "$DEMO_MODEL")"
	"$MKMODEL" "$DEMO_MODEL" --shape stories15M --seed 1 --tokenizer "$DEMO_TOK" >/dev/null ||
		fail "cannot make $DEMO_MODEL"
fi
mkfifo "$TMP/in"
# text prompts need a tokenizer that fits the model: the demo model's
OMP_NUM_THREADS=1 "$INFER" "$DEMO_MODEL" -z "$DEMO_TOK" --serve -n 6 -b cpu -t 0 <"$TMP/in" >"$TMP/out" 2>"$TMP/srv.err" &
srv=$!
exec 3>"$TMP/in"
lines() { wc -l <"$TMP/out"; }
# one reply line per prompt line
have_replies() { [ "$(lines)" -ge "$1" ]; }
ask() { local want=$(($(lines) + 1)); echo "once upon a time" >&3; wait_for have_replies $want || fail "no reply to request $want"; }
ask
ok "server answers before tracing: $(lines) line(s)"

"$SPANTRACE" record -q -p $srv -o "$TMP/t.jsonl" --summary "$TMP/s.json" 2>"$TMP/rec.err" 3>&- &
rec=$!
wait_for [ -s "$TMP/t.jsonl" ] || fail "tracer did not attach: $(cat "$TMP/rec.err")"
assert_eq "session pid" "$srv" "$(head -n1 "$TMP/t.jsonl" | jq '.pids[0]')"
for i in 1 2 3; do ask; done
kill -INT $rec
wait $rec || fail "record exited $? on SIGINT: $(cat "$TMP/rec.err")"
assert_eq "requests seen after attach" 3 "$(jq -c 'select(.type == "request")' "$TMP/t.jsonl" | wc -l)"
assert_eq "summary requests" 3 "$(jq .requests "$TMP/s.json")"
assert_eq "distinct request ids on spans" 3 \
	"$(jq -r 'select(.type == "span" and .name == "forward") | .req' "$TMP/t.jsonl" | sort -u | wc -l)"
assert_eq "loss balanced" true "$(jq .loss.balanced "$TMP/s.json")"
ask
ok "server answers after the tracer detached"

# A tracer killed with SIGKILL: the kernel drops its probes, the target lives.
"$SPANTRACE" record -q -p $srv -o "$TMP/t2.jsonl" 2>"$TMP/rec2.err" 3>&- &
rec2=$!
wait_for [ -s "$TMP/t2.jsonl" ] || fail "second tracer did not attach: $(cat "$TMP/rec2.err")"
ask
kill -KILL $rec2
wait $rec2 2>/dev/null
ask
kill -0 $srv || fail "server died"
ok "server answers after the tracer was SIGKILLed ($(lines) replies)"
# A tracer still attached when the server exits stops by itself (fd 3, the
# fifo's writer, must not leak into it or the server never sees EOF).
"$SPANTRACE" record -q -p $srv -o "$TMP/t3.jsonl" 2>"$TMP/rec3.err" 3>&- &
rec3=$!
wait_for [ -s "$TMP/t3.jsonl" ] || fail "third tracer did not attach: $(cat "$TMP/rec3.err")"
exec 3>&-
wait $srv || fail "server exited $?"
wait $rec3 || fail "record exited $? when the target exited: $(cat "$TMP/rec3.err")"
assert_eq "stop reason" "target exited" "$(tail -n1 "$TMP/t3.jsonl" | jq -r .stop_reason)"
