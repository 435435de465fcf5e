#!/usr/bin/env bash
# t_load_coexist.sh - spantrace, bpftrace and perf on the same probes of the
# same engine run at once: all three see every hit. bpftrace counts
# span/op begins and ends per kind, perf records sdt_infer:span_begin, and
# spantrace records the run; each equals the engine's own --stats.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
need_bpf
need_models
need_binaries
need_cmd bpftrace bpftrace
need_cmd perf linux-perf
[ -d /sys/kernel/tracing/events ] || skip "tracefs is not mounted at /sys/kernel/tracing (perf probe needs it)"
EVENT=sdt_infer:span_begin
if perf probe -l 2>/dev/null | grep -q "$EVENT "; then
	skip "$EVENT is already defined on this machine (perf probe -l); not touching it"
fi
trap 'perf probe -q -d "$EVENT" 2>/dev/null; jobs -p | xargs -r kill 2>/dev/null; rm -rf "$TMP"' EXIT

# bpftrace first: a count per (pid, kind) of every begin and end
bpftrace -e "
usdt:$LIBINFER:infer:span_begin { @b[pid, arg0] = count(); }
usdt:$LIBINFER:infer:span_end { @e[pid, arg0] = count(); }
usdt:$LIBINFER:infer:op_begin { @b[pid, arg0] = count(); }
usdt:$LIBINFER:infer:op_end { @e[pid, arg0] = count(); }
usdt:$LIBINFER:infer:request_begin { printf(\"armed %d\\n\", pid); }" >"$TMP/bt.out" 2>"$TMP/bt.err" &
bt=$!
wait_for grep -q Attaching "$TMP/bt.out" "$TMP/bt.err" || fail "bpftrace did not attach: $(cat "$TMP/bt.err")"

# perf: the SDT event (it bumps the semaphore itself), recorded system-wide
perf buildid-cache --add "$LIBINFER" || fail "perf buildid-cache --add $LIBINFER"
perf probe -q -x "$LIBINFER" "%$EVENT" 2>"$TMP/probe.err" || fail "perf probe $EVENT: $(cat "$TMP/probe.err")"
# perf starts disabled and acks "enable" on a control fifo once it counts.
mkfifo "$TMP/ctl" "$TMP/ack"
exec {ctl}<>"$TMP/ctl" {ack}<>"$TMP/ack"  # read-write: opening does not block
perf record -q -D -1 --control "fifo:$TMP/ctl,$TMP/ack" -e "$EVENT" -a -o "$TMP/perf.data" 2>"$TMP/perf.err" &
pr=$!
echo enable >&"$ctl"
read -r -t 30 -u "$ack" reply || fail "perf record did not ack enable: $(cat "$TMP/perf.err")"
assert_eq "perf record armed" ack "$reply"
# bpftrace prints "Attaching" before its probes are armed: run one-token
# canaries (other pids, not counted) until it reports one.
armed() {
	"$INFER" "$MODELS/stories260K.bin" -b cpu -n 1 -t 0 --ids >/dev/null 2>&1
	grep -q '^armed' "$TMP/bt.out"
}
wait_for armed || fail "bpftrace saw no canary request: $(cat "$TMP/bt.err")"

"$SPANTRACE" record -q -o "$TMP/t.jsonl" --summary "$TMP/s.json" -- \
	"$INFER" "$MODELS/stories260K.bin" -b cpu -n 32 -t 0 --ids --stats "$TMP/e.json" >/dev/null 2>"$TMP/rec.err" ||
	fail "record failed: $(tail -n 3 "$TMP/rec.err")"
epid=$(head -n1 "$TMP/t.jsonl" | jq '.pids[0]')
assert_pos "the engine's pid in the session line" "$epid"
kill -INT $pr
# perf record re-raises the SIGINT it handled: 130 is its normal exit here
rc=0
wait $pr || rc=$?
[ $rc = 0 ] || [ $rc = 130 ] || fail "perf record exited $rc: $(cat "$TMP/perf.err")"
stop_bpftrace $bt
grep -q '^@b\[' "$TMP/bt.out" || fail "bpftrace printed no counts: $(head -c 500 "$TMP/bt.out")"

# bt_count reads an absent map entry as 0: the kinds the engine fired must
# be there, so that 0 == 0 is not all that is compared
assert_pos "engine forward spans" "$(jq .spans.forward.count "$TMP/e.json")"
assert_pos "engine span_begin calls" "$(jq .probes.span_begin "$TMP/e.json")"
bt_count() { # MAP KIND -> the engine process's count (0 if absent)
	awk -v m="@$1[$epid, $2]:" 'index($0, m) == 1 { print $NF; f = 1 } END { if (!f) print 0 }' "$TMP/bt.out"
}
for k in $(seq 0 12); do
	n=$(jq -r ".spans | keys_unsorted[$k]" "$TMP/e.json")
	want=$(jq ".spans.$n.count" "$TMP/e.json")
	assert_eq "bpftrace: $n begins" "$want" "$(bt_count b "$k")"
	assert_eq "bpftrace: $n ends" "$want" "$(bt_count e "$k")"
	assert_eq "spantrace: $n spans" "$want" "$(jq ".spans.$n.count // 0" "$TMP/s.json")"
done
perf_hits=$(perf script -i "$TMP/perf.data" -F pid 2>/dev/null | awk -v p="$epid" '$1 == p' | wc -l)
assert_eq "perf: $EVENT hits of the engine" "$(jq .probes.span_begin "$TMP/e.json")" "$perf_hits"
assert_eq "spantrace: dropped" 0 "$(jq .loss.dropped "$TMP/s.json")"
assert_eq "spantrace: fired == engine's events" "$(engine_events "$TMP/e.json")" \
	"$(jq '.loss.by_type | .span.fired + .token.fired + .emit.fired + .request.fired' "$TMP/s.json")"
