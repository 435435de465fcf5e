#!/usr/bin/env bash
# t_content_capture.sh - no user content by default (issue 44): `infer --http`
# serves streamed requests to `record -p` writing JSONL, CSV, Chrome and a
# summary, and OTLP to a receiver; the daemon writes its tail capture.
# Without --capture-tokens no output has a token id key (token_in,
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

# run NAME [RECORD FLAGS...]: record -p (with OTLP to a receiver) while 4
# streams of 12 tokens run; the client's results in $TMP/NAME.client
run() {
	local name=$1; shift
	node "$ROOT/tests/node/otlp_receiver.js" "$TMP/$name.otlp" >"$TMP/$name.port" 2>"$TMP/$name.rerr" &
	local recv=$!
	wait_for grep -q listening "$TMP/$name.port" || fail "OTLP receiver: $(cat "$TMP/$name.rerr")"
	"$SPANTRACE" record -q -p "$EPID" -o "$TMP/$name.jsonl" --csv "$TMP/$name.csv" --chrome "$TMP/$name.chrome.json" \
		--summary "$TMP/$name.summary.json" --otlp "http://127.0.0.1:$(awk '{print $2}' "$TMP/$name.port")" \
		"$@" 2>"$TMP/$name.err" &
	local rec=$!
	wait_for grep -qs '"type":"session"' "$TMP/$name.jsonl" || fail "$name: record did not attach: $(cat "$TMP/$name.err")"
	stream_spec 4 12 0 >"$TMP/spec.json"
	client "$TMP/spec.json" "$TMP/$name.client"
	kill -INT "$rec"
	wait "$rec" || fail "$name: record exited $?: $(cat "$TMP/$name.err")"
	kill "$recv"
	wait "$recv" 2>/dev/null
	grep -q '"spans"' "$TMP/$name.otlp" || fail "$name: the OTLP receiver got no spans"
}

keys_in() { grep -Eo '"(spantrace\.)?token_(in|out|id)"' "$@" | sort -u | tr '\n' ' '; }
# csv_positions NAME: the CSV has no id column, and its token column is a
# position (the seed's): never above the JSONL's largest pos, as an id
# (up to the vocabulary's 32,000) would be
csv_positions() {
	assert_eq "$1: the CSV's columns" "timestamp,device,worker,duration_ms,token,layer,operation,success,memory_used_mb,error" \
		"$(head -n 1 "$TMP/$1.csv")"
	local top maxpos
	top=$(awk -F, 'NR > 1 && $5 > m { m = $5 } END { print m + 0 }' "$TMP/$1.csv")
	maxpos=$(jq -s 'map(.pos // 0) | max' "$TMP/$1.jsonl")
	assert_pos "$1: CSV rows" "$(($(wc -l <"$TMP/$1.csv") - 1))"
	assert_le "$1: the CSV's token column, a position, up to the JSONL's largest" "$top" "$maxpos"
}

run plain
assert_empty "no token id key in the JSONL, CSV, Chrome trace, OTLP or summary" \
	"$(keys_in "$TMP/plain.jsonl" "$TMP/plain.csv" "$TMP/plain.chrome.json" "$TMP/plain.otlp" "$TMP/plain.summary.json")"
csv_positions plain
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
# asked for, ids go to the JSONL and OTLP only (docs/record.md): the CSV keeps positions
csv_positions flag
[ -n "$(keys_in "$TMP/flag.otlp")" ] || fail "--capture-tokens: no token id in the OTLP spans"
ok "--capture-tokens: token ids in the OTLP spans: $(keys_in "$TMP/flag.otlp")"
SPANTRACE_CAPTURE_TOKENS=1 run env
ids_match "$TMP/env.jsonl" "$TMP/env.client" || fail "SPANTRACE_CAPTURE_TOKENS=1: the ids are not the client's"
# the daemon's tail capture (every span: --slow-ms 0) holds none either
mkdir -p "$TMP/tail"
"$SPANTRACE" daemon -p "$EPID" --listen 127.0.0.1:0 --jsonl-dir "$TMP/tail" --slow-ms 0 --level detail \
	>"$TMP/daemon.log" 2>&1 &
dpid=$!
WAIT_S=30 wait_for grep -q 'metrics at http' "$TMP/daemon.log" || fail "daemon: $(cat "$TMP/daemon.log")"
client "$TMP/spec.json" "$TMP/d.client"
kill -TERM "$dpid"
wait "$dpid" || fail "daemon exited $?: $(tail -n 3 "$TMP/daemon.log")"
[ -n "$(cat "$TMP"/tail/*.jsonl 2>/dev/null)" ] || fail "the daemon wrote no tail spans"
assert_empty "no token id key in the daemon's tail files" "$(keys_in "$TMP"/tail/*.jsonl)"
expect_fail "a bad SPANTRACE_CAPTURE_TOKENS" "SPANTRACE_CAPTURE_TOKENS must be 0 or 1" \
	env SPANTRACE_CAPTURE_TOKENS=yes "$SPANTRACE" record -p "$EPID" -o /dev/null --duration 0.1
stop_engine
