#!/usr/bin/env bash
# t_trace_levels.sh - knobs that change what is streamed, and loss accounting:
#  * --level coarse streams only forward/layer spans (the op_* and cl_batch
#    programs are not attached), still with exact counts;
#  * --min-dur-ns streams only long spans (some, not none), yet the in-kernel
#    counts stay exact;
#  * a tiny ring buffer loses events (the tracer is stopped while the engine
#    runs, as in t_load_storm, so that it must), and every loss is counted:
#    delivered + dropped == fired, streamed + dropped spans == the engine's
#    span count, and a "drops" record reports the loss.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
for b in "$INFER" "$SPANTRACE"; do [ -x "$b" ] || fail "no $b (build first)"; done
m=$MODELS/stories260K.bin
run() { # DIR ARGS... : record the engine into DIR
	local d=$TMP/$1
	shift
	mkdir -p "$d"
	"$SPANTRACE" record -q "$@" -o "$d/t.jsonl" --summary "$d/s.json" -- \
		"$INFER" "$m" -b cpu -n 32 -t 0 --ids --stats "$d/e.json" >/dev/null 2>"$d/err" ||
		fail "record $*: $(tail -n 3 "$d/err")"
}

run coarse --level coarse
d=$TMP/coarse
assert_eq "coarse: level in session" coarse "$(head -n1 "$d/t.jsonl" | jq -r .level)"
assert_eq "coarse: span names streamed" "forward layer" \
	"$(jq -r 'select(.type == "span") | .name' "$d/t.jsonl" | sort -u | xargs)"
for n in forward layer; do
	assert_eq "coarse: $n count" "$(jq ".spans.$n.count" "$d/e.json")" "$(jq ".spans.$n.count" "$d/s.json")"
done
assert_eq "coarse: tokens" "$(jq .tokens "$d/e.json")" "$(jq .tokens_generated "$d/s.json")"

run mindur --min-dur-ns 20000
d=$TMP/mindur
short=$(jq -c 'select(.type == "span" and .dur_ns < 20000)' "$d/t.jsonl" | wc -l)
assert_eq "min-dur: no short span streamed" 0 "$short"
assert_pos "min-dur: spans streamed (of 20 us or more)" "$(jq -c 'select(.type == "span")' "$d/t.jsonl" | wc -l)"
for n in attention rope forward; do
	assert_eq "min-dur: $n counted in kernel" "$(jq ".spans.$n.count" "$d/e.json")" \
		"$(jq ".spans.$n.count_in_kernel" "$d/s.json")"
done
assert_le "min-dur: fewer rope spans streamed than run" "$(jq '.spans.rope.count // 0' "$d/s.json")" \
	"$(($(jq .spans.rope.count "$d/e.json") - 1))"

# The tiny ring: a fast consumer can keep up with 4 KiB on a quiet machine,
# so the tracer is stopped (SIGSTOP) while the engine runs, until it has
# exited (a zombie: its parent, the tracer, cannot reap it), and every event
# past the first 4 KiB must be lost. The engine (--serve, on a fifo) waits
# for its prompt, so the tracer can be stopped after it has let it exec.
d=$TMP/tiny
mkdir -p "$d"
mkfifo "$d/in"
"$SPANTRACE" record -q --ringbuf-kb 4 -o "$d/t.jsonl" --summary "$d/s.json" -- \
	"$INFER" "$m" -b cpu -n 32 -t 0 --ids --serve --stats "$d/e.json" \
	<"$d/in" >/dev/null 2>"$d/err" &
rec=$!
exec {feed}>"$d/in"
wait_for [ -s "$d/t.jsonl" ] || fail "tiny ring: tracer did not attach: $(cat "$d/err")"
exe=$(readlink -f "$INFER")
execed() { eng=$(pgrep -P $rec) && [ "$(readlink -f "/proc/$eng/exe")" = "$exe" ]; }
wait_for execed || fail "tiny ring: the engine never started under the tracer"
kill -STOP $rec
echo >&$feed   # an empty prompt: 32 tokens from BOS, as the runs above
exec {feed}>&-
zombie() { [ "$(awk '{print $3}' "/proc/$eng/stat")" = Z ]; }
wait_for zombie || { kill -CONT $rec; fail "tiny ring: engine $eng did not finish while the tracer was stopped"; }
kill -CONT $rec
wait $rec || fail "record --ringbuf-kb 4: $(tail -n 3 "$d/err")"
fired=$(jq .loss.fired "$d/s.json")
delivered=$(jq .loss.delivered "$d/s.json")
dropped=$(jq .loss.dropped "$d/s.json")
need_num "tiny ring: fired, delivered, dropped" "$fired" "$delivered" "$dropped"
assert_pos "tiny ring: events lost (else this proves nothing)" "$dropped"
assert_eq "tiny ring: delivered + dropped == fired" "$fired" "$((delivered + dropped))"
assert_eq "tiny ring: JSONL lines of events == delivered" "$delivered" \
	"$(jq -c 'select(.type != "session" and .type != "drops" and .type != "summary")' "$d/t.jsonl" | wc -l)"
engine_spans=$(jq '[.spans[].count] | add' "$d/e.json")
streamed=$(jq -c 'select(.type == "span")' "$d/t.jsonl" | wc -l)
assert_eq "tiny ring: streamed + dropped spans == engine spans" "$engine_spans" \
	"$((streamed + $(jq .loss.by_type.span.dropped "$d/s.json")))"
assert_eq "tiny ring: last drops record" "$dropped" \
	"$(jq -c 'select(.type == "drops") | .dropped' "$d/t.jsonl" | tail -n1)"
ok "tiny ring: $dropped of $fired events dropped, all accounted"
