#!/usr/bin/env bash
# t_metrics_seed002.sh - `record --metrics` follows seed 002's schema exactly:
# ts_ms an integer, metric a string, value a number, labels string -> string;
# one record per series per interval (a count is its own series, span_count,
# and the span_count records add up to the summary's span counts); and the
# seed's own pandas/Altair snippet, taken unmodified from the seed, runs on
# our output and saves its PNG (Altair 4 saves PNG through tools/altair_saver,
# which renders with npm's vega-lite, vega and resvg).
source "$(dirname "$0")/lib.sh"
need_bpf
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
/usr/bin/python3 -c 'import pandas, altair' 2>/dev/null ||
	fail "no python3 pandas/altair: make deps installs them (Debian python3-pandas python3-altair)"
need_cmd node nodejs
for m in vega vega-lite @resvg/resvg-js; do
	[ -d "$ROOT/tests/node/node_modules/$m" ] || fail "no npm $m in tests/node: make deps installs it"
done

mkdir -p "$TMP/run"
"$SPANTRACE" record -q --level detail -o "$TMP/t.jsonl" --summary "$TMP/s.json" --metrics "$TMP/run/profile.jsonl" \
	-- "$INFER" "$DEMO_MODEL" -b cpu -n 256 -t 0 --ids >"$TMP/out" 2>"$TMP/err" \
	|| fail "record failed: $(tail -n 3 "$TMP/err")"

/usr/bin/python3 - "$TMP/run/profile.jsonl" "$TMP/s.json" <<'PY' || fail "schema check failed"
import json, sys, collections, math
recs = [json.loads(l) for l in open(sys.argv[1])]
summ = json.load(open(sys.argv[2]))
assert recs, "no metric records"
seen = set()
counts = collections.Counter()
for r in recs:
    assert set(r) == {"ts_ms", "metric", "value", "labels"}, r
    assert type(r["ts_ms"]) is int and r["ts_ms"] > 1_600_000_000_000, r
    assert type(r["metric"]) is str and r["metric"], r
    assert type(r["value"]) in (int, float) and math.isfinite(r["value"]), r
    assert isinstance(r["labels"], dict), r
    for k, v in r["labels"].items():
        assert type(k) is str and type(v) is str, ("label not string->string", r)
    assert "count" not in r["labels"], r
    key = (r["ts_ms"], r["metric"], tuple(sorted(r["labels"].items())))
    assert key not in seen, ("two records of one series in one interval", r)
    seen.add(key)
    if r["metric"] == "span_count":
        counts[r["labels"]["span"]] += r["value"]
print("ok: %d records, every one in seed 002's schema, one per series per interval" % len(recs))
want = {k: v["count"] for k, v in summ["spans"].items() if v["count"]}
assert want, "the summary counts no spans"
assert dict(counts) == want, ("span_count sums differ from the summary", dict(counts), want)
print("ok: span_count adds up to the summary's counts for %d span kinds" % len(want))
lat = [r for r in recs if r["metric"] == "latency_ms"]
assert lat and all("target" in r["labels"] for r in lat)
print("ok: %d latency_ms records, each with a target label" % len(lat))
PY

# The snippet exactly as the seed wrote it (from the seed when it is there).
SEED=$(ls "$ROOT"/../shared/seeds/002_*.txt 2>/dev/null | head -n 1)
cat >"$TMP/snippet.py" <<'SNIP'
import pandas as pd
import altair as alt

df = pd.read_json("run/profile.jsonl", lines=True)
chart = alt.Chart(df[df["metric"]=="latency_ms"]).mark_line().encode(
    x="ts_ms:T",
    y="value:Q",
    color="labels.target:N"
)
chart.save("latency.png")
SNIP
if [ -n "$SEED" ]; then
	sed -n '/^```python$/,/^```$/p' "$SEED" | sed '1d;$d' >"$TMP/seed.py"
	cmp -s "$TMP/seed.py" "$TMP/snippet.py" || fail "the seed's snippet is not the one this test runs"
	ok "the snippet is the seed's, byte for byte"
fi
(cd "$TMP" && PYTHONPATH="$ROOT/tools" /usr/bin/python3 -W ignore snippet.py) 2>"$TMP/py.err" \
	|| fail "the seed's snippet failed: $(tail -n 5 "$TMP/py.err")"
[ "$(head -c 8 "$TMP/latency.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "latency.png is not a PNG"
size=$(stat -c %s "$TMP/latency.png")
assert_le "latency.png has a chart in it (bytes)" 5000 "$size"
