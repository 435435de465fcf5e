#!/usr/bin/env bash
# t_req_chrome.sh - `record --chrome` on the HTTP engine under concurrent
# streams with preemption: one track per request whose request slice equals
# the JSONL request (start, end to end: from the socket, as it is joined with
# its HTTP request) with server/queued/prefill/decode/respond inside it;
# one step slice per JSONL step, named with its batch; one flow arrow per
# emitted token, from inside its request's slice to inside the step it came
# out of, and per step as many arrows as the JSONL has emits from it. The
# summary's tokens_generated is the client's tokens, counted from the emits.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_bpf
need_node
need_cmd jq jq
need_cmd python3 python3
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
N=6

# 8 blocks of 16 positions for 6 requests of up to ~90 positions: preemptions
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --max-seqs 4 --kv-blocks 8 --block-size 16 \
	--stats "$TMP/engine_stats.json"
"$SPANTRACE" record -q -p "$EPID" --level coarse -o "$TMP/run.jsonl" --chrome "$TMP/run.json" \
	2>"$TMP/record.err" &
rec=$!
wait_for grep -qs '"type":"session"' "$TMP/run.jsonl" || fail "record did not attach: $(cat "$TMP/record.err")"
stream_spec $N 40 8 10 >"$TMP/spec.json"
client "$TMP/spec.json" "$TMP/client.jsonl"
stop_engine
wait "$rec" || fail "record exited $?: $(cat "$TMP/record.err")"
assert_le "some preemptions (the phases must hold across them)" 1 "$(jq .serving.preempted "$TMP/engine_stats.json")"

python3 - "$TMP/run.jsonl" "$TMP/run.json" $N "$TMP/client.jsonl" <<'PY' || fail "chrome timeline does not match the records"
import json, sys
from collections import Counter
recs = [json.loads(l) for l in open(sys.argv[1])]
trace = json.load(open(sys.argv[2]))
n = int(sys.argv[3])
ev = trace["traceEvents"]
STEP_TID, REQ_BASE = 1000000 - 1, 2000000
us = lambda ns: ns / 1000.0
bad = []
def check(cond, what):
    if not cond: bad.append(what)

names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
reqs = [r for r in recs if r["type"] == "request"]
steps = [r for r in recs if r["type"] == "step"]
emits = [r for r in recs if r["type"] == "emit" and r.get("step")]
check(len(reqs) == n, f"{len(reqs)} request records, want {n}")
# no steps and no emits would match no slices and no arrows: the tokens are the client's
client = [json.loads(l) for l in open(sys.argv[4])]
want_tokens = sum(c["usage"]["completion_tokens"] for c in client if c.get("usage"))
check(len(client) == n and want_tokens > 0, f"{len(client)} client results, {want_tokens} tokens")
check(len(steps) > 0, "no step records")
check(sum(r["generated_tokens"] for r in reqs) == want_tokens,
      f"generated tokens {sum(r['generated_tokens'] for r in reqs)}, the client's usage {want_tokens}")
# the summary counts a serving engine's tokens from its emits, as top does
summ = recs[-1]
check(summ["type"] == "summary", "the last record is not the summary")
check(summ.get("tokens_generated") == want_tokens and summ.get("tokens_from") == "emit",
      f"summary: {summ.get('tokens_generated')} tokens from {summ.get('tokens_from')}, the client's usage {want_tokens}")
check((summ.get("tokens_per_s") or 0) > 0, f"summary tokens_per_s {summ.get('tokens_per_s')}")
slices = [e for e in ev if e.get("ph") == "X"]
flows_s = [e for e in ev if e.get("ph") == "s"]
flows_f = [e for e in ev if e.get("ph") == "f"]

for r in reqs:
    tid = REQ_BASE + r["req"]
    check(names.get((r["pid"], tid)) == f"request {r['req']}", f"no track for request {r['req']}")
    mine = {e["name"]: e for e in slices if e["tid"] == tid}
    top = mine.get(f"request {r['req']}")
    if not top:
        bad.append(f"no slice for request {r['req']}"); continue
    check(abs(top["ts"] - us(r["ts_ns"])) < 0.002 and abs(top["dur"] - us(r["dur_ns"])) < 0.002,
          f"request {r['req']} slice != record")
    end = top["ts"] + top["dur"]
    for ph in ("queued", "prefill", "decode"):
        p = mine.get(ph)
        check(p is not None, f"request {r['req']} has no {ph} phase")
        if p: check(top["ts"] - 0.002 <= p["ts"] and p["ts"] + p["dur"] <= end + 0.002, f"{ph} outside request {r['req']}")
    # joined with its socket's request (from "socket"): the engine's part
    # lies inside, between the server's wait and the response's last bytes
    joined = r.get("from") == "socket"
    check(joined, f"request {r['req']} not joined with its HTTP request: {r}")
    engine_end = us(r["engine_ts_ns"] + r["engine_dur_ns"]) if joined else end
    if "decode" in mine:
        check(abs(mine["decode"]["ts"] + mine["decode"]["dur"] - engine_end) < 0.002,
              f"decode of {r['req']} does not end at the engine's end")
    if joined:
        for ph, t0, t1 in (("server", us(r["ts_ns"]), us(r["engine_ts_ns"])), ("respond", engine_end, end)):
            p = mine.get(ph)
            check(p is None and t1 - t0 < 0.002 or p is not None and abs(p["ts"] - t0) < 0.002 and
                  abs(p["ts"] + p["dur"] - t1) < 0.002, f"request {r['req']}: {ph} phase {p} != [{t0}, {t1}]")
    # every arrow from this track starts inside the request
    for s in flows_s:
        if s["tid"] == tid:
            check(top["ts"] - 0.002 <= s["ts"] <= end + 0.002, f"arrow outside request {r['req']}")

step_slices = {e["args"]["step"]: e for e in slices if e["tid"] == STEP_TID}
check(len(step_slices) == len(steps), f"{len(step_slices)} step slices, {len(steps)} step records")
for st in steps:
    e = step_slices.get(st["step"])
    if not e:
        bad.append(f"no slice for step {st['step']}"); continue
    check(f"{st['nseqs']} seqs" in e["name"] and f"{st['prefill_tokens']} prefill" in e["name"]
          and f"{st['decode_tokens']} decode" in e["name"], f"step {st['step']} label {e['name']!r}")

check(len(flows_s) == len(flows_f) == len(emits), f"arrows {len(flows_s)}/{len(flows_f)}, emits {len(emits)}")
check(len(emits) == sum(r["generated_tokens"] for r in reqs), "emits != generated tokens")
ends = {e["id"]: e for e in flows_f}
landed = Counter()
for s in flows_s:
    f = ends.get(s["id"])
    if not f:
        bad.append(f"arrow {s['id']} has no end"); continue
    inside = [k for k, e in step_slices.items() if e["ts"] - 0.002 <= f["ts"] <= e["ts"] + e["dur"] + 0.002]
    check(len(inside) == 1, f"arrow {s['id']} ends in {len(inside)} steps")
    if inside: landed[inside[0]] += 1
check(landed == Counter(e["step"] for e in emits), "arrows per step != emits per step")
for k, c in landed.items():
    check(c <= step_slices[k]["args"]["nseqs"], f"step {k}: {c} arrows > {step_slices[k]['args']['nseqs']} seqs")
for b in bad[:10]: print("FAIL:", b, file=sys.stderr)
print(f"ok: {len(reqs)} request tracks, {len(step_slices)} steps, {len(flows_s)} arrows")
sys.exit(1 if bad else 0)
PY
ok "timeline matches the JSONL"
