#!/usr/bin/env bash
# t_fault_attach_busy.sh - `record -p` attaches to an engine that is busy
# serving (requests back to back, so the attach lands mid-forward-pass, more
# than once): a span whose begin or end fell outside the attach is at worst
# an error, counted; it must never poison the rest of the session. Every
# forward span the tracer reports is a root span (depth 0, no parent), the
# span stack never overflows, and after the attach every request's forward
# spans arrive: forward lines >= requests seen - 1. The third attach races a
# daemon's attach to the same library (which made attaches take seconds).
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
need_bpf
need_binaries

ensure_demo_model
# A feeder that keeps the engine busy: a new prompt as soon as a reply comes.
mkfifo "$TMP/in"
: >"$TMP/out" # before the feeder looks for it (the engine's redirect is async)
OMP_NUM_THREADS=1 "$INFER" "$DEMO_MODEL" -z "$DEMO_TOK" --serve -n 8 -b cpu -t 0 <"$TMP/in" >"$TMP/out" 2>"$TMP/srv.err" &
SRV=$!
exec 3>"$TMP/in"
(
	n=0
	while [ ! -e "$TMP/stop" ] && [ -e "$TMP/out" ]; do
		echo "once upon a time" >&3
		n=$((n + 1))
		while [ "$(wc -l <"$TMP/out" 2>/dev/null || echo $n)" -lt $n ] && [ ! -e "$TMP/stop" ]; do sleep 0.005; done
	done
) &
feeder=$!
for i in $(seq 300); do have_replies 2 && break; sleep 0.1; done # up to 30 s on a loaded box
have_replies 2 || fail "the engine does not answer: $(tail -n 2 "$TMP/srv.err")"

for round in 1 2 3; do
	d=$TMP/r$round
	mkdir -p "$d"
	if [ $round = 3 ]; then
		# A daemon attaching at the same moment makes our attach slow
		# (uprobe registrations serialize): a long begin-armed window.
		"$SPANTRACE" daemon --binary "$INFER" --listen 127.0.0.1:0 >"$TMP/daemon.log" 2>&1 &
		dpid=$!
	fi
	"$SPANTRACE" record -q -p "$SRV" -o "$d/t.jsonl" --summary "$d/s.json" 2>"$d/rec.err" &
	rec=$!
	wait_attached "$d/t.jsonl" "$d/rec.err"
	# at least 2 whole requests seen (the JSONL is flushed once a second);
	# up to 30 s on a loaded box
	for i in $(seq 300); do
		[ "$(grep -c '"type":"request"' "$d/t.jsonl")" -ge 2 ] && break
		sleep 0.1
	done
	kill -INT $rec
	wait $rec || fail "round $round: record exited $?: $(cat "$d/rec.err")"
	s=$d/s.json
	reqs=$(jq .requests "$s")
	fwd=$(jq -c 'select(.type == "span" and .name == "forward")' "$d/t.jsonl" | wc -l)
	echo "round $round: attach $(head -n1 "$d/t.jsonl" | jq .attach_ns) ns, $reqs requests, $fwd forward spans," \
		"span_errors $(jq .span_errors "$s"), stack_overflow $(jq .stack_overflow "$s")"
	# the floor first: the counts below mean something only if requests ran
	assert_le "round $round: requests completed while attached" 2 "$reqs"
	assert_pos "round $round: forward spans" "$fwd"
	need_num "round $round: span_errors (counted, not absent)" "$(jq .span_errors "$s")"
	assert_eq "round $round: stack overflows" 0 "$(jq .stack_overflow "$s")"
	assert_eq "round $round: forward spans not at depth 0 or with a parent" 0 \
		"$(jq -c 'select(.type == "span" and .name == "forward" and (.depth != 0 or .parent != null))' "$d/t.jsonl" | wc -l)"
	assert_le "round $round: forward spans >= requests - 1" "$((reqs - 1))" "$fwd"
	assert_eq "round $round: balanced" true "$(jq .loss.balanced "$s")"
done
kill -TERM $dpid
wait $dpid || fail "daemon exited $?: $(tail -n 3 "$TMP/daemon.log")"
touch "$TMP/stop"
wait $feeder
stop_server
