#!/usr/bin/env bash
# t_fleet_deploy.sh - a deploy by rename under `record --binary` and under the
# daemon: a new libinfer.so renamed over the traced one is attached too (and
# the re-attach is logged); engines started from the new file are traced with
# exact counts, and an engine still running the old file stays traced.
# Before, uprobes stayed on the old inode and the new engines counted nothing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_models
need_daemon_build
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"

app=$TMP/app
mkdir "$app"
cp "$INFER" "$BUILD/libinfer.so" "$app/"
deploy() {
	cp "$BUILD/libinfer.so" "$app/libinfer.so.new"
	mv "$app/libinfer.so.new" "$app/libinfer.so"
}

# --- record --binary ---
"$SPANTRACE" record --binary "$app/libinfer.so" -o "$TMP/t.jsonl" 2>"$TMP/rec.err" &
rec=$!
wait_for [ -s "$TMP/t.jsonl" ] || fail "tracer did not attach: $(cat "$TMP/rec.err")"
fifo_engine "$app/infer"
old=$SRV
ask
deploy
grep -q "libinfer.so (deleted)" /proc/$old/maps || fail "the old engine does not run a replaced file"
wait_for grep -q "re-attached" "$TMP/rec.err" || fail "no re-attach logged: $(cat "$TMP/rec.err")"
ok "logged: $(grep -m1 re-attached "$TMP/rec.err")"
"$app/infer" "$MODELS/stories260K.bin" -b cpu -n 20 -t 0 --ids >/dev/null 2>"$TMP/new.err" 3>&- &
new=$!
wait $new || fail "new engine failed: $(cat "$TMP/new.err")"
ask
kill -INT $rec
wait $rec || fail "record exited $?: $(cat "$TMP/rec.err")"
tokens_of() { jq -c "select(.type == \"token\" and .pid == $1)" "$TMP/t.jsonl" | wc -l; }
assert_eq "tokens of the engine started from the new file" 20 "$(tokens_of $new)"
assert_eq "requests of the engine still on the old file" 2 \
	"$(jq -c "select(.type == \"request\" and .pid == $old)" "$TMP/t.jsonl" | wc -l)"
exec 3>&-
wait $old || fail "old engine exited $?"

# --- daemon --binary ---
"$SPANTRACE" daemon --binary "$app/libinfer.so" --listen 127.0.0.1:0 --interval 0.2 >"$TMP/daemon.log" 2>&1 &
DPID=$!
wait_for grep -q 'metrics at http' "$TMP/daemon.log" || fail "daemon did not start: $(cat "$TMP/daemon.log")"
DPORT=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")
reattached() { [ "$(grep -c re-attached "$TMP/daemon.log")" -ge "$1" ]; }
for round in 1 2; do
	deploy
	wait_for reattached $round ||
		fail "daemon logged no re-attach $round: $(cat "$TMP/daemon.log")"
	"$app/infer" "$MODELS/stories260K.bin" -b cpu -s 1 -t 0 --ids -n 30 --stats "$TMP/st$round.json" \
		>/dev/null 2>"$TMP/engine.err" &
	EPID=$!
	wait $EPID || fail "engine failed: $(cat "$TMP/engine.err")"
	want=$(jq -r .tokens "$TMP/st$round.json")
	has_tokens() { metrics >"$TMP/m.txt" && [ "$(msum "$TMP/m.txt" spantrace_tokens_total "pid=\"$EPID\"")" = "$want" ]; }
	wait_long has_tokens || fail "deploy $round: daemon counted $(msum "$TMP/m.txt" spantrace_tokens_total "pid=\"$EPID\"") tokens, engine $want"
	ok "deploy $round: daemon counted the new engine's $want tokens"
done
stop_daemon
