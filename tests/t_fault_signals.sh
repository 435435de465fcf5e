#!/usr/bin/env bash
# t_fault_signals.sh - SIGINT and SIGTERM stop `record` cleanly: exit 0, the
# summary written (file and last JSONL line), stop_reason "interrupted", and
# nothing lost on the way out: JSONL event lines == delivered, dropped == 0.
# Two tracers attach one after the other to one serving engine (SIGINT ends
# the first, SIGTERM the second); together their JSONL span/token/request
# lines equal the engine's own --stats counts exactly.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
need_bpf
need_binaries

start_server --stats "$TMP/e.json"
# `infer --serve` loads the model then waits for the first prompt: no span
# fires before a tracer is attached.

# trace_until SIGNAL NAME REQUESTS
trace_until() {
	local sig=$1 d=$TMP/$2 n=$3 rc=0 i
	mkdir -p "$d"
	"$SPANTRACE" record -p "$SRV" -o "$d/t.jsonl" --summary "$d/s.json" 2>"$d/rec.err" &
	local rec=$!
	wait_attached "$d/t.jsonl" "$d/rec.err"
	for i in $(seq "$n"); do ask; done
	kill "-$sig" $rec
	wait $rec || rc=$?
	assert_eq "$sig: exit status" 0 "$rc"
	ok "$sig: $(jsonl_check "$d/t.jsonl") valid JSONL lines"
	assert_eq "$sig: last JSONL line" summary "$(tail -n1 "$d/t.jsonl" | jq -r .type)"
	[ "$(jq -cS . "$d/s.json")" = "$(tail -n1 "$d/t.jsonl" | jq -cS .)" ] ||
		fail "$sig: the summary file differs from the JSONL summary line"
	ok "$sig: summary file == JSONL summary line"
	assert_eq "$sig: stop_reason" interrupted "$(jq -r .stop_reason "$d/s.json")"
	assert_eq "$sig: requests" "$n" "$(jq .requests "$d/s.json")"
	assert_pos "$sig: events delivered" "$(jq .loss.delivered "$d/s.json")"
	assert_eq "$sig: event lines == delivered" "$(jq .loss.delivered "$d/s.json")" \
		"$(jq -c 'select(.type != "session" and .type != "drops" and .type != "summary")' "$d/t.jsonl" | wc -l)"
	assert_eq "$sig: dropped" 0 "$(jq .loss.dropped "$d/s.json")"
	assert_eq "$sig: balanced" true "$(jq .loss.balanced "$d/s.json")"
}
trace_until INT int 3
trace_until TERM term 2
kill -0 "$SRV" || fail "the server died"
stop_server
[ -s "$TMP/e.json" ] || fail "engine wrote no --stats"

both() { cat "$TMP/int/t.jsonl" "$TMP/term/t.jsonl"; }
assert_eq "engine requests (3 + 2)" 5 "$(jq .requests "$TMP/e.json")"
kinds=0
# all but the load (before the first session) and the unload (after the last)
for n in $(jq -r '.spans | to_entries[] | select(.value.count > 0 and (.key | IN("model_load", "pack", "unload") | not)) | .key' "$TMP/e.json"); do
	assert_eq "span $n: lines of both sessions == engine count" "$(jq ".spans.$n.count" "$TMP/e.json")" \
		"$(both | jq -c "select(.type == \"span\" and .name == \"$n\")" | wc -l)"
	kinds=$((kinds + 1))
done
assert_pos "span kinds compared" "$kinds"
assert_pos "engine tokens" "$(jq .probes.token_end "$TMP/e.json")"
assert_eq "token lines == engine tokens" "$(jq .probes.token_end "$TMP/e.json")" \
	"$(both | jq -c 'select(.type == "token")' | wc -l)"
assert_eq "request lines == engine requests" "$(jq .requests "$TMP/e.json")" \
	"$(both | jq -c 'select(.type == "request")' | wc -l)"
