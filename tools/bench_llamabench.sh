#!/usr/bin/env bash
# tools/bench_llamabench.sh - prompt processing (pp512) and decode (tg128,
# from the start and after 512 positions) of both our backends against
# llama.cpp's own llama-bench, for every weight type we load (F32, F16,
# Q8_0, Q4_0, Q4_K, Q6_K), stories110M shape.
#
# llama-bench is built from the llama.cpp source and flags llama-server is
# built from (tools/build_llama_server.sh --bench: AVX-512 and VNNI where the
# CPU has them, no AMX: at de3ff81 an AMX build dies of SIGILL in ggml's AMX
# kernels on every quantized type). Ours is tools/fwdbench.c: pp512 is one
# 512-token prompt in the backend's batches (median of 9), tg128 is 128
# one-token forwards from position 1, and tg128@512 from position 512
# (llama-bench -d 512). Both run with 2 threads and their
# default OpenMP wait policy, as users run them. Rounds interleave the
# engines and types; the figures are medians of the rounds. The quantized
# files (62-117 MB) may sit largely in L3: these are not DRAM-bound figures.
#
#   tools/bench_llamabench.sh               (make build first)
#   LLAMABENCH_ROUNDS=5 TYPES="f32 q4_k" BACKENDS=cpu tools/bench_llamabench.sh
export BENCH_NAME=bench_llamabench
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
TYPES=${TYPES:-f32 f16 q8_0 q4_0 q4_k q6_k}
BACKENDS=${BACKENDS:-cpu opencl}
CC=${CC:-cc}
ROUNDS=${LLAMABENCH_ROUNDS:-3} # 5-8 minutes a round on 2 vCPUs, both backends

[ -x "$BUILD/mkmodel" ] && [ -f "$BUILD/libinfer.so" ] || die "build first"
LLAMA_BENCH=$("$ROOT/tools/build_llama_server.sh" --check --bench) ||
	skipped "no llama-bench built (make bench builds it: tools/build_llama_server.sh --bench)"
mkdir -p "$BUILD/tools"
$CC -O2 -std=gnu11 -D_GNU_SOURCE -I"$ROOT/inference" -I"$ROOT/include" -o "$BUILD/tools/fwdbench" \
	"$ROOT/tools/fwdbench.c" -L"$BUILD" -linfer -lOpenCL -Wl,-rpath,"$BUILD" || die "cannot compile fwdbench"
# The fp32 FMA roof with 2 threads, for the prompts' share of it.
$CC -O2 -march=native -pthread -o "$BUILD/tools/fmaprobe" "$ROOT/tools/fmaprobe.c" || die "cannot compile fmaprobe"
FMA_GFLOPS=$("$BUILD/tools/fmaprobe" 2 | awk '{ print $2 }')
# A prompt token's matrix flops in this shape: 2 a weight of q/k/v/o and the
# FFN's three (attention's and the classifier's left out: a floor).
PP_FLOPS_PER_TOKEN=$((2 * 12 * (4 * 768 * 768 + 3 * 768 * 2048)))
unset OMP_WAIT_POLICY # each engine's own default

# shellcheck disable=SC2086  # TYPES is a list
make_s110m "$TMP/m" $TYPES

# theirs TYPE: llama-bench's pp512, tg128 and tg128@512 tok/s, one
# repetition each (after its own warm-up run), into TMP/lb_{pp,tg,td}_TYPE.
theirs() {
	"$LLAMA_BENCH" -m "$TMP/m_$1.gguf" -p 512 -n 128 -t 2 -r 1 -o csv >"$TMP/lb.csv" 2>"$TMP/lb.err" &&
		"$LLAMA_BENCH" -m "$TMP/m_$1.gguf" -p 0 -n 128 -d 512 -t 2 -r 1 -o csv 2>"$TMP/lb.err" |
		tail -n +2 >>"$TMP/lb.csv" || die "llama-bench $1: $(tail -n 2 "$TMP/lb.err")"
	# columns by name: n_prompt, n_gen, n_depth and avg_ts
	awk -F, -v pp="$TMP/lb_pp_$1" -v tg="$TMP/lb_tg_$1" -v td="$TMP/lb_td_$1" '
		NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		{ gsub(/"/, ""); ts = $col["avg_ts"]
		  if ($col["n_prompt"] > 0) print ts >>pp; else if ($col["n_depth"] > 0) print ts >>td; else print ts >>tg }' \
		"$TMP/lb.csv"
	[ -s "$TMP/lb_td_$1" ] || die "llama-bench $1: no tg128 at depth 512 in its output"
}

# ours TYPE BACKEND: fwdbench's pp512, tg128 and tg128@512, into
# TMP/BACKEND_{pp,tg,td}_TYPE.
ours() {
	local out
	out=$("$BUILD/tools/fwdbench" "$TMP/m_$1.gguf" "$2" 512 128 2>"$TMP/fw.err") ||
		die "fwdbench $1 $2: $(tail -n 2 "$TMP/fw.err")"
	awk '{ print $2 }' <<<"$out" >>"$TMP/$2_pp_$1"
	awk '{ print $4 }' <<<"$out" >>"$TMP/$2_td_$1"
	out=$("$BUILD/tools/fwdbench" "$TMP/m_$1.gguf" "$2" 1 128 2>"$TMP/fw.err") ||
		die "fwdbench $1 $2: $(tail -n 2 "$TMP/fw.err")"
	awk '{ print $4 }' <<<"$out" >>"$TMP/$2_tg_$1"
}

for r in $(seq "$ROUNDS"); do
	line="round $r:"
	for t in $TYPES; do
		theirs "$t"
		line="$line $t llama.cpp $(tail -n1 "$TMP/lb_pp_$t")/$(tail -n1 "$TMP/lb_tg_$t")/$(tail -n1 "$TMP/lb_td_$t")"
		for b in $BACKENDS; do
			ours "$t" "$b"
			line="$line $b $(tail -n1 "$TMP/${b}_pp_$t")/$(tail -n1 "$TMP/${b}_tg_$t")/$(tail -n1 "$TMP/${b}_td_$t")"
		done
		line="$line;"
	done
	echo "$line (pp512/tg128/tg128@512 tok/s)"
done

echo "stories110M shape, 2 threads, medians of $ROUNDS rounds on $(cpu_model)"
echo "llama.cpp: $LLAMA_BENCH"
# r1 X: X to one decimal ("n/a" as it is)
r1() { awk -v v="$1" 'BEGIN { if (v == "n/a") print v; else printf "%.1f\n", v }'; }
printf '%-5s %-8s %9s %7s %9s %7s %9s %7s\n' type engine pp512 ratio tg128 ratio tg@512 ratio
for t in $TYPES; do
	lpp=$(median <"$TMP/lb_pp_$t") ltg=$(median <"$TMP/lb_tg_$t") ltd=$(median <"$TMP/lb_td_$t")
	printf '%-5s %-8s %9s %7s %9s %7s %9s %7s\n' "$t" llama.cpp "$(r1 "$lpp")" 1 "$(r1 "$ltg")" 1 "$(r1 "$ltd")" 1
	for b in $BACKENDS; do
		pp=$(median <"$TMP/${b}_pp_$t") tg=$(median <"$TMP/${b}_tg_$t") td=$(median <"$TMP/${b}_td_$t")
		printf '%-5s %-8s %9s %7s %9s %7s %9s %7s\n' "$t" "$b" "$(r1 "$pp")" "$(div "$pp" "$lpp")" \
			"$(r1 "$tg")" "$(div "$tg" "$ltg")" "$(r1 "$td")" "$(div "$td" "$ltd")"
	done
done
echo "fp32 FMA roof (tools/fmaprobe.c, 2 threads): $FMA_GFLOPS GFLOP/s"
for t in $TYPES; do
	case $t in f32 | f16) ;; *) continue ;; esac # the others multiply integers
	for b in $BACKENDS; do
		gflops=$(awk -v ts="$(median <"$TMP/${b}_pp_$t")" -v f="$PP_FLOPS_PER_TOKEN" 'BEGIN { printf "%.1f", ts * f / 1e9 }')
		echo "$t $b pp512: $gflops GFLOP/s of matrix products, $(div "$gflops" "$FMA_GFLOPS") of the roof"
		ratio "llamabench_${t}_${b}_pp512_over_fma_roof" "$(div "$gflops" "$FMA_GFLOPS")" info
	done
done
for t in $TYPES; do
	for b in $BACKENDS; do
		for m in pp:pp512 tg:tg128 td:tg128at512; do
			ratio "llamabench_${t}_${b}_${m#*:}_over_llamacpp" \
				"$(div "$(median <"$TMP/${b}_${m%%:*}_$t")" "$(median <"$TMP/lb_${m%%:*}_$t")")" ">=1.0"
		done
	done
done
