#!/usr/bin/env bash
# t_req_socket.sh - `record --http`: requests as the user felt them, from the
# server's socket (issue 47, its first part). `infer --http` serves 8
# concurrent streaming requests x 4 rounds from a lean client on node's own
# sockets (tests/node/sse_client.js: one event loop, no SDK between the
# socket and its clock; two warm-up rounds first, unreported and unmatched).
# Each request's `http` record is matched with the client's own by start
# time (wall clock), and:
# - the tracer's TTFT (arrival on the socket .. the first SSE event written)
#   tracks the client's (its send .. its first chunk): the median gap is at
#   most 2 ms, e2e likewise. The 90th percentile is held to 8 ms, not the
#   issue's 5: on `infer --http` a whole round of 8 now and then reads its
#   first event 2.7-5.2 ms after the server's write (measured: MHD sets
#   TCP_NODELAY and does not cork, so the bytes left; the client's event
#   loop shares 2 cores with the engine). llama-server's p90 was under 0.5 ms;
# - events = the client's "data:" lines ([DONE] included);
# - method, path (no query string), status 200, stream true;
# - a non-streaming request and a GET with a query string, a 404, and a
#   second request on one keep-alive connection (seq 2) are seen right;
# - no request body or response text is in the output;
# - on llama-server too, prompts as text and as token ids alike.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_bpf
need_node
need_cmd jq jq
need_cmd curl curl
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"

# One engine thread: the client's clock must not wait for a core (2 here)
# the engine holds; what is compared is the tracer with the client.
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --threads 1 --max-seqs 8 --stats "$TMP/engine.json"
"$SPANTRACE" record -q --http -p "$EPID" --level coarse -o "$TMP/run.jsonl" --summary "$TMP/s.json" \
	2>"$TMP/record.err" &
rec=$!
wait_for grep -qs '"type":"session"' "$TMP/run.jsonl" || fail "record did not attach: $(cat "$TMP/record.err")"
SSE_WARMUP=2 node "$ROOT/tests/node/sse_client.js" "$BASE" 8 4 24 >"$TMP/client.jsonl" 2>"$TMP/client.err" ||
	fail "sse_client: $(cat "$TMP/client.err")"
# the odd ones: not streamed; a query string; a 404; two on one connection
curl -sf "$BASE/v1/completions" -H 'Content-Type: application/json' \
	-d '{"prompt":"secret prompt words","max_tokens":4,"temperature":0}' >"$TMP/plain.json" ||
	fail "plain completion failed"
curl -s -o /dev/null "$BASE/health?token=abc" "$BASE/health" || fail "health failed"
curl -s -o /dev/null "$BASE/no/such/path" || fail "404 request failed"
wait_for grep -qs '"path":"/no/such/path"' "$TMP/run.jsonl"
stop_engine
wait "$rec" || fail "record exited $?: $(cat "$TMP/record.err")"

# compare RUN.jsonl CLIENT.jsonl N WARM OTHERS JOINED: the N reported streams
# against the client's results, each matched to the record that started
# nearest its send; WARM more streams were the client's unreported warm-up;
# OTHERS=1: also the plain, query, 404 and keep-alive requests above; at
# least JOINED engine requests joined with their socket's
compare() {
	python3 - "$@" <<'PY' || fail "socket requests do not match the client's ($1)"
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
client = [json.loads(l) for l in open(sys.argv[2])]
want, warm, others_too = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
sess = recs[0]
wall = sess["start_wall_ns"] - sess["start_mono_ns"]
http = [r for r in recs if r["type"] == "http"]
streams = sorted((r for r in http if r["path"] == "/v1/completions" and r["stream"]), key=lambda r: r["start_ns"])
bad = []
def check(cond, what):
    if not cond: bad.append(what)
check(len(client) == want and all("ttft_ms" in c and c["status"] == 200 for c in client),
      f"the client finished {sum(1 for c in client if 'ttft_ms' in c)} of {len(client)} streams")
check(len(streams) == want + warm, f"{len(streams)} streaming http records, want {want} + {warm} warm-up")
cl = sorted(client, key=lambda c: c["sent_epoch_ms"])
# Pair in order: the client sends a round's requests 0.05 ms apart, less
# than the wall clock's offset between the two processes, so nearest-start
# pairing could rotate a round by one; arrivals keep the send order, so an
# order-preserving alignment (least total start difference; the records
# include the unreported warm-ups) pairs each request with its own.
def gap(c, r):
    return abs((r["start_ns"] + wall) / 1e6 - c["sent_epoch_ms"])
n, m, INF = len(cl), len(streams), float("inf")
dp = [[INF] * (m + 1) for _ in range(n + 1)]
dp[0] = [0.0] * (m + 1)
for i in range(1, n + 1):
    for j in range(i, m + 1):
        dp[i][j] = min(dp[i][j - 1], dp[i - 1][j - 1] + gap(cl[i - 1], streams[j - 1]))
pairs, j = [], m
for i in range(n, 0, -1):
    while j > i and dp[i][j] == dp[i][j - 1]:
        j -= 1
    pairs.append((cl[i - 1], streams[j - 1]))
    j -= 1
ttft_gap, e2e_gap = [], []
for c, r in reversed(pairs if n <= m else []):
    start_ms = (r["start_ns"] + wall) / 1e6
    check(abs(start_ms - c["sent_epoch_ms"]) < 50, f"request starts {start_ms - c['sent_epoch_ms']:.1f} ms from the client's send")
    check(r["events"] == c["events"], f"{r['events']} events, the client's {c['events']}")
    check(r["method"] == "POST" and r["status"] == 200 and r["end"] == "response" and r["start"] == "arrival",
          f"record {r}")
    ttft_gap.append(c["ttft_ms"] - r["ttft_ns"] / 1e6)
    e2e_gap.append(c["total_ms"] - r["dur_ns"] / 1e6)
def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]
for name, g in (("ttft", ttft_gap), ("e2e", e2e_gap)):
    if not g:
        bad.append(f"no {name} pairs"); continue
    med, p90 = statistics.median(g), q(g, 0.9)
    print(f"ok: {name}: client - tracer gap median {med:.2f} ms, p90 {p90:.2f} ms, min {min(g):.2f}, max {max(g):.2f} (n={len(g)})")
    check(-1 <= med <= 2, f"{name} median gap {med:.2f} ms, not within [-1, 2]")
    check(p90 <= 8, f"{name} p90 gap {p90:.2f} ms > 8")
# one request from both sides (core/reqjoin.h): each stream the engine
# served is one request record, timed from the socket; JOIN_MIN of them
# must be joined (llama-server never tokenizes a prompt of token ids, the
# only link it gives)
reqs = {r["req"]: r for r in recs if r["type"] == "request"}
joined = [r for r in reqs.values() if r.get("from") == "socket"]
for h in streams:
    if "req" not in h:
        continue
    r = reqs.get(h["req"])
    check(r is not None and r["from"] == "socket", f"http record names request {h['req']}, which is {r}")
    if r is None:
        continue
    check(r["ts_ns"] == h["start_ns"] and r["dur_ns"] == h["dur_ns"] and r["ttft_ns"] == h["ttft_ns"] and
          r["events"] == h["events"] and r["status"] == h["status"] and r["conn"] == h["conn"],
          f"request {r['req']} does not carry its socket's times: {r} / {h}")
    check(r["engine_ts_ns"] >= r["ts_ns"] and r["before_engine_ns"] == r["engine_ts_ns"] - r["ts_ns"] and
          0 < r["engine_ttft_ns"] <= r["ttft_ns"], f"request {r['req']}: engine times outside the socket's: {r}")
    check(r["generated_tokens"] > 0 and r["prompt_tokens"] > 0, f"request {r['req']}: no tokens {r}")
join_min = int(sys.argv[6]) if len(sys.argv) > 6 else 0
check(len(joined) >= join_min and len(joined) == sum(1 for h in http if "req" in h),
      f"{len(joined)} requests joined with their socket's, want >= {join_min}, http records naming one: "
      f"{sum(1 for h in http if 'req' in h)}")
print(f"ok: {len(joined)} engine requests joined with their socket's")
# every request not joined is counted as such, never silent
summ = recs[-1]
links = summ.get("http", {}).get("engine_requests", {})
check(links.get("joined") == len(joined) and links.get("not_joined") == len(reqs) - len(joined),
      f"summary engine_requests {links}: {len(joined)} joined of {len(reqs)} request records")
print(f"ok: summary engine_requests {links}")
# the headline's request figures are the socket's only: those not joined
# keep their engine times apart (not_joined_ttft), never in the headline
check(summ.get("requests_timed_from") == ("socket" if joined else "none") and
      summ["ttft"]["count"] == sum(1 for r in joined if r["ttft_ns"]) and summ["e2e"]["count"] == len(joined) and
      links["not_joined_e2e"]["count"] == len(reqs) - len(joined) and summ["requests"] == len(reqs),
      f"summary headline: from {summ.get('requests_timed_from')}, ttft {summ['ttft']['count']}, e2e "
      f"{summ['e2e']['count']}, {len(joined)} joined of {len(reqs)}")
print(f"ok: the summary's headline ttft and e2e: the {len(joined)} joined requests' socket times")
others = [r for r in http if r not in streams]
if not others_too:
    check(not others, f"{len(others)} other requests: {others[:2]}")
    if bad:
        print("\n".join(bad[:12])); sys.exit(1)
    print(f"ok: {len(streams)} streams, each as the client saw it")
    sys.exit(0)
plain = [r for r in others if r["path"] == "/v1/completions"]
check(len(plain) == 1 and not plain[0]["stream"] and plain[0]["events"] == 0 and plain[0]["status"] == 200,
      f"the plain completion: {plain}")
health = [r for r in others if r["path"] == "/health"]
check(len(health) == 2 and sorted(r["seq"] for r in health) == [1, 2] and len({r["conn"] for r in health}) == 1,
      f"two GETs on one connection, the query cut: {health}")
nf = [r for r in others if r["path"] == "/no/such/path"]
check(len(nf) == 1 and nf[0]["status"] == 404, f"the 404: {nf}")
summ = recs[-1]
check(summ["type"] == "summary" and summ["http"]["requests"] == len(http) and summ["http"]["streams"] == want + warm,
      f"summary http: {summ.get('http')}")
if bad:
    print("\n".join(bad[:12])); sys.exit(1)
print(f"ok: {len(streams)} streams and {len(others)} other requests, each as the client saw it")
PY
}
compare "$TMP/run.jsonl" "$TMP/client.jsonl" 32 16 1 49
# content stays in the kernel: no prompt, completion text or query string
text=$(jq -r .choices[0].text "$TMP/plain.json")
[ -n "$text" ] || fail "the plain completion had no text"
for s in "secret prompt" "token=abc" "$text" "Once upon a time"; do
	grep -qF -- "$s" "$TMP/run.jsonl" && fail "the JSONL holds request or response content: '$s'"
done
ok "no prompt, completion text or query string in the JSONL"

# record --binary --http: every process of the binary, one already running
# and one started after the attach, has its requests timed from its socket
# and joined with its engine's
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --threads 1 --max-seqs 2
first_pid=$EPID first_base=$BASE
"$SPANTRACE" record -v --binary "$INFER" --http --level coarse -o "$TMP/bin.jsonl" 2>"$TMP/bin.err" &
brec=$!
wait_for grep -qs '"type":"session"' "$TMP/bin.jsonl" || fail "record --binary did not attach: $(cat "$TMP/bin.err")"
mv "$TMP/engine.err" "$TMP/engine1.err"
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --threads 1 --max-seqs 2
# the next scan (every second) finds it, and watches its sockets (-v says so)
wait_for grep -q -- "--http: .* of pid $EPID " "$TMP/bin.err" || fail "record --binary never watched pid $EPID: $(cat "$TMP/bin.err")"
for base in "$first_base" "$BASE"; do
	CLIENT_KEEPALIVE=0 node "$ROOT/tests/node/sse_client.js" "$base" 2 1 8 >/dev/null 2>"$TMP/client.err" ||
		fail "sse_client ($base): $(cat "$TMP/client.err")"
done
stop_engine
EPID=$first_pid stop_engine
kill -INT "$brec"
wait "$brec" || fail "record --binary exited $?: $(cat "$TMP/bin.err")"
for pid in "$first_pid" "$EPID"; do
	assert_eq "record --binary --http: pid $pid's streamed requests, joined" "2 2" \
		"$(jq -rs --argjson p "$pid" '[.[] | select(.pid == $p)] | "\(map(select(.type == "http" and .stream)) | length) \(map(select(.type == "request" and .from == "socket")) | length)"' "$TMP/bin.jsonl")"
done

# llama-server (its engine profile attached, as -p finds it; the sockets
# by default, as it listens: no --http): a new
# connection per request (it does not answer a second one on a connection
# that streamed); 8 x 2 rounds with the prompt as text, 8 x 2 as token ids,
# which llama-server never tokenizes.
start_llama_server
"$SPANTRACE" record -q -p "$lpid" --level coarse -o "$TMP/l.jsonl" --summary "$TMP/ls.json" \
	2>"$TMP/lrecord.err" &
lrec=$!
wait_for grep -qs '"type":"session"' "$TMP/l.jsonl" || fail "record did not attach: $(cat "$TMP/lrecord.err")"
CLIENT_KEEPALIVE=0 SSE_WARMUP=1 node "$ROOT/tests/node/sse_client.js" "http://127.0.0.1:$lport" 8 2 16 >"$TMP/lc.jsonl" \
	2>"$TMP/client.err" || fail "sse_client (text): $(cat "$TMP/client.err")"
CLIENT_KEEPALIVE=0 SSE_WARMUP=1 node "$ROOT/tests/node/sse_client.js" "http://127.0.0.1:$lport" 8 2 16 /v1/completions 1 \
	>>"$TMP/lc.jsonl" 2>"$TMP/client.err" || fail "sse_client (ids): $(cat "$TMP/client.err")"
kill -INT "$lrec"
wait "$lrec" || fail "record on llama-server exited $?: $(cat "$TMP/lrecord.err")"
kill "$lpid"
wait "$lpid" 2>/dev/null
compare "$TMP/l.jsonl" "$TMP/lc.jsonl" 32 16 0 24
