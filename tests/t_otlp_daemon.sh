#!/usr/bin/env bash
# t_otlp_daemon.sh - `daemon --otlp URL` sends its metrics each interval as
# OTLP/HTTP JSON to URL/v1/metrics, and every payload passes the official
# OTLP schema (tests/node/otlp_receiver.js). Checks: histograms and sums are
# CUMULATIVE with one start time, sums are declared monotonic and are (from
# one export to the next no sum's value, nor histogram's count, decreases;
# over an engine's second request some sum grew), bucket counts add up to
# the count with one more bucket than bounds, the span histograms' counts
# (summed over layers) and tokens_total equal the engine's own --stats, and a
# 503 is retried.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_models
need_daemon_build
[ -r "$ROOT/tests/node/node_modules/@opentelemetry/otlp-transformer/build/src/generated/root.js" ] \
	|| fail "no @opentelemetry/otlp-transformer in tests/node: make deps installs it"
need_cmd node nodejs

node "$ROOT/tests/node/otlp_receiver.js" "$TMP/recv" --fail-first 1 --fail-status 503 >"$TMP/rport" 2>"$TMP/rerr" &
wait_for grep -q listening "$TMP/rport" || fail "receiver did not start: $(cat "$TMP/rerr")"
RPORT=$(awk '{print $2}' "$TMP/rport")

SPANTRACE_OTLP_ENDPOINT=http://127.0.0.1:$RPORT start_daemon --level coarse
# latest_tokens: tokens_total of the engine's pid in the latest export.
latest_tokens() {
	/usr/bin/python3 - "$TMP/recv" "$EPID" <<'PY'
import json, sys
last = [json.loads(l) for l in open(sys.argv[1]) if '"metrics"' in l]
n = 0
if last:
    for m in last[-1]["metrics"]:
        if m["name"] == "spantrace_tokens_total":
            for p in m["sum"]["dataPoints"]:
                if any(a["key"] == "pid" and a["value"]["intValue"] == sys.argv[2] for a in p["attributes"]):
                    n = int(p["asInt"])
print(n)
PY
}
# One engine, two requests (empty prompts: generation from BOS), with an
# export between them: its cumulative sums must grow from that export to
# the last one.
mkfifo "$TMP/in"
"$INFER" "$MODELS/stories260K.bin" -b cpu -s 1 -t 0 --ids -n 64 --serve --stats "$TMP/stats.json" \
	<"$TMP/in" >"$TMP/out" 2>"$TMP/engine.err" &
EPID=$!
exec {feed}>"$TMP/in"
echo >&$feed
replied() { [ "$(wc -l <"$TMP/out")" -ge "$1" ]; }
wait_for replied 1 || fail "no reply to the first request: $(cat "$TMP/engine.err")"
counted() { [ "$(latest_tokens)" -gt 0 ]; }
wait_for counted || fail "no export counted pid $EPID's first request"
first_exports=$(grep -c '"metrics"' "$TMP/recv")
echo >&$feed
wait_for replied 2 || fail "no reply to the second request: $(cat "$TMP/engine.err")"
exec {feed}>&-
wait $EPID || fail "engine exited $?: $(cat "$TMP/engine.err")"
tokens=$(jq -r .tokens "$TMP/stats.json")
assert_pos "engine tokens" "$tokens"
has_all() { [ "$(latest_tokens)" = "$tokens" ]; }
wait_for has_all || fail "the OTLP metrics never showed pid $EPID's $tokens tokens (got $(latest_tokens))"
ok "OTLP tokens_total for pid $EPID = $tokens, as --stats"
stop_daemon
grep -q "otlp: .* sent in .* 1 retries" "$TMP/daemon.log" || fail "the daemon's log lacks the retry: $(grep otlp "$TMP/daemon.log")"
ok "$(grep -o 'otlp: .*' "$TMP/daemon.log")"

/usr/bin/python3 - "$TMP/recv" "$TMP/stats.json" "$EPID" "$first_exports" <<'PY' || fail "the OTLP metrics are wrong"
import json, sys, collections
recs = [json.loads(l) for l in open(sys.argv[1])]
eng, pid, first = json.load(open(sys.argv[2])), sys.argv[3], int(sys.argv[4])
assert not [r for r in recs if "invalid" in r], [r for r in recs if "invalid" in r][:2]
assert recs[0] == {"refused": 503}, recs[0]
exports = [r["metrics"] for r in recs if "metrics" in r]
assert len(exports) >= 2, len(exports)
print("ok: %d exports after one 503, every one valid against the official schema" % len(exports))
starts = set()
for ms in exports:
    for m in ms:
        for kind in ("sum", "histogram"):
            if kind in m:
                assert m[kind]["aggregationTemporality"] == 2, m     # CUMULATIVE
                if kind == "sum":
                    assert m[kind]["isMonotonic"] is True, m
                for p in m[kind]["dataPoints"]:
                    starts.add(p["startTimeUnixNano"])
                    assert int(p["startTimeUnixNano"]) <= int(p["timeUnixNano"]), p
                    if kind == "histogram":
                        b, c = p.get("explicitBounds", []), [int(x) for x in p["bucketCounts"]]
                        assert len(c) == len(b) + 1 and sum(c) == int(p["count"]), p
                        assert b == sorted(b), p
assert len(starts) == 1, ("one start for every cumulative series", starts)
print("ok: sums and histograms cumulative from one start; buckets add up to counts")
# Monotonic in fact: each series (name and attributes) of a sum, and each
# histogram's count, never decreases from one export to the next.
def values(ms):
    v = {}
    for m in ms:
        for kind in ("sum", "histogram"):
            for p in m.get(kind, {}).get("dataPoints", []):
                key = (m["name"], json.dumps(p["attributes"], sort_keys=True))
                if kind == "histogram":
                    v[key] = int(p["count"])
                else:
                    v[key] = int(p["asInt"]) if "asInt" in p else float(p["asDouble"])
    return v, {k for k in v if k[0] in {m["name"] for m in ms if "sum" in m}}
seq = [values(ms) for ms in exports]
compared = 0
for (a, _), (b, _) in zip(seq, seq[1:]):
    for k in a.keys() & b.keys():
        assert b[k] >= a[k], ("a cumulative value decreased", k, a[k], b[k])
        compared += 1
(a, sums), (b, _) = seq[first - 1], seq[-1]
grew = sorted(k[0] for k in sums & b.keys() if b[k] > a[k])
assert grew, ("no sum grew across the second request", first, len(seq))
print("ok: %d values compared across %d exports, none decreased; %d sum series grew over the second request (%s, ...)"
      % (compared, len(seq), len(grew), grew[0]))
last = {m["name"]: m for m in exports[-1]}
spans = collections.Counter()
for p in last["spantrace_span_duration_seconds"]["histogram"]["dataPoints"]:
    a = {x["key"]: list(x["value"].values())[0] for x in p["attributes"]}
    if a["pid"] == pid:
        spans[a["span"]] += int(p["count"])
want = {k: v["count"] for k, v in eng["spans"].items() if v["count"] and k in ("forward", "layer")}
assert {k: spans[k] for k in want} == want, (dict(spans), want)
print("ok: span histogram counts equal --stats: %s" % want)
PY
