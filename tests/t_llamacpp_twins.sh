#!/usr/bin/env bash
# t_llamacpp_twins.sh - llama-server's requests linked to their sockets when
# prompts are twins (issue 61): 8 concurrent streams x 4 rounds whose
# prompts share length and last token ("... kid 3 1 ran and then"), then 8
# identical prompts. llama-server keeps each slot's prompt cache, so from
# the second round on a slot decodes only what differs from its last prompt:
# the link compares the token-id hash of the prompt with the cache's part
# plus the decoded part (bpf/engines.bpf.h, never leaving the kernel).
# The witness: the lean client (tests/node/sse_client.js) with max_tokens
# 16 + index, so a request's socket events (its tokens + 2) tell which
# stream it was; a crossed link would pair a sequence with another length.
# Identical prompts' links are guesses the tracer's join pairs as a group
# (user/core/twinpair.h), and their sequences end with the group's last
# response: all 48 requests are out within 1 s of it, on an idle server,
# and the daemon counts 8 more identical ones (and their TTFTs) within 1 s.
# The OTLP request spans (tests/node/otlp_receiver.js) are all from the
# socket, the identical prompts' 8 marked spantrace.link=identical_twin.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_bpf
need_node
need_cmd jq jq
need_cmd curl curl
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"

start_llama_server
at_exit 'kill $lpid 2>/dev/null'
base="http://127.0.0.1:$lport"
twin="Once upon a time, a kid {i} {r} ran and then"
# the twins: one length and one last token, as llama-server tokenizes them
lens=$(for i in 0 7; do for r in 0 3; do p=${twin//\{i\}/$i}; p=${p//\{r\}/$r}
	curl -sf "$base/tokenize" -d "{\"content\":\"$p\"}" | jq -c '[(.tokens | length), .tokens[-1]]'; done; done | sort -u)
assert_eq "twins' [length, last token] (llama-server's /tokenize)" 1 "$(wc -l <<<"$lens")"

# the OTLP spans too: a receiver of the protocol's own schema
node "$ROOT/tests/node/otlp_receiver.js" "$TMP/otlp.recv" >"$TMP/otlp.port" 2>"$TMP/otlp.err" &
at_exit "kill $! 2>/dev/null"
wait_for grep -q listening "$TMP/otlp.port" || fail "the OTLP receiver did not start: $(cat "$TMP/otlp.err")"
"$SPANTRACE" record -q -p "$lpid" --level coarse -o "$TMP/l.jsonl" --otlp "http://127.0.0.1:$(awk '{ print $2 }' "$TMP/otlp.port")" \
	2>"$TMP/rec.err" &
rec=$!
wait_for grep -qs '"type":"session"' "$TMP/l.jsonl" || fail "record did not attach: $(cat "$TMP/rec.err")"
CLIENT_KEEPALIVE=0 SSE_WARMUP=1 SSE_PROMPT="$twin" node "$ROOT/tests/node/sse_client.js" "$base" 8 4 16 \
	>"$TMP/c.jsonl" 2>"$TMP/client.err" || fail "sse_client (twins): $(cat "$TMP/client.err")"
CLIENT_KEEPALIVE=0 SSE_PROMPT="Once upon a time, a kid ran and then" node "$ROOT/tests/node/sse_client.js" "$base" 8 1 16 \
	>>"$TMP/c.jsonl" 2>"$TMP/client.err" || fail "sse_client (identical): $(cat "$TMP/client.err")"
sleep 1   # the bound itself: what is out 1 s after the last response
assert_eq "request records out 1 s after the last response (an idle server)" 48 \
	"$(grep -c '"type":"request"' "$TMP/l.jsonl")"
kill -INT "$rec"
wait "$rec" || fail "record exited $?: $(cat "$TMP/rec.err")"

python3 - "$TMP/l.jsonl" "$TMP/c.jsonl" <<'PY' || fail "twins' requests do not match the client's"
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
client = [json.loads(l) for l in open(sys.argv[2])]
reqs = sorted((r for r in recs if r["type"] == "request"), key=lambda r: r["ts_ns"])
bad = []
def check(cond, what):
    if not cond: bad.append(what)
# 8 warm-up + 32 twins + 8 identical
check(len(client) == 40, f"the client finished {len(client)} of 40 streams")
check(len(reqs) == 48, f"{len(reqs)} request records, want 48")
for r in reqs:
    check(r["from"] == "socket", f"request {r['req']} not linked to its socket: {r}")
    check(r.get("link") in (None, "identical_twin"), f"request {r['req']}: link {r.get('link')}")
    # its own stream: max_tokens 16 + index, each token an event, plus the
    # last chunk and [DONE]
    check(r.get("events") == r["generated_tokens"] + 2,
          f"request {r['req']}: {r['generated_tokens']} tokens on a socket of {r.get('events')} events (crossed)")
twins = [r for r in reqs if r.get("link") == "identical_twin"]
check(len(twins) == 8, f"{len(twins)} requests say they were chosen among identical prompts, want 8")
# rounds go one after another: the records in time order, 8 a round (the
# first the unreported warm-up), each paired with the client's of its length
gaps = {"ttft": [], "e2e": []}
for rnd in range(5):
    mine = {r["events"]: r for r in reqs[8 * (rnd + 1): 8 * (rnd + 2)] if "events" in r}
    for c in client[8 * rnd: 8 * (rnd + 1)]:
        r = mine.get(c["events"])
        if r is None:
            bad.append(f"round {rnd}: no request of {c['events']} events"); continue
        gaps["ttft"].append(c["ttft_ms"] - r["ttft_ns"] / 1e6)
        gaps["e2e"].append(c["total_ms"] - r["dur_ns"] / 1e6)
for name, g in gaps.items():
    if len(g) != 40:
        bad.append(f"{len(g)} {name} pairs, want 40"); continue
    med = statistics.median(g)
    print(f"ok: {name}: client - tracer median {med:.2f} ms (n={len(g)})")
    check(-1 <= med <= 2, f"{name} median gap {med:.2f} ms, not within [-1, 2]")
if bad:
    print("\n".join(bad[:12])); sys.exit(1)
print(f"ok: {len(reqs)} requests, each linked to its own socket ({len(twins)} among identical prompts)")
PY
# the OTLP request spans say the same: each from the socket, the 8
# identical prompts' links named as guesses
/usr/bin/python3 - "$TMP/otlp.recv" <<'PY' || fail "the OTLP request spans"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert not [r for r in recs if "invalid" in r], "payloads the OTLP schema refused"
reqs = [s for r in recs for s in r.get("spans", []) if s["name"] == "request"]
assert len(reqs) == 48, f"{len(reqs)} request spans, want 48"
assert all(s["attributes"]["spantrace.from"] == "socket" for s in reqs), "a request span not from the socket"
links = [s["attributes"].get("spantrace.link") for s in reqs]
assert links.count("identical_twin") == 8 and links.count(None) == 40, links
print("ok: 48 OTLP request spans from the socket, 8 of them named identical_twin")
PY
ok "twins and identical prompts: every request linked to its own socket"

# The daemon, attached to the same server (its slots' caches now hold the
# identical prompt): 8 more identical prompts, and within 1 s of the last
# response, on an idle server, llama.cpp's own series count all 8, with
# their TTFT observations (interval 0.2 s)
source "$(dirname "$0")/daemon_lib.sh"
"$SPANTRACE" daemon -p "$lpid" --listen 127.0.0.1:0 --interval 0.2 >"$TMP/daemon.log" 2>&1 &
DPID=$!
wait_for grep -q 'metrics at http' "$TMP/daemon.log" || fail "daemon did not start: $(cat "$TMP/daemon.log")"
DPORT=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")
CLIENT_KEEPALIVE=0 SSE_PROMPT="Once upon a time, a kid ran and then" node "$ROOT/tests/node/sse_client.js" "$base" 8 1 16 \
	>"$TMP/d.jsonl" 2>"$TMP/client.err" || fail "sse_client (identical, daemon): $(cat "$TMP/client.err")"
sleep 1   # the bound itself: what the daemon counts 1 s after the last response
metrics >"$TMP/m.txt" || fail "no /metrics"
assert_eq "the daemon's llama.cpp requests 1 s after the last response (idle)" 8 \
	"$(msum "$TMP/m.txt" spantrace_requests_total 'engine="llamacpp"')"
assert_eq "and their TTFT observations" 8 \
	"$(msum "$TMP/m.txt" spantrace_time_to_first_token_seconds_count 'engine="llamacpp"')"
stop_daemon
ok "the daemon: identical prompts counted within 1 s of the last response, on an idle server"
