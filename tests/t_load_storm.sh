#!/usr/bin/env bash
# t_load_storm.sh - loss accounting under load. probestorm (tests/helpers)
# fires the engine's probe sites back to back (3 events per iteration) into
# the smallest ring buffer `record` allows (4 KiB), with the tracer stopped
# (SIGSTOP) for 0.3 s mid-storm: events must be lost, and every
# one must be accounted for EXACTLY: fired (the in-kernel counter, in the
# summary) == the engine's own probe-call counts, delivered + dropped ==
# fired per event type, the JSONL holds exactly the delivered events, the
# last drops record says how many were lost, and the in-kernel aggregation
# still counts every span. A storm over more (pid, kind, layer) series than
# the kernel's histogram table holds counts every span it could not
# aggregate. Then the real engine at detail level on the stories15M-shaped
# demo model with the default ring buffer loses nothing.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
need_bpf
need_binaries
ITER=${STORM_ITERATIONS:-100000}

build_probestorm
d=$TMP/storm
mkdir -p "$d"
"$SPANTRACE" record -q --ringbuf-kb 4 -o "$d/t.jsonl" --summary "$d/s.json" -- \
	"$TMP/probestorm" "$ITER" --stats "$d/e.json" 2>"$d/rec.err" &
rec=$!
wait_attached "$d/t.jsonl" "$d/rec.err"
# A fast consumer may keep up with a 4 KiB ring on a quiet machine: stall it
# for a moment mid-storm so that losses are certain.
sleep 0.2   # into the storm
kill -STOP $rec
sleep 0.3   # the stall itself: a consumer that stops reading for 0.3 s
kill -CONT $rec
wait $rec || fail "record failed: $(tail -n 3 "$d/rec.err")"
ok "$(grep probestorm: "$d/rec.err")"
assert_eq "ring buffer size" 4096 "$(head -n1 "$d/t.jsonl" | jq .ringbuf_bytes)"
e=$d/e.json s=$d/s.json
fired=$(jq .loss.fired "$s") delivered=$(jq .loss.delivered "$s") dropped=$(jq .loss.dropped "$s")
echo "storm: fired=$fired delivered=$delivered dropped=$dropped"
need_num "storm: loss counts" "$fired" "$delivered" "$dropped" # summed in bash below
assert_le "events lost under the storm (else this proves nothing)" 1 "$dropped"
assert_eq "fired (in kernel) == the engine's probe calls" "$(engine_events "$e")" "$fired"
assert_eq "delivered + dropped == fired" "$fired" "$((delivered + dropped))"
for t in span token emit request; do
	assert_eq "$t: delivered + dropped == fired" "$(jq ".loss.by_type.$t.fired" "$s")" \
		"$(jq ".loss.by_type.$t | .delivered + .dropped" "$s")"
done
assert_eq "span events fired == engine span+op ends" "$(jq '.probes | .span_end + .op_end' "$e")" \
	"$(jq .loss.by_type.span.fired "$s")"
assert_eq "token events fired == engine token ends" "$(jq .probes.token_end "$e")" \
	"$(jq .loss.by_type.token.fired "$s")"
assert_eq "emit events fired == engine token ends" "$(jq .probes.token_end "$e")" \
	"$(jq .loss.by_type.emit.fired "$s")"
# one pass over the (big) JSONL: lines per record type
jq -r .type "$d/t.jsonl" | sort | uniq -c >"$d/types"
lines_of() { awk -v t="$1" '$2 == t { print $1; f = 1 } END { if (!f) print 0 }' "$d/types"; }
assert_eq "JSONL event lines == delivered" "$delivered" \
	"$(($(lines_of span) + $(lines_of token) + $(lines_of emit) + $(lines_of request)))"
for t in span token emit request; do
	assert_eq "JSONL $t lines == $t delivered" "$(jq ".loss.by_type.$t.delivered" "$s")" "$(lines_of $t)"
done
assert_eq "last drops record" "$dropped" "$(jq -c 'select(.type == "drops") | .dropped' "$d/t.jsonl" | tail -n1)"
for n in forward rope; do
	assert_eq "in-kernel count of $n (exact despite drops)" "$(jq ".spans.$n.count" "$e")" \
		"$(jq ".spans.$n.count_in_kernel" "$s")"
done
assert_eq "span errors" 0 "$(jq .span_errors "$s")"

# More series than the histogram table holds (8192): rope spans over 9000
# layers. Every span is either in a histogram or counted as not aggregated.
d=$TMP/full
mkdir -p "$d"
"$SPANTRACE" record -q -o /dev/null --summary "$d/s.json" -- \
	"$TMP/probestorm" 18000 --layers 9000 --stats "$d/e.json" 2>"$d/rec.err" ||
	fail "record over the full table failed: $(tail -n 3 "$d/rec.err")"
full=$(jq .agg_table_full "$d/s.json")
assert_le "durations the full table could not aggregate (else this proves nothing)" 1 "$full"
need_num "full table: rope counts and requests" "$(jq .spans.rope.count "$d/e.json")" \
	"$(jq .spans.rope.count_in_kernel "$d/s.json")" "$(jq .requests "$d/e.json")"
# The request ends last, when the table is already full: its five
# aggregates (end to end, queue, TTFT, prefill, decode) are the ones not
# aggregated besides the ropes'.
assert_eq "rope spans + the request's 5: aggregated + not aggregated == the engine's" \
	"$(( $(jq .spans.rope.count "$d/e.json") + 5 * $(jq .requests "$d/e.json") ))" \
	"$(( $(jq .spans.rope.count_in_kernel "$d/s.json") + full ))"
assert_eq "forward spans, aggregated before the table filled" "$(jq .spans.forward.count "$d/e.json")" \
	"$(jq .spans.forward.count_in_kernel "$d/s.json")"

# The real engine, detail level, default ring buffer: nothing lost.
ensure_demo_model
d=$TMP/demo
mkdir -p "$d"
OMP_NUM_THREADS=1 "$SPANTRACE" record -q --level detail -o "$d/t.jsonl" --summary "$d/s.json" -- \
	"$INFER" "$DEMO_MODEL" -b cpu -n 48 -t 0 --ids --stats "$d/e.json" >/dev/null 2>"$d/rec.err" ||
	fail "record demo failed: $(tail -n 3 "$d/rec.err")"
e=$d/e.json s=$d/s.json
echo "demo: fired=$(jq .loss.fired "$s") delivered=$(jq .loss.delivered "$s") dropped=$(jq .loss.dropped "$s")"
assert_pos "demo: events fired (else nothing was lost because nothing ran)" "$(jq .loss.fired "$s")"
assert_pos "demo: engine allocs" "$(jq .probes.alloc "$e")"
assert_eq "demo: dropped" 0 "$(jq .loss.dropped "$s")"
assert_eq "demo: span+token+emit+request fired == engine's" "$(engine_events "$e")" \
	"$(jq '.loss.by_type | .span.fired + .token.fired + .emit.fired + .request.fired' "$s")"
assert_eq "demo: alloc+free fired == engine's" "$(jq '.probes | .alloc + .free' "$e")" \
	"$(jq '.loss.by_type | .alloc.fired + .free.fired' "$s")"
assert_eq "demo: delivered == fired" "$(jq .loss.fired "$s")" "$(jq .loss.delivered "$s")"
