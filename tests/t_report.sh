#!/usr/bin/env bash
# t_report.sh - `spantrace report` on a real recorded run, from the JSONL and
# from the CSV: the text report's per-operation counts equal the engine's own
# --stats, on the host clock and (OpenCL, from the JSONL) on the device clock,
# p50 <= p95 <= p99, the per-layer medians say their clock, utilization is
# one figure over a wall above 0 (a percentage above 0 on OpenCL, on the CPU
# a line saying there are no kernel records), a fused forward gets no
# per-layer section but a line saying why, the request section has TTFT and
# ITL (their counts are the run's tokens), loss shows nothing dropped, and each of the
# five PNGs is a real picture (a PNG of sensible size with many colours).
# Bad input: a clear error and a non-zero exit.
source "$(dirname "$0")/lib.sh"
need_bpf
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || fail "no python3 matplotlib: make deps installs it (Debian python3-matplotlib)"
BACKEND=cpu
clinfo -l 2>/dev/null | grep -q Device && BACKEND=opencl

"$SPANTRACE" record -q -o "$TMP/run.jsonl" --csv "$TMP/run.csv" -- "$INFER" "$DEMO_MODEL" -b $BACKEND -n 96 -t 0 --ids \
	--stats "$TMP/stats.json" >/dev/null 2>"$TMP/err" || fail "record: $(tail -n 3 "$TMP/err")"
"$SPANTRACE" report "$TMP/run.jsonl" -o "$TMP/rj" >"$TMP/rj.out" 2>&1 || fail "report (jsonl): $(tail -n 5 "$TMP/rj.out")"
"$SPANTRACE" report "$TMP/run.csv" -o "$TMP/rc" >"$TMP/rc.out" 2>&1 || fail "report (csv): $(tail -n 5 "$TMP/rc.out")"
if [ $BACKEND = opencl ]; then   # forced fused forward: one kernel per forward, no layers
	"$SPANTRACE" record -q -o "$TMP/fused.jsonl" -- "$INFER" "$DEMO_MODEL" -n 24 -t 0 --ids --cl-launch forward \
		>/dev/null 2>"$TMP/err" || fail "record (fused): $(tail -n 3 "$TMP/err")"
	"$SPANTRACE" report "$TMP/fused.jsonl" -o "$TMP/rf" >"$TMP/rf.out" 2>&1 ||
		fail "report (fused): $(tail -n 5 "$TMP/rf.out")"
fi

/usr/bin/python3 - "$TMP" "$BACKEND" <<'PY' || fail "the report is wrong"
import json, sys, re
import matplotlib.image as mpimg
tmp, backend = sys.argv[1], sys.argv[2]
eng = json.load(open(tmp + "/stats.json"))
for d in ("rj", "rc"):
    text = open("%s/%s/report.txt" % (tmp, d)).read()
    sections = dict(re.findall(r"== ([^\n]+)\n(.*?)(?=\n== |\Z)", text, re.S))
    rows = {}
    for line in sections["Per operation"].splitlines()[1:]:
        f = line.split()
        name, clock = " ".join(f[:-7]), f[-7]
        count, p50, p95, p99 = int(f[-6]), float(f[-4]), float(f[-3]), float(f[-2])
        assert p50 <= p95 <= p99, line
        assert clock in ("host", "device"), line
        rows[(name, clock)] = count
    want = {(k, "host"): v["count"] for k, v in eng["spans"].items() if v["count"]}
    assert want, "the engine's --stats count no spans"
    assert {k: rows.get(k) for k in want} == want, (d, rows, want)
    layers = sections["Per-layer medians (ms)"]
    assert re.search(r"^5\s", layers, re.M), d
    if backend == "opencl":
        assert sum(v for k, v in rows.items() if k[0].startswith("kernel ")) == eng["opencl"]["kernels"], (d, rows)
        assert "device utilization (kernel device time / wall)" in sections["Utilization"], d
    if backend == "opencl" and d == "rj":
        # every op that launched kernels has as many device figures as spans
        for op in ("qkv", "attention", "attn_out", "ffn", "logits"):
            assert rows.get((op, "device")) == rows[(op, "host")], (op, rows)
        assert layers.startswith("clock: device"), layers
    else:
        assert layers.startswith("clock: host"), layers
    # one utilization line (a percentage, or why there is none) over a wall that ran
    util = sections["Utilization"]
    assert util.count("utilization") == 1, util
    wall = re.search(r"^wall \(first engine span to last, host clock\): ([0-9.]+) s$", util, re.M)
    assert wall and float(wall.group(1)) > 0, util
    if backend == "opencl":
        pct = re.search(r"device utilization \(kernel device time / wall\): ([0-9.]+)%", util)
        assert pct and float(pct.group(1)) > 0, util
    else:
        assert "no kernel records" in util, util
    assert len(sections["Slowest operations"].strip().splitlines()) == 10, d
    if d == "rj":
        req = sections["Requests"]
        assert re.search(r"TTFT .*\(n=1\)", req) and re.search(r"ITL .*\(n=%d\)" % (eng["tokens"] - 1), req), req
        assert "dropped 0, balanced True" in sections["Loss"], sections["Loss"]
    else:
        assert "the CSV has none" in sections["Requests"], sections["Requests"]
    print("ok: %s: per-operation counts equal --stats (%d kinds), percentiles ordered, every section there" % (d, len(want)))
    for png in ("latency_over_time", "layer_heatmap", "ttft_itl", "memory_kv", "kernel_timeline"):
        path = "%s/%s/%s.png" % (tmp, d, png)
        if png == "kernel_timeline" and backend != "opencl":
            continue
        if png == "ttft_itl" and d == "rc":
            continue
        img = mpimg.imread(path)
        h, w = img.shape[:2]
        colours = len({tuple(px) for px in img[::4, ::4].reshape(-1, img.shape[2]).round(2).tolist()})
        assert h >= 300 and w >= 500 and colours >= 20, (path, h, w, colours)
    print("ok: %s: the PNGs are pictures (size and colours checked)" % d)
if backend == "opencl":
    import os
    text = open(tmp + "/rf/report.txt").read()
    sections = dict(re.findall(r"== ([^\n]+)\n(.*?)(?=\n== |\Z)", text, re.S))
    layers = sections["Per-layer medians (ms)"]
    assert "one kernel per forward" in layers and "--level detail" in layers and not re.search(r"^\d+\s", layers, re.M), layers
    assert not os.path.exists(tmp + "/rf/layer_heatmap.png"), "a heatmap of a fused forward"
    print("ok: fused forward: no per-layer table or heatmap, and a line saying why")
PY
expect_fail "report of a missing file" "No such file" "$SPANTRACE" report "$TMP/nope.jsonl"
printf 'hello\n' >"$TMP/junk.txt"
expect_fail "report of a text file" "neither spantrace JSONL nor its CSV" "$SPANTRACE" report "$TMP/junk.txt"
