#!/usr/bin/env bash
# t_fault_target_exit.sh - the target dies under the tracer (SIGKILL), both
# when attached with -p PID and when started with -- CMD: the tracer notices,
# writes its summary and says "target exited" on stderr, and exits 0 for
# -p and the command's own status for -- CMD (137: killed); the JSONL
# is whole (every line valid JSON, a summary line last) and its counts agree
# with the summary and with the requests that were answered.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
need_bpf
need_binaries

# check_outputs NAME DIR REQUESTS: what every run must leave behind.
check_outputs() {
	local name=$1 d=$2 want_requests=$3
	grep -q "target exited" "$d/rec.err" || fail "$name: no 'target exited' on stderr: $(tail -n 3 "$d/rec.err")"
	ok "$name: stderr says: $(grep -o 'target exited[^,]*' "$d/rec.err" | tail -n1)"
	ok "$name: $(jsonl_check "$d/t.jsonl") valid JSONL lines"
	assert_eq "$name last JSONL line" summary "$(tail -n1 "$d/t.jsonl" | jq -r .type)"
	assert_eq "$name stop_reason" true "$(jq '.stop_reason | startswith("target exited")' "$d/s.json")"
	assert_eq "$name requests in summary" "$want_requests" "$(jq .requests "$d/s.json")"
	assert_eq "$name request lines" "$want_requests" "$(jq -c 'select(.type == "request")' "$d/t.jsonl" | wc -l)"
	assert_pos "$name tokens in summary" "$(jq .tokens_generated "$d/s.json")"
	assert_eq "$name token lines == summary tokens" "$(jq .tokens_generated "$d/s.json")" \
		"$(jq -c 'select(.type == "token")' "$d/t.jsonl" | wc -l)"
	assert_eq "$name delivered == event lines" "$(jq .loss.delivered "$d/s.json")" \
		"$(jq -c 'select(.type != "session" and .type != "drops" and .type != "summary")' "$d/t.jsonl" | wc -l)"
	assert_eq "$name loss balanced" true "$(jq .loss.balanced "$d/s.json")"
	assert_eq "$name dropped" 0 "$(jq .loss.dropped "$d/s.json")"
}

# 1. -p PID: a serving engine is SIGKILLed while traced.
d=$TMP/pid
mkdir -p "$d"
start_server
ask
"$SPANTRACE" record -p "$SRV" -o "$d/t.jsonl" --summary "$d/s.json" 2>"$d/rec.err" &
rec=$!
wait_attached "$d/t.jsonl" "$d/rec.err"
ask
ask
kill -KILL "$SRV"
wait "$SRV" 2>/dev/null
exec 3>&-
wait_for eval '! kill -0 $rec 2>/dev/null' || fail "-p: tracer still running 10 s after the target died"
rc=0
wait $rec || rc=$?
assert_eq "-p: tracer exit status" 0 "$rc"
check_outputs "-p" "$d" 2

# 2. -- CMD: the command the tracer started is SIGKILLed.
d=$TMP/cmd
mkdir -p "$d"
rm -f "$TMP/in" "$TMP/out"
mkfifo "$TMP/in"
OMP_NUM_THREADS=1 "$SPANTRACE" record -o "$d/t.jsonl" --summary "$d/s.json" -- \
	"$INFER" "$DEMO_MODEL" -z "$DEMO_TOK" --serve -n 6 -b cpu -t 0 <"$TMP/in" >"$TMP/out" 2>"$d/rec.err" &
rec=$!
exec 3>"$TMP/in"
wait_attached "$d/t.jsonl" "$d/rec.err"
child=$(head -n1 "$d/t.jsonl" | jq '.pids[0]')
assert_pos "-- CMD: child pid in the session line" "$child"
for i in 1 2 3; do ask; done
kill -KILL "$child"
exec 3>&-
wait_for eval '! kill -0 $rec 2>/dev/null' || fail "-- CMD: tracer still running 10 s after the target died"
rc=0
wait $rec || rc=$?
assert_eq "-- CMD: tracer exit status, the command's (128 + SIGKILL)" 137 "$rc"
grep -q "the command killed by signal 9; what it did is written, and spantrace exits 137" "$d/rec.err" ||
	fail "-- CMD: stderr does not say why it exits 137: $(tail -n 3 "$d/rec.err")"
check_outputs "-- CMD" "$d" 3

# 3. -- CMD that fails by itself (bad arguments: exit 2): record and profile
# exit with its status, say so, and still write what they saw.
"$SPANTRACE" record -o "$TMP/bad.jsonl" --summary "$TMP/bad.json" -- "$INFER" "$DEMO_MODEL" -n 4 -b cpu \
	>/dev/null 2>"$TMP/bad.err"
assert_eq "record -- a command exiting 2: record's exit status" 2 "$?"
grep -q "the command exited with status 2; what it did is written, and spantrace exits 2" "$TMP/bad.err" ||
	fail "record does not say why it exits 2: $(cat "$TMP/bad.err")"
assert_eq "record -- a failing command: its summary's stop_reason" "target exited (status 2)" \
	"$(jq -r .stop_reason "$TMP/bad.json")"
"$SPANTRACE" profile -o "$TMP/prof" -- "$INFER" "$DEMO_MODEL" -n 4 -b cpu >/dev/null 2>"$TMP/prof.err"
assert_eq "profile -- a command exiting 2: profile's exit status" 2 "$?"
[ -s "$TMP/prof/summary.json" ] || fail "profile of a failing command wrote no summary.json: $(cat "$TMP/prof.err")"
ok "profile of a failing command still wrote $(ls "$TMP/prof" | wc -l) files"
"$SPANTRACE" record -o "$TMP/good.jsonl" -- "$INFER" "$DEMO_MODEL" -n 4 -b cpu --ids >/dev/null 2>"$TMP/good.err"
assert_eq "record -- a command that succeeds: exit status" 0 "$?"
