#!/bin/bash
# Build llama-server (and llama-quantize, beside it) from the llama.cpp source that
# node-llama-cpp ships as a git bundle.
#
# usage: tools/build_llama_server.sh [--check] [--bench [--amx]] [OUTDIR]
# OUTDIR: $LLAMA_SERVER_CACHE, else /var/cache/spantrace/llama-server (make llama-server).
# Prints the path of the llama-server binary. A finished build is reused: the binary is
# keyed by the bundle's commit, so a new node-llama-cpp rebuilds and an old one does not.
# --check only prints the path of a finished build (exit 1 if there is none). A build is
# finished when both tools are there: llama-quantize writes GGUF files as users get them.
#
# GGML_NATIVE=OFF with the AVX2/AVX-512 flags set by hand: a native build on this VM enables
# AMX paths that crashed on Q8_0 (illegal instruction, then a segfault at start-up). Each
# flag is on only where /proc/cpuinfo lists its features (AVX-512 on a Zen 3 is an illegal
# instruction at start-up too), and the build is keyed by the set it used.
# --bench builds llama-bench instead (a sibling directory, keyed the same way, so the
# server's build stays as it is) and prints its path; --amx adds GGML_AMX_{TILE,INT8,BF16}
# where the CPU lists amx_tile/amx_int8/amx_bf16. At de3ff81 that build dies of SIGILL
# (tilezero in ggml's tinygemm_kernel_amx) on Q8_0, Q4_0, Q4_K and Q6_K on an AMX Xeon
# whose tiles work (a plain ldtilecfg/tdpbssd test runs), so the speed peer is the build
# without AMX, the one llama-server is.
# Static libraries, so the server is one file whose symbol table names llama_decode; that is
# also how spantrace must find llama.cpp inside an executable (issue 24).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0 bench=0 amx=0
[ "${1:-}" = --check ] && { check=1; shift; }
[ "${1:-}" = --bench ] && { bench=1; shift; }
[ $bench = 1 ] && [ "${1:-}" = --amx ] && { amx=1; shift; }
out=${1:-${LLAMA_SERVER_CACHE:-/var/cache/spantrace/llama-server}}
bundle=$root/tests/llama/node_modules/node-llama-cpp/llama/gitRelease.bundle
[ -f "$bundle" ] || { echo "build_llama_server: no $bundle (run make deps)" >&2; exit 1; }

commit=$(git bundle list-heads "$bundle" | awk '$2=="HEAD"{print $1}')
[ -n "$commit" ] || { echo "build_llama_server: $bundle has no HEAD" >&2; exit 1; }

# has FLAG...: every one is in the CPU's flags
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { local f; for f; do [[ $cpu_flags == *" $f "* ]] || return 1; done; }
onoff() { if has "$@"; then echo ON; else echo OFF; fi; }
avx2=$(onoff avx avx2 fma f16c)
avx512=$(onoff avx512f avx512cd avx512vl avx512dq avx512bw)
[ "$avx512" = ON ] && vnni=$(onoff avx512_vnni) bf16=$(onoff avx512_bf16) || vnni=OFF bf16=OFF
level=avx2-$avx2.avx512-$avx512.vnni-$vnni.bf16-$bf16
amxflag=OFF
[ $amx = 1 ] && [ "$avx512" = ON ] && amxflag=$(onoff amx_tile amx_int8 amx_bf16)
targets=(llama-server llama-quantize)
if [ $bench = 1 ]; then
	level=bench.$level.amx-$amxflag
	targets=(llama-bench)
fi
bin=$out/$commit-$level/bin/${targets[0]}
finished() { local t; for t in "${targets[@]}"; do [ -x "${bin%/*}/$t" ] || return 1; done; }
if finished; then echo "$bin"; exit 0; fi
[ $check = 0 ] || { echo "build_llama_server: no llama-server built in $out (make llama-server)" >&2; exit 1; }

src=$out/src-$commit-$level
rm -rf "$src" "$out/$commit-$level"
mkdir -p "$out"
git clone -q "$bundle" "$src" >&2
git -C "$src" checkout -q "$commit"

start=$(date +%s)
cmake -S "$src" -B "$out/$commit-$level" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
    -DGGML_NATIVE=OFF -DGGML_AVX=$avx2 -DGGML_AVX2=$avx2 -DGGML_FMA=$avx2 -DGGML_F16C=$avx2 \
    -DGGML_AVX512=$avx512 -DGGML_AVX512_VNNI=$vnni -DGGML_AVX512_BF16=$bf16 \
    -DGGML_AMX_TILE=$amxflag -DGGML_AMX_INT8=$amxflag -DGGML_AMX_BF16=$amxflag \
    -DGGML_OPENMP=ON >&2
cmake --build "$out/$commit-$level" --target "${targets[@]}" -j "$(nproc)" >&2
echo "build_llama_server: built in $(( $(date +%s) - start )) s" >&2
rm -rf "$src"
finished || { echo "build_llama_server: no ${targets[*]} in ${bin%/*} after the build" >&2; exit 1; }
echo "$bin"
