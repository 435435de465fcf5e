#!/usr/bin/env bash
# t_load_two_sessions.sh - two `spantrace record` sessions on the same
# process at once each see every span: per span name, token and request, each
# session's counts equal the engine's own --stats, nothing dropped.
#  1. two `record -p PID` on one serving engine;
#  2. `record --binary` already running while `record -- CMD` starts the
#     engine (the command's pid is traced by both).
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
need_bpf
need_models
need_binaries

# check_session NAME DIR STATS [PID]: DIR's counts == the engine's.
check_session() {
	local name=$1 d=$2 e=$3 pid=${4:-} sel n kinds=0
	sel=${pid:+and .pid == $pid}
	ok "$name: $(jsonl_check "$d/t.jsonl") valid JSONL lines"
	for n in $(jq -r '.spans | to_entries[] | select(.value.count > 0) | .key' "$e"); do
		[[ " ${UNSEEN:-} " == *" $n "* ]] && continue
		assert_eq "$name: span $n lines" "$(jq ".spans.$n.count" "$e")" \
			"$(jq -c "select(.type == \"span\" and .name == \"$n\" $sel)" "$d/t.jsonl" | wc -l)"
		kinds=$((kinds + 1))
	done
	# an engine that fired nothing would match an empty trace
	assert_pos "$name: span kinds compared" "$kinds"
	assert_pos "$name: engine tokens" "$(jq .probes.token_end "$e")"
	assert_eq "$name: token lines" "$(jq .probes.token_end "$e")" \
		"$(jq -c "select(.type == \"token\" $sel)" "$d/t.jsonl" | wc -l)"
	assert_eq "$name: request lines" "$(jq .requests "$e")" \
		"$(jq -c "select(.type == \"request\" $sel)" "$d/t.jsonl" | wc -l)"
	assert_eq "$name: dropped" 0 "$(jq .loss.dropped "$d/s.json")"
	assert_eq "$name: balanced" true "$(jq .loss.balanced "$d/s.json")"
}

# 1. two -p sessions; the server fires nothing before the first prompt
start_server --stats "$TMP/e.json"
pids=()
for s in a b; do
	mkdir -p "$TMP/$s"
	"$SPANTRACE" record -q -p "$SRV" -o "$TMP/$s/t.jsonl" --summary "$TMP/$s/s.json" 2>"$TMP/$s/rec.err" &
	pids+=($!)
	wait_attached "$TMP/$s/t.jsonl" "$TMP/$s/rec.err"
done
for i in 1 2 3 4; do ask; done
kill -INT "${pids[@]}"
for p in "${pids[@]}"; do wait "$p" || fail "a -p session exited $?"; done
stop_server
# the server loaded its model before these attached, and unloads after they left
for s in a b; do UNSEEN="model_load pack unload" check_session "-p session $s" "$TMP/$s" "$TMP/e.json"; done

# 2. --binary and -- CMD on the same engine run
mkdir -p "$TMP/bin" "$TMP/cmd"
"$SPANTRACE" record -q --binary "$INFER" -o "$TMP/bin/t.jsonl" --summary "$TMP/bin/s.json" 2>"$TMP/bin/rec.err" &
binrec=$!
wait_attached "$TMP/bin/t.jsonl" "$TMP/bin/rec.err"
"$SPANTRACE" record -q -o "$TMP/cmd/t.jsonl" --summary "$TMP/cmd/s.json" -- \
	"$INFER" "$MODELS/stories260K.bin" -b cpu -n 40 -t 0 --ids --stats "$TMP/e2.json" >/dev/null 2>"$TMP/cmd/rec.err" ||
	fail "record -- CMD failed: $(tail -n 3 "$TMP/cmd/rec.err")"
kill -INT $binrec
wait $binrec || fail "--binary session exited $?"
epid=$(head -n1 "$TMP/cmd/t.jsonl" | jq '.pids[0]')
assert_pos "-- CMD: the engine's pid in the session line" "$epid"
check_session "-- CMD session" "$TMP/cmd" "$TMP/e2.json"
check_session "--binary session (pid $epid)" "$TMP/bin" "$TMP/e2.json" "$epid"
