#!/usr/bin/env bash
# t_fault_disk_full.sh - the JSONL output fills its file system (a 64 KiB
# tmpfs): `record` stops with a clear error that names the file and a
# non-zero exit; what it wrote before is whole lines of valid JSON (no torn
# last line); the summary (on another file system) is still written.
# 1. -- CMD, a short run: the disk fills at the final flush; the command is
#    not left behind, and the summary's stop_reason is "write error".
# 2. -p PID on a serving engine: the disk fills mid-run (at a periodic
#    flush); the tracer stops with stop_reason "write error", detaches (the
#    semaphores and probe sites raised while attached are back to 0 and the
#    nop), and the engine keeps answering.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
need_bpf
need_models
need_binaries
need_cmd readelf binutils # probestate.py reads the stapsdt notes

small=$TMP/small
mkdir -p "$small"
mount -t tmpfs -o size=64k tmpfs "$small" 2>"$TMP/mount.err" || skip "cannot mount a tmpfs: $(cat "$TMP/mount.err")"
# Processes holding files on it go first, else the unmount fails: waited
# for, as a killed tracer can take a while to release its probes.
trap 'jobs -p | xargs -r kill -9 2>/dev/null; wait 2>/dev/null; umount "$small" 2>/dev/null; rm -rf "$TMP"' EXIT

# check_full NAME FILE ERRFILE RC: the common promises.
check_full() {
	local name=$1 f=$2 errf=$3 rc=$4 size lines
	[ "$rc" != 0 ] || fail "$name: record exited 0 although $small filled up"
	ok "$name: record exited $rc"
	grep -q "$f.*No space left on device" "$errf" || fail "$name: no error naming the file: $(cat "$errf")"
	ok "$name: error: $(grep "No space" "$errf")"
	[ "$(grep -c . "$errf")" -le 3 ] || fail "$name: more than a short error: $(cat "$errf")"
	size=$(stat -c %s "$f")
	assert_le "$name: JSONL file has content (bytes)" 1000 "$size"
	lines=$(jsonl_check "$f")
	ok "$name: $lines whole JSONL lines ($size bytes) survived, no partial line"
	assert_eq "$name: first line" session "$(head -n1 "$f" | jq -r .type)"
	[ -s "$TMP/s.json" ] || fail "$name: no summary written after the write error"
	assert_eq "$name: summary loss still balanced" true "$(jq .loss.balanced "$TMP/s.json")"
}

# 1. a short command
rc=0
"$SPANTRACE" record -q -o "$small/t.jsonl" --summary "$TMP/s.json" -- \
	"$INFER" "$MODELS/stories260K.bin" -b cpu -n 64 -t 0 --ids >/dev/null 2>"$TMP/rec.err" || rc=$?
check_full "cmd" "$small/t.jsonl" "$TMP/rec.err" "$rc"
# The target exited first, but the run lost data: the summary says why.
assert_eq "cmd: summary stop_reason" "write error" "$(jq -r .stop_reason "$TMP/s.json")"
# the command's pid from the session line (a pgrep pattern that matched
# nothing would pass too)
child=$(head -n1 "$small/t.jsonl" | jq '.pids[0]')
assert_pos "cmd: the command's pid in the session line" "$child"
kill -0 "$child" 2>/dev/null && fail "cmd: the traced engine (pid $child) is still running"
ok "cmd: the traced command (pid $child) is gone"
rm -f "$small/t.jsonl" "$TMP/s.json"

# 2. a serving engine, the disk fills while the tracer runs
start_server
"$SPANTRACE" record -q -p "$SRV" -o "$small/t.jsonl" --summary "$TMP/s.json" 2>"$TMP/rec2.err" &
rec=$!
wait_attached "$small/t.jsonl" "$TMP/rec2.err"
# raised while attached: "back to 0" below is then the detach, not a reader
# that saw nothing
assert_pos "serve: semaphore sum while attached" "$(sem_total "$SRV")"
assert_pos "serve: patched probe sites while attached" "$(sites_patched "$SRV")"
for i in $(seq 100); do
	kill -0 $rec 2>/dev/null || break
	ask
	sleep 0.1
done
rc=0
kill -0 $rec 2>/dev/null && fail "serve: the tracer still runs after $i requests on a full disk" \
	"(the JSONL holds $(stat -c %s "$small/t.jsonl") bytes: events are not written while the tracer runs)"
wait $rec || rc=$?
check_full "serve" "$small/t.jsonl" "$TMP/rec2.err" "$rc"
assert_eq "serve: summary stop_reason" "write error" "$(jq -r .stop_reason "$TMP/s.json")"
sems_zero() { [ "$(sem_total "$SRV")" = 0 ]; }
wait_for sems_zero || fail "serve: semaphores still $(sem_total "$SRV") after the tracer stopped"
sites_clean() { [ "$(sites_patched "$SRV")" = 0 ]; }
wait_for sites_clean || fail "serve: $(sites_patched "$SRV") probe sites still patched after the tracer stopped"
ok "serve: detached (semaphores 0, every probe site its nop again)"
ask
ok "serve: the engine still answers"
stop_server
