#!/usr/bin/python3
"""report.py - `spantrace report RUN.jsonl|RUN.csv [-o DIR]`: the text report
and the PNG plots of one recorded run (seed 004's analysis tool, for our data).

Reads `record -o` JSONL (every record type) or `record --csv` rows. Writes
DIR/report.txt (also printed) and DIR/*.png with matplotlib (Agg, no display).
Percentiles are nearest-rank, as everywhere in spantrace. Every figure says
its clock: host (the span's own begin..end) or device (the kernels it
launched, joined by the recorder)."""
import argparse
import collections
import csv
import json
import math
import os
import sys

LOST = "lost"   # a span whose kernel records were lost: device time unknown, never 0

class Run:
    """What the report needs, from either input format. Times are ns."""

    def __init__(self):
        self.spans = []      # (ts, dur, name, layer, depth, pid, device): dur host clock,
        #                      device: its kernels' device ns, LOST, or None (launched none)
        self.launches = collections.Counter()   # forward spans by launch mode
        self.kernels = []    # (start, end, name, layer, queue)
        self.emits = []      # (ts, gap, first, req)
        self.requests = []   # dicts (JSONL request records)
        self.memory = collections.defaultdict(list)   # series name -> [(ts, bytes)]
        self.summary = None
        self.drops = None
        self.source = ""
        self.kind = ""
        self.bad_lines = 0


def load_jsonl(path, run):
    run.kind = "jsonl"
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                run.bad_lines += 1
                continue
            t = r.get("type")
            if t == "span":
                dev = r.get("device_ns", None)
                if "device_ns" in r and dev is None:
                    dev = LOST
                run.spans.append((r["ts_ns"], r["dur_ns"], r["name"], r["layer"], r.get("depth", 0), r["pid"], dev))
                if r["name"] == "forward" and "launch" in r:
                    run.launches[r["launch"]] += 1
            elif t == "kernel":
                run.kernels.append((r["start_ns"], r["end_ns"], r["name"], r["layer"], r.get("queue", 0)))
            elif t == "emit":
                run.emits.append((r["ts_ns"], r["gap_ns"], r["first"], r["req"]))
            elif t == "request":
                run.requests.append(r)
            elif t in ("alloc", "free"):
                run.memory["%s (pid %d)" % (r["pool"], r["pid"])].append((r["ts_ns"], r["live_bytes"]))
            elif t == "kv":
                run.memory["KV cache used (pid %d)" % r["pid"]].append((r["ts_ns"], r["used_bytes"]))
            elif t == "summary":
                run.summary = r
            elif t == "drops":
                run.drops = r


def load_csv(path, run):
    """record --csv: spans (device cpu) and kernels (device opencl); times in s, ms."""
    run.kind = "csv"
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        for row in csv.DictReader(f):
            try:
                ts = int(float(row["timestamp"]) * 1e9)
                dur = int(float(row["duration_ms"]) * 1e6)
                layer = int(row["layer"])
            except (KeyError, ValueError):
                run.bad_lines += 1
                continue
            if row["device"] == "opencl":
                name = row["operation"]   # "cl_qkv": the kernel's name is after the prefix
                run.kernels.append((ts, ts + dur, name[3:] if name.startswith("cl_") else name, layer, 0))
            else:
                run.spans.append((ts, dur, row["operation"], layer, 0, row.get("worker", ""), None))
            if row.get("memory_used_mb"):
                try:
                    run.memory["memory used (CSV)"].append((ts, float(row["memory_used_mb"]) * 2**20))
                except ValueError:
                    pass


def pct(sorted_vals, q):
    """Nearest-rank percentile of a sorted list."""
    if not sorted_vals:
        return float("nan")
    return sorted_vals[max(0, math.ceil(q * len(sorted_vals)) - 1)]


def ms(ns):
    return ns / 1e6


# ---- the text report ----

def fused(run):
    """Every forward ran as one kernel: there are no layer or op spans to show."""
    return run.launches and set(run.launches) == {"forward"}


FUSED_LINE = ("fused forward (launch \"forward\", %d forwards): one kernel per forward, so there are no "
              "per-layer times; record with --level detail for per-phase kernels")


def op_table(run):
    """Per span kind on the host clock and, where it launched kernels, on the
    device clock; then the kernel records themselves (device clock)."""
    by = collections.defaultdict(list)
    lost = collections.Counter()
    for s in run.spans:
        by[(s[2], "host")].append(s[1])
        if s[6] == LOST:
            lost[s[2]] += 1
        elif s[6] is not None:
            by[(s[2], "device")].append(s[6])
    for k in run.kernels:
        by[("kernel " + k[2], "device")].append(k[1] - k[0])
    lines = ["%-20s %-6s %8s %10s %10s %10s %10s %10s" % ("operation", "clock", "count", "mean ms", "p50 ms",
                                                          "p95 ms", "p99 ms", "total ms")]
    for (name, clock), v in sorted(by.items(), key=lambda kv: (kv[0][0].startswith("kernel "), -sum(kv[1]))):
        v.sort()
        lines.append("%-20s %-6s %8d %10.4f %10.4f %10.4f %10.4f %10.2f" % (
            name, clock, len(v), ms(sum(v) / len(v)), ms(pct(v, .5)), ms(pct(v, .95)), ms(pct(v, .99)),
            ms(sum(v))))
    for name, n in sorted(lost.items()):
        lines.append("%s: %d spans' kernel records were lost (device time unknown, left out)" % (name, n))
    if fused(run):
        lines.append(FUSED_LINE % run.launches["forward"])
    return lines


def slowest(run, n=10):
    top = sorted(run.spans, key=lambda s: -s[1])[:n]
    t0 = min((s[0] for s in run.spans), default=0)
    return ["%-12s layer %3s  %10.4f ms  at +%.3f s" % (s[2], s[3] if s[3] >= 0 else "-", ms(s[1]), (s[0] - t0) / 1e9)
            for s in top]


def layer_clock(run):
    """The clock the per-layer figures are on: the device's where the layer
    spans carry device time (a device backend), else the host's."""
    return "device" if any(s[3] >= 0 and s[6] is not None for s in run.spans) else "host"


def layer_medians(run):
    """Median ns per (operation, layer) for operations inside layers, on
    layer_clock(run): a median, so one preempted or cold (first, compiling)
    pass does not paint a layer slow. Spans whose device time was lost are
    left out."""
    acc = collections.defaultdict(list)
    device = layer_clock(run) == "device"
    for s in run.spans:
        if s[3] < 0:
            continue
        v = s[6] if device else s[1]
        if v is not None and v != LOST:
            acc[(s[2], s[3])].append(v)
    return {k: pct(sorted(v), .5) for k, v in acc.items()}


def layer_lines(run):
    if fused(run):
        return [FUSED_LINE % run.launches["forward"]]
    means = layer_medians(run)
    if not means:
        return ["no spans inside layers"]
    layers = sorted({l for _, l in means})
    ops = sorted({o for o, _ in means})
    lines = ["clock: %s" % layer_clock(run), "%-12s" % "layer" + "".join("%11s" % o[:10] for o in ops)]
    for l in layers:
        lines.append("%-12d" % l + "".join("%11.4f" % ms(means[(o, l)]) if (o, l) in means else "%11s" % "-"
                                         for o in ops))
    return lines


ENGINE_SPANS = ("forward", "layer", "embed", "attn_norm", "qkv", "rope", "attention", "attn_out", "ffn_norm",
                "ffn", "final_norm", "logits", "sync")


def utilization(run):
    """Device utilization has one definition, the summary's: summed kernel
    device time over the host wall from the first engine span's begin to the
    last one's end. Kernel durations are differences on the device clock, so
    only their sum meets the host wall, never their timestamps."""
    eng = [s for s in run.spans if s[2] in ENGINE_SPANS]
    if not eng:
        return ["no engine spans"]
    wall = max(s[0] + s[1] for s in eng) - min(s[0] for s in eng)
    busy = sum(k[1] - k[0] for k in run.kernels)
    lines = ["wall (first engine span to last, host clock): %.3f s" % (wall / 1e9)]
    if not run.kernels:
        lines.append("device utilization: no kernel records (CPU backend, or a fused forward below "
                     "--level detail)")
    elif wall > 0:
        lines.append("device utilization (kernel device time / wall): %.1f%%" % (100 * busy / wall))
    return lines


def request_lines(run):
    if not run.requests and not run.emits:
        return ["no requests in this input" + (" (the CSV has none)" if run.kind == "csv" else "")]
    ttft = sorted(e[1] for e in run.emits if e[2])
    itl = sorted(e[1] for e in run.emits if not e[2])
    e2e = sorted(r["dur_ns"] for r in run.requests)
    lines = ["requests %d, tokens %d" % (len(run.requests), len(run.emits))]
    for name, v in (("TTFT", ttft), ("ITL", itl), ("end to end", e2e)):
        if v:
            lines.append("%-10s p50 %9.3f ms  p95 %9.3f ms  p99 %9.3f ms  max %9.3f ms  (n=%d)" % (
                name, ms(pct(v, .5)), ms(pct(v, .95)), ms(pct(v, .99)), ms(v[-1]), len(v)))
    if run.summary and run.summary.get("goodput"):
        lines.append("goodput: %s" % json.dumps(run.summary["goodput"]))
    return lines


def loss_lines(run):
    lines = []
    if run.summary and "loss" in run.summary:
        loss = run.summary["loss"]
        lines.append("fired %s, delivered %s, dropped %s, balanced %s" % (
            loss.get("fired"), loss.get("delivered"), loss.get("dropped"), loss.get("balanced")))
        if loss.get("invalid"):
            lines.append("invalid records: %s" % loss["invalid"])
    elif run.drops:
        lines.append("fired %s, delivered %s, dropped %s" % (run.drops["fired"], run.drops["delivered"],
                                                            run.drops["dropped"]))
    else:
        lines.append("no loss accounting in this input (%s)" % ("the CSV has none" if run.kind == "csv"
                                                                 else "no summary or drops record"))
    if run.summary and "span_errors" in run.summary:
        lines.append("span errors %s, orphan ends %s" % (run.summary["span_errors"], run.summary.get("orphan_ends")))
    if run.bad_lines:
        lines.append("unreadable input lines: %d" % run.bad_lines)
    return lines


def text_report(run):
    out = ["spantrace report: %s (%s)" % (run.source, run.kind), ""]
    for title, lines in (("Per operation", op_table(run)), ("Slowest operations", slowest(run)),
                         ("Per-layer medians (ms)", layer_lines(run)),
                         ("Utilization", utilization(run)), ("Requests", request_lines(run)),
                         ("Loss", loss_lines(run))):
        out += ["== " + title, *lines, ""]
    return "\n".join(out)


# ---- plots ----

def t0_of(run):
    starts = [s[0] for s in run.spans] + [e[0] for e in run.emits]   # host clock only
    return min(starts) if starts else 0


def plot_latency(plt, run, out):
    by = collections.defaultdict(list)
    for s in run.spans:
        by[s[2]].append(s)
    if not by:
        return None
    t0 = t0_of(run)
    names = sorted(by, key=lambda n: -sum(s[1] for s in by[n]))[:16]
    cols = 4 if len(names) > 6 else 2 if len(names) > 1 else 1
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.6 * rows), sharex=True, squeeze=False)
    for ax, name in zip(axes.flat, names):
        xs = [(s[0] - t0) / 1e9 for s in by[name]]
        ys = [max(ms(s[1]), 1e-4) for s in by[name]]
        ax.scatter(xs, ys, s=3, alpha=0.5, linewidths=0)
        ys_sorted = sorted(ys)
        ax.axhline(pct(ys_sorted, .5), color="k", lw=0.8, label="p50")
        ax.axhline(pct(ys_sorted, .99), color="r", lw=0.8, ls="--", label="p99")
        ax.set_yscale("log")
        ax.set_title("%s (n=%d)" % (name, len(ys)), fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("time since first event (s)", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("duration (ms, log)", fontsize=8)
    axes.flat[0].legend(fontsize=7, loc="upper right")
    fig.suptitle("Span latency over time, per span kind (line: p50, dashed: p99)")
    fig.tight_layout()
    return save(fig, out, "latency_over_time.png")


def plot_heatmap(plt, run, out):
    means = {} if fused(run) else layer_medians(run)
    if not means:
        return None
    layers = sorted({l for _, l in means})
    ops = sorted({o for o, _ in means}, key=lambda o: -sum(v for (oo, _), v in means.items() if oo == o))
    grid = [[means.get((o, l), float("nan")) / 1e3 for l in layers] for o in ops]
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(layers) + 3), max(3, 0.45 * len(ops) + 1.5)))
    im = ax.imshow(grid, aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(layers)), [str(l) for l in layers])
    ax.set_yticks(range(len(ops)), ops)
    ax.set_xlabel("layer")
    if len(layers) * len(ops) <= 200:
        top = max(v for row in grid for v in row if v == v)
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                if v == v:
                    ax.text(j, i, "%.1f" % v, ha="center", va="center", fontsize=7,
                            color="black" if v > 0.6 * top else "white")
    clock = layer_clock(run)
    fig.colorbar(im, ax=ax, label="median %s time (µs)" % clock)
    ax.set_title("Median %s time per layer and op (µs, %s clock)" %
                 ("device" if clock == "device" else "span", clock))
    fig.tight_layout()
    return save(fig, out, "layer_heatmap.png")


def plot_ttft_itl(plt, run, out):
    ttft = [ms(e[1]) for e in run.emits if e[2]]
    itl = [ms(e[1]) for e in run.emits if not e[2]]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, vals, name in ((axes[0], ttft, "Time to first token"), (axes[1], itl, "Inter-token latency")):
        if vals:
            vs = sorted(vals)
            ax.hist(vals, bins=min(50, max(5, len(vals) // 2)), color="tab:blue", alpha=0.8)
            for q, style in ((.5, "-"), (.95, "--"), (.99, ":")):
                ax.axvline(pct(vs, q), color="r", ls=style, lw=1, label="p%d %.2f ms" % (q * 100, pct(vs, q)))
            ax.legend(fontsize=8)
            ax.set_xlabel("ms")
            ax.set_ylabel("count")
        else:
            ax.text(0.5, 0.5, "no %s in this input" % ("requests" if run.kind == "jsonl" else "tokens (CSV)"),
                    ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
        ax.set_title("%s (n=%d)" % (name, len(vals)))
    fig.tight_layout()
    return save(fig, out, "ttft_itl.png")


def plot_memory(plt, run, out):
    if not run.memory:
        return None
    t0 = min(p[0] for v in run.memory.values() for p in v)   # the weights load, before any span
    fig, ax = plt.subplots(figsize=(9, 4))
    for name, pts in sorted(run.memory.items()):
        pts.sort()
        ax.step([(p[0] - t0) / 1e9 for p in pts], [p[1] / 2**20 for p in pts], where="post", label=name)
    ax.set_xlabel("time since the first allocation (s)")
    ax.set_ylabel("MiB")
    ax.set_title("Memory: live bytes per pool, and KV cache in use")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return save(fig, out, "memory_kv.png")


def kernel_window(kernels):
    """About three forwards from the middle of the run: from the kernel that
    starts one (embed, or forward when one kernel runs the whole pass) to the
    third after it (the whole run if there are none)."""
    embeds = sorted(k[0] for k in kernels if k[2] in ("embed", "forward"))
    if len(embeds) >= 4:
        i = len(embeds) // 2 - 2 if len(embeds) > 4 else 0
        return embeds[i], embeds[i + 3]
    return min(k[0] for k in kernels), max(k[1] for k in kernels)


def plot_kernels(plt, run, out):
    if not run.kernels:
        return None
    lo, hi = kernel_window(run.kernels)
    first = {}
    for k in sorted(run.kernels):   # rows in the order a forward runs them
        if k[0] >= lo:
            first.setdefault(k[2], k[0])
    names = sorted({k[2] for k in run.kernels}, key=lambda n: first.get(n, float("inf")))
    t0 = min(k[0] for k in run.kernels)
    fig, axes = plt.subplots(2, 1, figsize=(11, max(4, 1.2 + len(names))), gridspec_kw={"height_ratios": [1, 1]})
    cmap = plt.get_cmap("tab10")
    for ax, (a, b), scale, unit in ((axes[0], (t0, max(k[1] for k in run.kernels)), 1e9, "s"),
                                    (axes[1], (lo, hi), 1e6, "ms")):
        for i, name in enumerate(names):
            bars = [((k[0] - a) / scale, max((k[1] - k[0]) / scale, 1e-9)) for k in run.kernels
                    if k[2] == name and k[1] >= a and k[0] <= b]
            ax.broken_barh(bars, (i - 0.4, 0.8), color=cmap(i % 10))
        ax.set_yticks(range(len(names)), names)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_xlim(0, (b - a) / scale)
        ax.set_xlabel("device time (%s)" % unit)
        ax.grid(True, axis="x", alpha=0.3)
    axes[0].set_title("OpenCL kernels on the device: the whole run")
    axes[1].set_title("zoom: about three forward passes")
    fig.tight_layout()
    return save(fig, out, "kernel_timeline.png")


def save(fig, out, name):
    path = os.path.join(out, name)
    fig.savefig(path, dpi=110)
    fig.clf()
    return path


def main():
    ap = argparse.ArgumentParser(
        prog="spantrace report", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="EXAMPLES:\n"
               "  spantrace record -o run.jsonl --summary s.json -- build/infer MODEL -n 256\n"
               "  spantrace report run.jsonl -o run-report     # report.txt and five PNGs\n"
               "  spantrace report spans.csv                   # from `record --csv` (no requests, no loss)")
    ap.add_argument("run", help="a `record -o` JSONL file or a `record --csv` file")
    ap.add_argument("-o", "--output", default=None, help="directory for report.txt and the PNGs "
                    "(default: RUN's name without extension + '-report')")
    a = ap.parse_args()
    run = Run()
    run.source = a.run
    try:
        with open(a.run, encoding="utf-8", errors="replace") as f:
            first = f.readline()
    except OSError as e:
        sys.exit("spantrace report: error: %s: %s" % (a.run, e.strerror))
    if first.lstrip().startswith("{"):
        load_jsonl(a.run, run)
    elif first.startswith("timestamp,"):
        load_csv(a.run, run)
    else:
        sys.exit("spantrace report: error: %s is neither spantrace JSONL nor its CSV" % a.run)
    if not run.spans and not run.kernels:
        sys.exit("spantrace report: error: %s has no span or kernel records" % a.run)
    out = a.output or os.path.splitext(a.run)[0] + "-report"
    os.makedirs(out, exist_ok=True)
    text = text_report(run)
    with open(os.path.join(out, "report.txt"), "w") as f:
        f.write(text + "\n")
    print(text)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("spantrace report: error: no matplotlib for the plots (Debian: apt-get install "
                 "python3-matplotlib); the text report is in %s" % os.path.join(out, "report.txt"))
    made = [p for p in (plot_latency(plt, run, out), plot_heatmap(plt, run, out), plot_ttft_itl(plt, run, out),
                        plot_memory(plt, run, out), plot_kernels(plt, run, out)) if p]
    print("plots: " + ", ".join(made))


if __name__ == "__main__":
    main()
