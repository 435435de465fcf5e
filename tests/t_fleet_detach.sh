#!/usr/bin/env bash
# t_fleet_detach.sh - a tracing session ends fast: `record -p` exits within
# 800 ms of SIGINT (uprobe_multi links, closed in parallel; per-probe links
# took ~1.2-2 s here). The USDT semaphores are raised while attached and
# back to 0 after; the per-probe fallback (SPANTRACE_NO_UPROBE_MULTI=1) still
# traces every request.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
for b in "$INFER" "$SPANTRACE"; do [ -x "$b" ] || fail "no $b (build first)"; done

fifo_engine
srv=$SRV
ask

# The span_begin semaphore, read from the engine's memory.
sema_off=$(nm -D "$BUILD/libinfer.so" | awk '$3 == "infer_span_begin_semaphore" {print $1}')
[ -n "$sema_off" ] || fail "no infer_span_begin_semaphore in libinfer.so"
semaphore() {
	python3 - "$srv" "$sema_off" <<'PY'
import sys
pid, off = sys.argv[1], int(sys.argv[2], 16)
base = next(int(l.split('-')[0], 16) for l in open(f"/proc/{pid}/maps")
            if l.rstrip().endswith("libinfer.so") and int(l.split()[2], 16) == 0)
with open(f"/proc/{pid}/mem", "rb") as m:
    m.seek(base + off)
    print(int.from_bytes(m.read(2), "little"))
PY
}
assert_eq "semaphore before attach" 0 "$(semaphore)"

# session MODE: record -p, 2 requests, SIGINT; prints the ms from SIGINT to exit
session() {
	: >"$TMP/t.jsonl"
	"$SPANTRACE" record -q -p $srv -o "$TMP/t.jsonl" 2>"$TMP/rec.err" 3>&- &
	local rec=$! t0 t1
	wait_for [ -s "$TMP/t.jsonl" ] || fail "$1: tracer did not attach: $(cat "$TMP/rec.err")"
	ask; ask
	[ "$(semaphore)" -ge 1 ] || fail "$1: semaphore not raised while attached"
	t0=$(date +%s%N)
	kill -INT $rec
	wait $rec || fail "$1: record exited $?: $(cat "$TMP/rec.err")"
	t1=$(date +%s%N)
	assert_eq "$1: requests traced" 2 "$(jq -c 'select(.type == "request")' "$TMP/t.jsonl" | wc -l)"
	assert_eq "$1: semaphore after detach" 0 "$(semaphore)"
	echo $(((t1 - t0) / 1000000)) >"$TMP/ms"
}
session "uprobe_multi"
fast=$(cat "$TMP/ms")
assert_le "exit after SIGINT, ms (uprobe_multi)" "$fast" 800
SPANTRACE_NO_UPROBE_MULTI=1 session "per-probe fallback"
ok "per-probe fallback exit after SIGINT: $(cat "$TMP/ms") ms (uprobe_multi: $fast ms)"
exec 3>&-
wait $srv || fail "server exited $?"
