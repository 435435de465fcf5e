#!/usr/bin/env bash
# t_otlp_export.sh - `record --otlp URL` sends OTLP/HTTP JSON that the
# official OTLP schema accepts (tests/node/otlp_receiver.js checks every
# payload against @opentelemetry/otlp-transformer's generated protobuf
# types), with one trace per request, unique span ids, every parentSpanId
# naming a span of the same trace, the expected parent of each kind, children
# inside their parents' times, and span counts equal to the engine's own
# --stats (spans per kind, tokens, requests, OpenCL kernels). 503s are
# retried with backoff and nothing is lost; a final 400 drops its batch and
# the drop is counted and shown; a bad URL is refused.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
[ -r "$ROOT/tests/node/node_modules/@opentelemetry/otlp-transformer/build/src/generated/root.js" ] \
	|| fail "no @opentelemetry/otlp-transformer in tests/node: make deps installs it"
need_cmd node nodejs
BACKEND=cpu
clinfo -l 2>/dev/null | grep -q Device && BACKEND=opencl

# receiver NAME [ARGS...]: starts one; sets RPORT.
receiver() {
	local name=$1
	shift
	node "$ROOT/tests/node/otlp_receiver.js" "$TMP/$name.recv" "$@" >"$TMP/$name.port" 2>"$TMP/$name.rerr" &
	wait_for grep -q listening "$TMP/$name.port" || fail "receiver $name did not start: $(cat "$TMP/$name.rerr")"
	RPORT=$(awk '{print $2}' "$TMP/$name.port")
}

# run NAME: record --otlp into receiver NAME.
run() {
	local name=$1
	"$SPANTRACE" record --otlp "http://127.0.0.1:$RPORT" -o "$TMP/$name.jsonl" --summary "$TMP/$name.sum" \
		-- "$INFER" "$MODELS/stories260K.bin" -b $BACKEND -n 40 -t 0 --ids --stats "$TMP/$name.stats" \
		>/dev/null 2>"$TMP/$name.err" || fail "record $name: $(tail -n 3 "$TMP/$name.err")"
}

receiver good
run good
/usr/bin/python3 - "$TMP/good.recv" "$TMP/good.stats" "$TMP/good.sum" <<'PY' || fail "the exported spans are wrong"
import json, sys, collections
recs = [json.loads(l) for l in open(sys.argv[1])]
eng, summ = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
bad = [r for r in recs if "invalid" in r]
assert not bad, ("payloads the OTLP schema refused", bad[:3])
spans = [s for r in recs for s in r.get("spans", [])]
print("ok: %d requests, %d spans, every payload valid against the official schema" % (len(recs), len(spans)))
byid = {s["spanId"]: s for s in spans}
assert len(byid) == len(spans), "span ids are not unique"
names = collections.Counter(s["name"] for s in spans)
want = {k: v["count"] for k, v in eng["spans"].items() if v["count"]}
assert want and eng["tokens"] > 0, ("the engine's --stats count nothing", eng)
got = {k: names[k] for k in want}
assert got == want, ("span counts differ from --stats", got, want)
assert names["token"] == eng["tokens"], (names["token"], eng["tokens"])
assert names["request"] == eng["requests"] == 1, (names["request"], eng["requests"])
kernels = sum(v for k, v in names.items() if k.startswith("opencl "))
assert kernels == eng.get("opencl", {}).get("kernels", 0), (kernels, eng.get("opencl"))
print("ok: span counts equal --stats: %s; %d tokens, %d request, %d kernels" % (want, names["token"], names["request"], kernels))
assert summ["otlp"]["spans"] == summ["otlp"]["sent"] == len(spans), summ["otlp"]
assert summ["otlp"]["dropped_queue_full"] == summ["otlp"]["dropped_failed"] == summ["otlp"]["dropped_at_exit"] == 0
print("ok: summary otlp: %s" % summ["otlp"])
traces = {s["traceId"] for s in spans}
# one trace per request, and one for each span outside them (the engine's
# load and unload): every trace has one root
roots = collections.Counter(s["name"] for s in spans if not s["parentSpanId"])
assert set(roots) <= {"request", "model_load", "unload"} and roots["request"] == eng["requests"], roots
assert len(traces) == sum(roots.values()), ("one trace per root", len(traces), roots)
expect_parent = {"request": None, "token": "request", "forward": "token", "sample": "token", "embed": "forward",
                 "layer": "forward", "logits": "forward", "final_norm": "logits", "qkv": "layer", "attn_norm": "qkv",
                 "rope": "qkv", "attention": "layer", "attn_out": "layer", "ffn": "layer", "ffn_norm": "ffn",
                 "sync": "forward", "model_load": None, "pack": "model_load", "unload": None}
launching = ("embed", "qkv", "attention", "attn_out", "ffn", "logits", "layer", "forward")
for s in spans:
    p = byid.get(s["parentSpanId"]) if s["parentSpanId"] else None
    if s["parentSpanId"]:
        assert p, ("parentSpanId names no span", s)
        assert p["traceId"] == s["traceId"], ("parent in another trace", s)
    pname = p["name"] if p else None
    if s["name"].startswith("opencl "):
        assert pname == "token", s
        a = s["attributes"]
        assert int(s["end"]) - int(s["start"]) == int(a["spantrace.device.end_ns"]) - int(a["spantrace.device.start_ns"]), s
        continue
    assert pname == expect_parent[s["name"]], ("parent of %s is %s" % (s["name"], pname), s)
    if p:
        assert int(p["start"]) <= int(s["start"]) and int(s["end"]) <= int(p["end"]), ("child outside its parent", s, p)
    if s["name"] in expect_parent and s["name"] not in ("request", "token"):
        # every engine span says its clock; on OpenCL, those that launched
        # kernels carry their device time, and forwards their launch mode
        a = s["attributes"]
        assert a.get("spantrace.clock") == "host", s
        on_device = "opencl" in eng and s["name"] in launching
        assert ("spantrace.device_ns" in a) == on_device, ("device_ns", on_device, s)
        assert ("spantrace.launch" in a) == (s["name"] == "forward"), s
    if s["name"] == "layer":
        assert p["attributes"].get("spantrace.position") == s["attributes"].get("spantrace.position")
print("ok: every parentSpanId is a span of the same trace, of the expected kind, around its child")
PY

# 503 twice, with backoff: everything still arrives.
receiver retry --fail-first 2 --fail-status 503
run retry
/usr/bin/python3 - "$TMP/retry.recv" "$TMP/retry.sum" <<'PY' || fail "503s were not retried"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
summ = json.load(open(sys.argv[2]))["otlp"]
assert sum(1 for r in recs if r.get("refused") == 503) == 2, recs[:3]
spans = sum(len(r.get("spans", [])) for r in recs)
assert spans > 0, recs[:3]
assert summ["retries"] == 2 and summ["sent"] == summ["spans"] == spans and summ["dropped_failed"] == 0, (summ, spans)
print("ok: two 503s retried; %d of %d spans arrived; %s" % (spans, summ["spans"], summ))
PY

# A final status (400) drops that batch: counted in the summary and on stderr.
receiver refuse --fail-first 1 --fail-status 400
run refuse
/usr/bin/python3 - "$TMP/refuse.recv" "$TMP/refuse.sum" <<'PY' || fail "a refused batch was not counted"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
summ = json.load(open(sys.argv[2]))["otlp"]
spans = sum(len(r.get("spans", [])) for r in recs)
assert summ["retries"] == 0 and summ["dropped_failed"] > 0, summ
assert summ["sent"] == spans and summ["sent"] + summ["dropped_failed"] == summ["spans"], (summ, spans)
print("ok: a 400 is not retried; sent %d + dropped %d = %d spans" % (spans, summ["dropped_failed"], summ["spans"]))
PY
grep -q "otlp: .* dropped [1-9]" "$TMP/refuse.err" || fail "stderr does not show the drop: $(cat "$TMP/refuse.err")"
ok "stderr: $(grep -o 'otlp: .*' "$TMP/refuse.err")"

expect_fail "record --otlp ftp://x" "not an http:// or https:// URL" "$SPANTRACE" record --otlp ftp://x -- "$INFER" "$MODELS/stories260K.bin" -n 4 --ids

# The serving engine: each request a trace (request -> token spans, each
# linked to its step), each step a trace (step -> forward -> layer ...);
# with --http each HTTP request also a SERVER span with OpenTelemetry's HTTP
# attributes, valid against the official schema.
source "$ROOT/tests/serve_lib.sh"
need_node
receiver serve
start_engine "$MODELS/stories260K.bin" -b cpu --max-seqs 4
"$SPANTRACE" record -q --level detail --http --otlp "http://127.0.0.1:$RPORT" -o "$TMP/serve.jsonl" --summary "$TMP/serve.sum" -p $EPID \
	2>"$TMP/serve.err" &
RPID=$!
wait_for grep -q '"type":"session"' "$TMP/serve.jsonl" || fail "record -p never armed: $(cat "$TMP/serve.err")"
echo '{"concurrent": true, "requests": [
 {"prompt": [1, 300, 301], "max_tokens": 12, "temperature": 0},
 {"prompt": [1, 400], "max_tokens": 9, "temperature": 0},
 {"prompt": [1, 77, 78, 79], "max_tokens": 6, "temperature": 0}]}' >"$TMP/spec.json"
client "$TMP/spec.json" "$TMP/client.jsonl"
# the three requests out, each joined with its socket (both records written)
three() { [ "$(grep -c '"type":"http"' "$TMP/serve.jsonl")" -ge 3 ] && [ "$(grep -c '"type":"request"' "$TMP/serve.jsonl")" -ge 3 ]; }
wait_for three || fail "record -p wrote $(grep -c '"type":"http"' "$TMP/serve.jsonl") http and $(grep -c '"type":"request"' "$TMP/serve.jsonl") request records of 3"
kill -INT $RPID; wait $RPID || fail "record -p exited $?: $(cat "$TMP/serve.err")"
stop_engine
/usr/bin/python3 - "$TMP/serve.recv" "$TMP/client.jsonl" <<'PY' || fail "the serving engine's spans are wrong"
import json, sys, collections
recs = [json.loads(l) for l in open(sys.argv[1])]
assert not [r for r in recs if "invalid" in r], [r for r in recs if "invalid" in r][:2]
spans = [s for r in recs for s in r.get("spans", [])]
client = [json.loads(l) for l in open(sys.argv[2])]
byid = {s["spanId"]: s for s in spans}
assert len(byid) == len(spans), "span ids are not unique"
reqs = [s for s in spans if s["name"] == "request"]
toks = [s for s in spans if s["name"] == "token"]
steps = {s["spanId"]: s for s in spans if s["name"] == "step"}
assert len(reqs) == len(client) == 3, (len(reqs), len(client))
want_tokens = sum(c["usage"]["completion_tokens"] for c in client)
assert want_tokens > 0, client
assert len(toks) == want_tokens, (len(toks), want_tokens)
for t in toks:
    p = byid[t["parentSpanId"]]
    assert p["name"] == "request" and p["traceId"] == t["traceId"], t
    assert len(t["links"]) == 1 and t["links"][0]["spanId"] in steps, t
    assert steps[t["links"][0]["spanId"]]["traceId"] == t["links"][0]["traceId"], t
assert steps and any(s["name"] == "forward" for s in spans), "no step or forward span to check"
for s in spans:
    if s["name"] in ("forward", "layer", "embed", "logits", "sample") or s["name"].startswith("opencl"):
        p = byid.get(s["parentSpanId"])
        assert p, ("no parent", s)
        chain = p
        while chain.get("parentSpanId"):
            chain = byid[chain["parentSpanId"]]
        assert chain["name"] == "step" and chain["traceId"] == s["traceId"], (s, chain)
server = [s for s in spans if "http.request.method" in s["attributes"]]
assert len(server) == len(client), ("SERVER spans from the socket", len(server), len(client))
for s in server:
    a = s["attributes"]
    assert s["name"] == "POST" and s["kind"] == 2 and not s.get("parentSpanId"), s
    assert a["spantrace.from"] == "socket", a
    assert a["http.request.method"] == "POST" and a["url.path"] == "/v1/completions", a
    assert int(a["http.response.status_code"]) == 200 and int(a["spantrace.ttft_ns"]) > 0, a
    assert int(a["gen_ai.usage.output_tokens"]) > 0 and int(a["gen_ai.usage.input_tokens"]) > 0, a
# one request from both sides: the engine's request inside its SERVER span,
# in one trace, timed from the socket
for r in reqs:
    p = byid.get(r.get("parentSpanId"))
    assert p in server and p["traceId"] == r["traceId"] and r["kind"] == 1, (r, p)
    assert r["attributes"]["spantrace.from"] == "socket" and r["start"] == p["start"], r
    assert int(r["attributes"]["gen_ai.usage.output_tokens"]) == int(p["attributes"]["gen_ai.usage.output_tokens"])
print("ok: %d SERVER spans from the socket: POST /v1/completions, status 200, each the parent of "
      "its engine request" % len(server))
print("ok: serving: %d request traces, %d token spans (as the client's usage) linked to %d steps; "
      "every forward/layer/op under a step" % (len(reqs), len(toks), len(steps)))
PY

# No collector at the address: the run goes on, and the end says where it
# could not connect and why, not only "last status -1".
"$SPANTRACE" record -o /dev/null --otlp http://127.0.0.1:1 -- "$INFER" "$MODELS/stories260K.bin" -b cpu --ids -n 8 \
	>/dev/null 2>"$TMP/refused.err" || fail "record with no collector failed: $(tail -n 3 "$TMP/refused.err")"
grep -q "last status -1 (http://127.0.0.1:1/v1/traces: .*127.0.0.1 port 1.*connect" "$TMP/refused.err" ||
	fail "no collector: the end does not name the address and the failure: $(grep otlp "$TMP/refused.err")"
ok "no collector: $(grep -o 'last status -1 (.*)' "$TMP/refused.err")"
