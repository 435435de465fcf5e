#!/usr/bin/env bash
# t_trace_counts.sh - `record -- build/infer` sees exactly what the engine
# counted: per span name counts, tokens, requests, OpenCL kernels, pool
# live/peak/reserved bytes; medians and p95 within 2 us of the engine's own (in
# one run, with 2 + n/20 ranks of slack for disturbed spans); the summary's
# quantiles equal the JSONL's; no event
# lost (delivered + dropped == fired, dropped == 0); the first token's spans
# are present; every JSONL line parses; pandas loads the metrics file.
# Runs stories260K (cpu, and opencl when there is a device) and the
# stories15M-shaped demo model (cpu).
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
for b in "$INFER" "$SPANTRACE"; do [ -x "$b" ] || fail "no $b (build first)"; done

# check_run NAME BACKEND MODEL STEPS
check_run() {
	local name=$1 backend=$2 model=$3 steps=$4 d=$TMP/$1
	mkdir -p "$d"
	# One OpenMP thread: with two on two cores shared with the tracer (and
	# whatever else runs), a parallel region that loses its worker to the
	# scheduler makes the next probe land ~10 us late on the tracer's side
	# only (measured); one thread keeps the comparison about the tracer.
	# PoCL likewise: two busy device threads on two cores preempt the host
	# thread often enough to land in the ~1 us between the engine's clock
	# read and the probe's on 5% of the short enqueue spans (p95 off by 2-9
	# us); one device thread leaves the host a core. Counts are unaffected.
	OMP_NUM_THREADS=1 POCL_MAX_PTHREAD_COUNT=1 "$SPANTRACE" record -q --level detail -o "$d/t.jsonl" --summary "$d/s.json" --metrics "$d/m.jsonl" \
		--csv "$d/t.csv" -- "$INFER" "$model" -b "$backend" -n "$steps" -t 0 --ids --stats "$d/e.json" \
		>"$d/out" 2>"$d/err" || fail "$name: record failed: $(tail -n 3 "$d/err")"

	# Every comparison in one pass (python: one process instead of ~100 jq runs).
	# Exit 1 = a count differs (fatal), 3 = only durations missed (retried).
	/usr/bin/python3 - "$name" "$d" "$TOLERANCE_REL" <<'PY'
import json, sys, collections
name, d, rel = sys.argv[1], sys.argv[2], float(sys.argv[3])
eng = json.load(open(d + "/e.json"))
summ = json.load(open(d + "/s.json"))
lines = [json.loads(l) for l in open(d + "/t.jsonl")]   # every line parses
bad = 0
def check(what, want, got):
    global bad
    if want == got:
        print(f"ok: {name} {what} = {got}")
    else:
        print(f"FAIL: {name} {what}: expected {want}, got {got}"); bad = 1
check("first record", "session", lines[0]["type"])
check("last record", "summary", lines[-1]["type"])
check("lines without type", 0, sum("type" not in l for l in lines))
streamed = collections.Counter(l["name"] for l in lines if l["type"] == "span")
spans = summ["spans"]
if not eng["spans"]:
    print(f"FAIL: {name}: engine stats list no spans"); bad = 1
for n, e in sorted(eng["spans"].items()):
    check(f"span {n} count", e["count"], spans.get(n, {}).get("count", 0))
    check(f"span {n} JSONL lines", e["count"], streamed.get(n, 0))
check("tokens", eng["tokens"], summ["tokens_generated"])
check("token records", eng["tokens"], sum(l["type"] == "token" for l in lines))
check("requests", eng["requests"], summ["requests"])
check("kernels", eng.get("opencl", {}).get("kernels", 0), sum(k["count"] for k in summ["kernels"].values()))
pools = collections.defaultdict(dict)
for per_pid in summ["pools"].values():
    for p, v in per_pid.items():
        pools[p] = v
for p, e in sorted(eng["pools"].items()):
    for f in ("live_bytes", "peak_bytes", "reserved_bytes", "peak_reserved_bytes"):
        check(f"pool {p} {f}", e[f], pools.get(p, {}).get(f, 0))
check("dropped", 0, summ["loss"]["dropped"])
check("delivered+dropped==fired", True, summ["loss"]["balanced"])
check("span_errors", 0, summ["span_errors"])
# the very first token (pos 0) has its spans: nothing missed at exec
check("forward spans at pos 0", 1, sum(l["type"] == "span" and l["name"] == "forward" and l["pos"] == 0 for l in lines))
# The summary's quantiles are the JSONL durations' own, at the same nearest rank.
durs = collections.defaultdict(list)
for l in lines:
    if l["type"] == "span":
        durs[l["name"]].append(l["dur_ns"])
for v in durs.values():
    v.sort()
def rank(n, pct):
    return max((n * pct + 99) // 100, 1)   # 1-based nearest rank, as the engine
for n, v in sorted(durs.items()):
    for pct, tk in ((50, "p50_ns"), (95, "p95_ns")):
        check(f"span {n} summary {tk} = JSONL nearest rank", v[rank(len(v), pct) - 1], spans[n][tk])
# Durations against the engine's clock, in one run: the engine's quantile
# must lie within 2 us of the tracer's durations at the same rank, give or
# take k ranks. The engine and the probe read the clock a few hundred ns
# apart; a preemption in between (OpenCL workers and the tracer share the 2
# vCPUs) lengthens that one span on one side only, which moves it across
# ranks by one per preempted span. k = 2 + n // 20 lets 5% of a kind's
# spans, and 2 more, be disturbed: idle, 5 runs needed at most 3 ranks at
# n = 120 (the OpenCL layer p95), but under the suite's load 3 of 32
# final_norm spans took 14-79 us on the tracer's side only (a slow probe
# hit or a preemption between the two clocks), where 1 + n // 50 allowed 1.
# A tracer that measures something else shifts every value, which no rank
# slack absorbs.
# sample begins right after each forward, whose stream of weights evicted
# its begin probe's kernel path and BPF program: that entry, between the
# engine's clock read and ours, runs cold, 2-5 us, on the engine's side of
# every sample span (as logits' end, above). Once greedy sampling took
# ~16 us instead of ~100 (two 8-lane vectors, not 16 lanes through the
# stack), the engine's median sat ~3 us above the tracer's ranks, and 2 us
# of slack no longer covered it.
# model_load, one span a run, begins at the process's first probe hit:
# the kernel then maps the process's uprobe page and turns the site's int3
# into a call (an optimized uprobe), 10-50 us seen on the engine's side of
# that one span; pack, one too, begins cold after the file's read (2-3 us).
COLD_BEGIN_NS = {"sample": 4000, "model_load": 100000, "pack": 8000}
miss = 0
for n, e in sorted(eng["spans"].items()):
    v = durs.get(n, [0])
    k = 2 + len(v) // 20
    for ek, pct in (("median_ns", 50), ("p95_ns", 95)):
        r = rank(len(v), pct) - 1
        lo, hi = v[max(r - k, 0)], v[min(r + k, len(v) - 1)]
        slack = 2000 + e[ek] * rel + COLD_BEGIN_NS.get(n, 0)
        good = lo - slack <= e[ek] <= hi + slack
        print(f"{'ok:' if good else 'miss:'} {name} span {n} engine {ek} {e[ek]} "
              f"{'within' if good else 'outside'} tracer ranks {r + 1 - k}..{r + 1 + k} [{lo}, {hi}] +- {slack:.0f}")
        if not good:
            miss = 1
sys.exit(1 if bad else 3 if miss else 0)
PY
	case $? in
	0) ;;
	3) duration_misses=1 ;;
	*) fail "$name: counts differ" ;;
	esac
	# CSV: header + one row per span and kernel
	assert_eq "$name csv header" "timestamp,device,worker,duration_ms,token,layer,operation,success,memory_used_mb,error" \
		"$(head -n1 "$d/t.csv")"
	assert_eq "$name csv rows" "$(jq '[.spans[].count] + [.kernels[].count] | add' "$d/s.json")" \
		"$(($(wc -l <"$d/t.csv") - 1))"
	# pandas reads the metrics stream
	/usr/bin/python3 -c "
import pandas, sys
df = pandas.read_json(sys.argv[1], lines=True)
assert {'ts_ms', 'metric', 'value', 'labels'} <= set(df.columns), df.columns
assert (df.metric == 'latency_ms').sum() > 0
print('pandas rows', len(df))" "$d/m.jsonl" || fail "$name: pandas cannot load the metrics"
	ok "$name: all count checks"
}

# run_checked NAME ...: check_run once; counts must match exactly and the
# durations agree within the bound above. Under ASan every instrumented
# load slows the engine between its clock and ours: that measures the
# sanitizer, not the tracer, so there only the counts are asserted.
run_checked() {
	duration_misses=0
	check_run "$@"
	[ "$duration_misses" = 0 ] && return 0
	if is_sanitized; then
		echo "note: $1: duration agreement not asserted in a sanitizer build (counts were exact)"
		return 0
	fi
	fail "$1: durations differ from the engine's by more than 2 us beyond the rank slack"
}

TOLERANCE_REL=0
run_checked small-cpu cpu "$MODELS/stories260K.bin" 48

if clinfo -l 2>/dev/null | grep -q Device && "$INFER" "$MODELS/stories260K.bin" -b opencl -n 2 --ids >/dev/null 2>&1; then
	# 48 tokens, as small-cpu: the engine's p95 is its nth largest value
	# (n = count - rank + 1), so only n - 1 spans slowed on the engine's
	# side (a preemption between its clock read and the probe) are absorbed.
	# At 24 that was one: two slow host-side samples under the suite's load
	# put the engine's p95 (8.6 us) past every span the tracer saw (5.5 us).
	run_checked small-opencl opencl "$MODELS/stories260K.bin" 48
else
	echo "note: opencl backend not usable here; cpu only"
fi

# The stories15M-shaped model streams 61 MB of weights per token: the probe
# that ends logits (a 36 MB matvec) traps into kernel code and data that the
# stream just evicted, so its entry, which lies between the engine's clock
# read and ours, runs cold: 2-5 us on logits (well under 1 us on every other
# span). There the bound is 2 us + 0.2% of the engine's value. Runs have more
# than 20 tokens so that p95 is not the maximum: the first hit of a probe
# site is slow (the kernel patches it into an optimized uprobe). 64, not 32:
# at 32 the engine's p95 is its second largest value, so two engine-side
# slow samples put it past every span the tracer saw (CI: sample spans,
# 101.7 us against a tracer maximum of 98.9 us, under the suite's load).
TOLERANCE_REL=0.002
if [ ! -r "$DEMO_MODEL" ]; then
	mkdir -p "$(dirname "$DEMO_MODEL")"
	"$MKMODEL" "$DEMO_MODEL" --shape stories15M --seed 1 --tokenizer "$DEMO_TOK" >/dev/null ||
		fail "cannot make $DEMO_MODEL"
fi
run_checked demo15M-cpu cpu "$DEMO_MODEL" 64
