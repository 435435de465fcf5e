#!/usr/bin/env bash
# tools/bench.sh - `make bench`: every benchmark section in one run, then one
# table of all ratios against their targets.
#
#   tools/bench.sh [SECTION...]     sections: engine serve serveq8 tracer probes attach daemon reqtrace alwayson profile opencl
#                                   opdetail gguf llamacpp servepeer llamabench socket structured
#   REPEAT=5 BUILD=build tools/bench.sh
#
# Benchmarks, not tests: the 2-core machine is shared and noisy, so every
# section repeats its runs and reports medians. A section that cannot run
# here (no root, no bpftrace, command not built) says "skipped: why"; one that
# fails or runs past its time limit is reported and the others still run.
# Sections print "ratio NAME VALUE TARGET" lines (tools/bench_lib.sh); the
# engine and tracer sections print prose, from which their figures are read.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
export BUILD REPEAT=${REPEAT:-5}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
LOGDIR=$BUILD/bench
mkdir -p "$LOGDIR" || exit 1
ALL_SECTIONS="engine serve serveq8 tracer probes attach daemon reqtrace alwayson profile opencl opdetail gguf llamacpp servepeer llamabench socket structured"
SECTIONS=${*:-$ALL_SECTIONS}

# section NAME -> "script time_limit_seconds"; limits keep the whole run
# near 10 minutes and stop a hang from stalling it.
section_script() {
	case $1 in
	engine) echo "tools/bench_engine.sh 200" ;;
	serve) echo "tools/bench_serve.sh 240" ;;
	serveq8) echo "tools/bench_serve_q8.sh 300" ;;
	tracer) echo "tools/bench_tracer.sh 150" ;;
	probes) echo "tools/bench_probes.sh 60" ;;
	attach) echo "tools/bench_attach.sh 120" ;;
	daemon) echo "tools/bench_daemon.sh 300" ;;
	reqtrace) echo "tools/bench_reqtrace.sh 300" ;;
	alwayson) echo "tools/bench_alwayson.sh 600" ;;
	profile) echo "tools/bench_profile.sh 180" ;;
	opencl) echo "tools/bench_opencl.sh 240" ;;
	opdetail) echo "tools/bench_opdetail.sh 240" ;;
	gguf) echo "tools/bench_gguf.sh 540" ;;
	llamacpp) echo "tools/bench_llamacpp.sh 300" ;;
	servepeer) echo "tools/bench_servepeer.sh 480" ;;
	llamabench) echo "tools/bench_llamabench.sh 2700" ;;
	socket) echo "tools/bench_socket.sh 300" ;;
	structured) echo "tools/bench_structured.sh 120" ;;
	*) return 1 ;;
	esac
}

RATIOS=$LOGDIR/ratios.txt
NOTES=$LOGDIR/notes.txt
: >"$RATIOS"
: >"$NOTES"

# first_field LOG REGEX FIELD: field FIELD of the first line matching REGEX.
first_field() { awk -v re="$2" -v f="$3" '$0 ~ re { print $f; exit }' "$1"; }
# paren_ratio LOG REGEX: the "(X x ...)" figure on the first matching line.
paren_ratio() { awk -v re="$2" '$0 ~ re { if (match($0, /\(([0-9.]+) x/)) { print substr($0, RSTART + 1, RLENGTH - 3); exit } }' "$1"; }
add() { echo "$1 ${2:-n/a} $3" >>"$RATIOS"; }

# The engine and tracer sections (other owners) print prose; read it here.
extract_engine() {
	add opencl_decode_over_bound "$(paren_ratio "$1" '^opencl decode')" ">=0.9"
	add opencl_prefill_over_decode "$(paren_ratio "$1" '^opencl prefill')" ">=3"
	add cpu_decode_over_bound "$(paren_ratio "$1" '^cpu decode')" info
	add opencl_over_cpu_decode "$(awk '/^opencl \/ cpu/ { sub(/ x,$/, "", $5); print $5; exit }' "$1")" info
	add pocl_launch_us "$(first_field "$1" '^PoCL launch' 3)" info
}
# Also exports the per-hit costs for the daemon section's hit-count estimate.
extract_tracer() {
	local bt
	bt=$(per_hit "$1" 'bpftrace matching begin/end')
	TRACER_STREAM_HIT_NS=$(per_hit "$1" 'spantrace record .stream every span')
	TRACER_KERNEL_HIT_NS=$(per_hit "$1" 'spantrace, matched in kernel only')
	export TRACER_STREAM_HIT_NS TRACER_KERNEL_HIT_NS
	add record_stream_hit_over_bpftrace_match "$(div0 "$TRACER_STREAM_HIT_NS" "$bt")" info
	add record_kernel_match_hit_over_bpftrace "$(div0 "$TRACER_KERNEL_HIT_NS" "$bt")" "<=1"
	add attach_ms "$(awk -F: '/^attach latency/ { printf "%.1f\n", $2; exit }' "$1")" info
	add tracer_steady_rss_kb "$(awk -F: '/^tracer steady RSS/ { split($2, a, " "); print a[1]; exit }' "$1")" "<=16384"
	add tracer_peak_rss_kb "$(awk -F: '/^tracer peak RSS/ { split($2, a, " "); print a[1]; exit }' "$1")" info
	add exporter_mevents_s "$(awk -F: '/^exporter/ { gsub(/ /, "", $NF); print $NF; exit }' "$1")" ">=2"
}
# per_hit LOG REGEX: the ns figure after the colon on the first matching line.
per_hit() { awk -F: -v re="$2" '$0 ~ re { split($2, a, " "); print a[1]; exit }' "$1"; }
div0() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f\n", a / b }'; }

run_section() {
	local name=$1 spec script limit log rc start
	spec=$(section_script "$name")
	script=${spec% *} limit=${spec#* }
	log=$LOGDIR/$name.log
	echo
	echo "==== $name ($script, limit ${limit}s) ===="
	if [ ! -x "$ROOT/$script" ]; then
		echo "skipped: $script not present" | tee "$log"
		echo "$name: skipped: $script not present" >>"$NOTES"
		return 0
	fi
	start=$(date +%s)
	# timeout signals the section's whole process group on expiry
	timeout -k 10 "$limit" "$ROOT/$script" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	echo "($name: $(($(date +%s) - start)) s)"
	case $rc in
	0) ;;
	124 | 137) echo "$name: timed out after ${limit}s (figures so far are in $log)" >>"$NOTES" ;;
	*) echo "$name: failed with status $rc (see $log)" >>"$NOTES" ;;
	esac
	grep 'skipped:' "$log" | sed "s/^ */$name: /" >>"$NOTES"
	grep '^ratio ' "$log" | cut -d' ' -f2- >>"$RATIOS"
	case $name in
	engine) [ "$rc" = 0 ] && extract_engine "$log" ;;
	tracer) [ "$rc" = 0 ] && extract_tracer "$log" ;;
	esac
	return 0
}

# verdict VALUE TARGET: ok / MISSED / "" (info or no figure)
verdict() {
	awk -v v="$1" -v t="$2" 'BEGIN {
		if (t == "info" || v == "n/a" || v == "") exit
		op = t; sub(/[0-9.]+$/, "", op); x = substr(t, length(op) + 1) + 0; v += 0
		good = (op == ">=") ? v >= x : (op == "<=") ? v <= x : (op == ">") ? v > x : (op == "<") ? v < x : -1
		print (good < 0) ? "?" : good ? "ok" : "MISSED"
	}'
}

for s in $SECTIONS; do
	section_script "$s" >/dev/null || { echo "bench: unknown section '$s' (known: $ALL_SECTIONS)" >&2; exit 2; }
done
started=$(date +%s)
echo "spantrace bench: $(date -u '+%F %T UTC'), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg), BUILD=$BUILD, REPEAT=$REPEAT"
for s in $SECTIONS; do run_section "$s"; done

echo
echo "==== summary ($(($(date +%s) - started)) s, load now $(cut -d' ' -f1-3 /proc/loadavg); medians, rounds as each section says; logs in $LOGDIR) ===="
printf '%-40s %12s  %-8s %s\n' figure value target verdict
while read -r name value target; do
	printf '%-40s %12s  %-8s %s\n' "$name" "$value" "$target" "$(verdict "$value" "$target")"
done <"$RATIOS"
[ -s "$NOTES" ] && sed 's/^/note: /' "$NOTES"
exit 0
