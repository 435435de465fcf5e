#!/usr/bin/env bash
# t_fleet_replaced_pid.sh - `record -p` on an engine whose libinfer.so was
# replaced by rename after it started (/proc/PID/maps says "(deleted)"): the
# tracer attaches through /proc/PID/map_files to the inode the engine still
# runs, with uprobe_multi links and with the per-probe fallback.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
for b in "$INFER" "$SPANTRACE"; do [ -x "$b" ] || fail "no $b (build first)"; done
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"

app=$TMP/app
mkdir "$app"
cp "$INFER" "$BUILD/libinfer.so" "$app/"
fifo_engine "$app/infer"
srv=$SRV
ask

# The deploy: a new file renamed over the old one, as package managers do.
cp "$BUILD/libinfer.so" "$app/libinfer.so.new"
mv "$app/libinfer.so.new" "$app/libinfer.so"
grep -q "libinfer.so (deleted)" /proc/$srv/maps || fail "the engine's library does not show as deleted"
ok "the engine runs a replaced libinfer.so"

for mode in uprobe_multi per-probe; do
	env=()
	[ $mode = per-probe ] && env=(SPANTRACE_NO_UPROBE_MULTI=1)
	: >"$TMP/t.jsonl"
	env "${env[@]}" "$SPANTRACE" record -q -p $srv -o "$TMP/t.jsonl" 2>"$TMP/rec.err" 3>&- &
	rec=$!
	wait_for [ -s "$TMP/t.jsonl" ] || fail "$mode: tracer did not attach: $(cat "$TMP/rec.err")"
	ask; ask
	kill -INT $rec
	wait $rec || fail "$mode: record exited $?: $(cat "$TMP/rec.err")"
	assert_eq "$mode: requests traced on the replaced library" 2 \
		"$(jq -c 'select(.type == "request")' "$TMP/t.jsonl" | wc -l)"
	assert_eq "$mode: token records = generated tokens" \
		"$(jq -s "map(select(.type == \"request\") | .generated_tokens) | add" "$TMP/t.jsonl")" \
		"$(jq -c "select(.type == \"token\")" "$TMP/t.jsonl" | wc -l)"
done
exec 3>&-
wait $srv || fail "server exited $?"
