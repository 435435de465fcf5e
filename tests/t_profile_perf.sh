#!/usr/bin/env bash
# t_profile_perf.sh - perf's own SDT tooling works alongside spantrace on the
# same probes: `perf buildid-cache --add` registers the engine library,
# `perf list sdt` shows every infer probe, `perf probe sdt_infer:token_begin`
# defines the event, and `perf record -e sdt_infer:token_begin` wrapped
# around `spantrace record -- infer` sees every token, exactly as many as
# spantrace streamed and the engine counted itself.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
command -v perf >/dev/null || skip "no perf binary (Debian package linux-perf)"
[ -d /sys/kernel/tracing/events ] || skip "tracefs is not mounted at /sys/kernel/tracing (perf probe needs it)"
[ -x "$SPANTRACE" ] || fail "no $SPANTRACE (build first)"

LIB=$BUILD/libinfer.so
export PERF_BUILDID_DIR=$TMP/buildid   # keep perf's cache out of \$HOME
EVENT=sdt_infer:token_begin

# The event name is global; one left by someone else is theirs to keep.
if perf probe -l 2>/dev/null | grep -q "$EVENT "; then
	skip "$EVENT is already defined on this machine (perf probe -l); not touching it"
fi
cleanup() { perf probe -q -d "$EVENT" 2>/dev/null; rm -rf "$TMP"; jobs -p | xargs -r kill 2>/dev/null; }
trap cleanup EXIT

perf buildid-cache --add "$LIB" || fail "perf buildid-cache --add $LIB"
listed=$(perf list sdt 2>/dev/null | grep -c 'sdt_infer:')
assert_eq "infer probes in perf list sdt" 12 "$listed"
perf probe -q -a "$EVENT" || fail "perf probe -a $EVENT"
perf probe -l 2>/dev/null | grep -q "$EVENT" || fail "perf probe -l does not show $EVENT"

N=48
perf record -q -e "$EVENT" -o "$TMP/perf.data" -- \
	"$SPANTRACE" record -q -o "$TMP/trace.jsonl" -- \
	"$INFER" "$MODELS/stories260K.bin" -z "$MODELS/tokenizer.bin" -n $N -b cpu -s 1 -t 0 \
	--stats "$TMP/stats.json" >/dev/null 2>"$TMP/err" || { cat "$TMP/err"; fail "perf record + spantrace record failed"; }

pid=$(jq -r 'select(.type == "session") | .pids[0]' "$TMP/trace.jsonl")
[ -n "$pid" ] && [ "$pid" != null ] || fail "no session record with the traced pid"
perf_hits=$(perf script -i "$TMP/perf.data" -F pid,event 2>/dev/null | awk -v p="$pid" '$1 == p && /token_begin/' | wc -l)
traced=$(jq -c 'select(.type == "token")' "$TMP/trace.jsonl" | wc -l)
engine=$(jq .tokens "$TMP/stats.json")
assert_eq "engine tokens" $N "$engine"
assert_eq "perf token_begin hits" "$engine" "$perf_hits"
assert_eq "spantrace token records" "$engine" "$traced"
