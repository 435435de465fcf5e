#!/usr/bin/env bash
# bench_engine.sh - engine speed against the machine's memory-bandwidth bound.
#
#   tools/bench_engine.sh [MODEL]     (default: $BUILD/models/demo15M.bin)
#   RUNS=5 PREFILL=64 DECODE=128 BUILD=build tools/bench_engine.sh
#
# Decode reads every weight once per token, so its ceiling is
# bandwidth / weight bytes. Each of RUNS rounds measures, back to back, the
# streaming-read bandwidth (tools/bwprobe.c, 2 threads), then prefill and
# decode tok/s of the opencl and cpu backends (tools/fwdbench.c); medians of
# the rounds are printed with the ratios. Also PoCL's per-launch cost.
# Not a test: on a shared 2-core VM the figures move by tens of percent.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
RUNS=${RUNS:-5}
PREFILL=${PREFILL:-64}
DECODE=${DECODE:-128}
MODEL=${1:-$BUILD/models/demo15M.bin}
CC=${CC:-gcc}

die() { echo "bench_engine: $*" >&2; exit 1; }
[ -f "$BUILD/libinfer.so" ] || die "no $BUILD/libinfer.so: run make first"
if [ ! -f "$MODEL" ]; then
	[ "$MODEL" = "$BUILD/models/demo15M.bin" ] || die "no model $MODEL"
	make -C "$ROOT" BUILD="$BUILD" models >/dev/null || die "cannot make the demo model"
fi

mkdir -p "$BUILD/tools"
$CC -O3 -march=native -pthread -o "$BUILD/tools/bwprobe" "$ROOT/tools/bwprobe.c" \
	|| die "cannot compile bwprobe"
$CC -O2 -std=gnu11 -D_GNU_SOURCE -I"$ROOT/inference" -I"$ROOT/include" -o "$BUILD/tools/fwdbench" \
	"$ROOT/tools/fwdbench.c" -L"$BUILD" -linfer -lOpenCL -Wl,-rpath,"$BUILD" \
	|| die "cannot compile fwdbench"

# Weight bytes one decode token reads: the file less its 28-byte header and
# the unused RoPE tables (seq_len * head_size floats).
read -r -a hdr <<<"$(od -An -t d4 -N 28 -v "$MODEL" | tr -s ' \n' ' ')"
[ "${#hdr[@]}" = 7 ] || die "$MODEL: cannot read its header"
dim=${hdr[0]} heads=${hdr[3]} seq=${hdr[6]}
size=$(stat -c %s "$MODEL")
weights=$((size - 28 - seq * (dim / heads) * 4))

median() { sort -g | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
field() { awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) print $(i+1)}'; }

: >"$BUILD/tools/bench.log"
for r in $(seq "$RUNS"); do
	"$BUILD/tools/bwprobe" 2 >>"$BUILD/tools/bench.log"
	for b in opencl cpu; do
		printf 'backend %s ' "$b" >>"$BUILD/tools/bench.log"
		"$BUILD/tools/fwdbench" "$MODEL" "$b" "$PREFILL" "$DECODE" >>"$BUILD/tools/bench.log" \
			|| die "fwdbench $b failed"
	done
	"$BUILD/tools/fwdbench" --launch >>"$BUILD/tools/bench.log"
	echo "round $r/$RUNS done" >&2
done

log=$BUILD/tools/bench.log
bw=$(field bandwidth_gbs <"$log" | median)
launch=$(field launch_us <"$log" | median)
launch_sync=$(field launch_sync_us <"$log" | median)
for b in opencl cpu; do
	eval "${b}_prefill=$(grep "backend $b " "$log" | field prefill_tok_s | median)"
	eval "${b}_decode=$(grep "backend $b " "$log" | field decode_tok_s | median)"
done
# shellcheck disable=SC2154  # set by eval above
awk -v bw="$bw" -v w="$weights" -v od="$opencl_decode" -v op="$opencl_prefill" \
    -v cd="$cpu_decode" -v cp="$cpu_prefill" -v l="$launch" -v ls="$launch_sync" \
    -v runs="$RUNS" -v model="$MODEL" -v pf="$PREFILL" 'BEGIN {
	bound = bw * 1e9 / w
	printf "model %s: %.1f MB of weights per decoded token; medians of %d rounds\n", model, w / 1e6, runs
	printf "bandwidth (2 threads)        %8.2f GB/s -> decode bound %.0f tok/s\n", bw, bound
	printf "opencl decode                %8.1f tok/s  (%.2f x bound)\n", od, od / bound
	printf "opencl prefill (%d tokens)   %8.1f tok/s  (%.2f x opencl decode)\n", pf, op, op / od
	printf "cpu decode                   %8.1f tok/s  (%.2f x bound)\n", cd, cd / bound
	printf "cpu prefill                  %8.1f tok/s  (%.2f x cpu decode)\n", cp, cp / cd
	printf "opencl / cpu                 decode %.2f x, prefill %.2f x\n", od / cd, op / cp
	printf "PoCL launch                  %.2f us per enqueue (one sync per 1000), %.2f us with a sync each\n", l, ls
}'
echo "raw figures: $log"
