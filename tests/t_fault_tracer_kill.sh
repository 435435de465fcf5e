#!/usr/bin/env bash
# t_fault_tracer_kill.sh - the tracer is SIGKILLed while attached to a
# serving engine (-p PID). The kernel must take every probe away: the
# engine's USDT semaphores (read from /proc/PID/mem) drop back to 0 and every
# probe site holds its original 5-byte nop again; no uprobe_events entry is
# left behind; the engine keeps answering every request, with the reply it
# gave before it was ever traced (greedy sampling: -t 0). The semaphores and
# sites are shown raised while the tracer is attached, so that "back to 0"
# is not a reader that saw nothing.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
need_bpf
need_binaries
need_cmd readelf binutils # probestate.py reads the stapsdt notes
REQS=20
# ask_all N: sends N prompts at once and waits up to 30 s for their replies;
# fails unless each is the untraced reply $first.
ask_all() {
	local want=$(($(replies) + $1)) i
	for i in $(seq "$1"); do echo "once upon a time" >&3; done
	for i in $(seq 300); do have_replies $want && break; sleep 0.1; done
	assert_eq "replies after $1 more requests" $want "$(replies)"
	assert_eq "of the last $1, replies unlike the first" 0 "$(tail -n "$1" "$TMP/out" | grep -cvxF -- "$first")"
}

# uprobe_events is only readable with tracefs mounted (run.sh mounts it)
uprobe_events() { cat /sys/kernel/tracing/uprobe_events 2>/dev/null || echo unreadable; }
events_before=$(uprobe_events)
start_server
ask
first=$(head -n 1 "$TMP/out")
[ -n "$first" ] || fail "empty reply"
assert_eq "semaphores before tracing" 0 "$(sem_total "$SRV")"
assert_eq "patched probe sites before tracing" 0 "$(sites_patched "$SRV")"
ask_all $REQS
ok "$REQS requests untraced, all answered '$first'"

"$SPANTRACE" record -q -p "$SRV" -o "$TMP/t.jsonl" 2>"$TMP/rec.err" &
rec=$!
wait_attached "$TMP/t.jsonl" "$TMP/rec.err"
ask
assert_eq "reply while traced" "$first" "$(tail -n 1 "$TMP/out")"
assert_pos "semaphore sum while attached" "$(sem_total "$SRV")"
assert_pos "patched probe sites while attached" "$(sites_patched "$SRV")"

kill -KILL $rec
wait $rec 2>/dev/null
# The kernel releases the links asynchronously after the last fd closes.
sems_zero() { [ "$(sem_total "$SRV")" = 0 ]; }
wait_for sems_zero || fail "semaphores still $(sem_total "$SRV") 10 s after the tracer died"
ok "every semaphore back to 0"
sites_clean() { [ "$(sites_patched "$SRV")" = 0 ]; }
wait_for sites_clean || fail "probe sites still patched: $("$HELPERS/probestate.py" "$SRV" "$LIBINFER" | grep -v 0f1f440000)"
ok "every probe site holds its nop again"
# (compared here, not with assert_eq: the file is empty when nothing is defined)
if [ "$events_before" != unreadable ]; then
	[ "$events_before" = "$(uprobe_events)" ] || fail "uprobe_events changed: before '$events_before', now '$(uprobe_events)'"
	ok "uprobe_events unchanged"
fi

ask_all $REQS
ok "$REQS requests after the tracer died, all answered '$first'"
kill -0 "$SRV" || fail "server died"
stop_server
ok "server answered $(replies) requests and exited cleanly"
# a tracefs we cannot read left the uprobe_events promise unchecked: not a pass
[ "$events_before" != unreadable ] || skip "/sys/kernel/tracing/uprobe_events is unreadable: leftover uprobe_events not checked"
