#!/usr/bin/env bash
# t_content_capture.sh - no user content by default (issue 44): `infer --http`
# serves streamed requests to `record -p` writing JSONL, CSV, Chrome and a
# summary. Without --capture-tokens no output has a token id key (token_in,
# token_out, token_id), the session and summary say capture_tokens false,
# and the counts (emits = the client's tokens) are all there. With it (and
# with SPANTRACE_CAPTURE_TOKENS=1), the emit records' ids are the client's
# own token ids, in order; a bad value of the variable is refused.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_bpf
need_node
need_cmd jq jq
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"

start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --max-seqs 4

# run NAME [RECORD FLAGS...]: record -p while 4 streams of 12 tokens run;
# the client's results in $TMP/NAME.client
run() {
	local name=$1; shift
	"$SPANTRACE" record -q -p "$EPID" -o "$TMP/$name.jsonl" --csv "$TMP/$name.csv" --chrome "$TMP/$name.chrome.json" \
		--summary "$TMP/$name.summary.json" "$@" 2>"$TMP/$name.err" &
	local rec=$!
	wait_for grep -qs '"type":"session"' "$TMP/$name.jsonl" || fail "$name: record did not attach: $(cat "$TMP/$name.err")"
	stream_spec 4 12 0 >"$TMP/spec.json"
	client "$TMP/spec.json" "$TMP/$name.client"
	kill -INT "$rec"
	wait "$rec" || fail "$name: record exited $?: $(cat "$TMP/$name.err")"
}

keys_in() { grep -Eo '"token_(in|out|id)"' "$@" | sort -u | tr '\n' ' '; }

run plain
assert_empty "no token id key in the JSONL, CSV, Chrome trace or summary" \
	"$(keys_in "$TMP/plain.jsonl" "$TMP/plain.csv" "$TMP/plain.chrome.json" "$TMP/plain.summary.json")"
assert_eq "the session says so" false "$(jq -r 'select(.type == "session") | .capture_tokens' "$TMP/plain.jsonl")"
assert_eq "the summary says so" false "$(jq -r .capture_tokens "$TMP/plain.summary.json")"
tokens=$(jq -s 'map(.usage.completion_tokens) | add' "$TMP/plain.client")
assert_pos "tokens the client got" "$tokens"
assert_eq "emit records: counts stay" "$tokens" "$(jq -s 'map(select(.type == "emit")) | length' "$TMP/plain.jsonl")"

# ids, in order, per request: the client's against the emits' (by request,
# matched by the number of tokens and then the ids themselves)
ids_match() {
	python3 - "$1" "$2" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
emits = {}
for r in recs:
    if r["type"] == "emit":
        emits.setdefault(r["req"], []).append((r["pos"], r["token_id"]))
traced = sorted(tuple(i for _, i in sorted(v)) for v in emits.values())
client = sorted(tuple(json.loads(l)["token_ids"]) for l in open(sys.argv[2]))
if traced != client:
    print(f"traced ids {traced[:2]}..., the client's {client[:2]}...")
    sys.exit(1)
print(f"ok: {len(client)} requests' token ids, as the client got them")
PY
}
run flag --capture-tokens
assert_eq "--capture-tokens: the session says so" true "$(jq -r 'select(.type == "session") | .capture_tokens' "$TMP/flag.jsonl")"
ids_match "$TMP/flag.jsonl" "$TMP/flag.client" || fail "--capture-tokens: the ids are not the client's"
SPANTRACE_CAPTURE_TOKENS=1 run env
ids_match "$TMP/env.jsonl" "$TMP/env.client" || fail "SPANTRACE_CAPTURE_TOKENS=1: the ids are not the client's"
expect_fail "a bad SPANTRACE_CAPTURE_TOKENS" "SPANTRACE_CAPTURE_TOKENS must be 0 or 1" \
	env SPANTRACE_CAPTURE_TOKENS=yes "$SPANTRACE" record -p "$EPID" -o /dev/null --duration 0.1
stop_engine
