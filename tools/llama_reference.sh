#!/bin/bash
# tools/llama_reference.sh - llama.cpp as a fixed reference: node-llama-cpp that
# loads one named ggml CPU variant on every x86-64 host, in tests/llama/ref.
#
# usage: tools/llama_reference.sh          make (or keep) tests/llama/ref; prints its variant
#        tools/llama_reference.sh --check  print the variant of a finished ref (exit 1: none)
#
# Why: node-llama-cpp's prebuilt package ships one libggml-cpu-*.so per CPU
# family and ggml loads the best scoring one for the host (sapphirerapids
# with AMX on a recent Xeon, zen4, haswell...). Each rounds its sums its own
# way, so the greedy ids the tests compare the engine with moved with the
# host: CI failed on an AMX Xeon where it passed on Zens (issue 45).
#
# How: ggml picks a CPU variant among the files in the directory it loads
# backends from, which node-llama-cpp takes from the addon's directory.
# node-llama-cpp prefers a "local prebuilt" directory inside its own package
# (bins/linux-x64) over the prebuilt package. So tests/llama/ref holds a copy
# of node-llama-cpp (hard links: no space, same inodes, so a uprobe on either
# path is one probe) whose bins/linux-x64 has the prebuilt package's files
# with a single CPU variant. Its other modules resolve from tests/llama's
# node_modules, one directory up. tests/llama's own node-llama-cpp is left
# as users get it (the best variant), for the tracing tests and the peers.
#
# The variant: haswell (AVX2, FMA, F16C, BMI2): every host this project has
# run on has it (Zen 3, Zen 5, Sapphire Rapids), and it is the fastest variant
# common to them all. A host without it gets x64 (SSE only, any x86-64), and
# the tests say they compared against that instead.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
llama=$root/tests/llama
ref=$llama/ref
pkg=$ref/node_modules/node-llama-cpp
[ "${1:-}" = --check ] && { cat "$ref/VARIANT" 2>/dev/null || exit 1; exit 0; }

src=$llama/node_modules/node-llama-cpp
bins=$llama/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
[ -d "$src" ] && [ -d "$bins" ] || { echo "llama_reference: no node-llama-cpp in $llama (make deps)" >&2; exit 1; }

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
variant=haswell
for f in sse4_2 avx f16c avx2 bmi2 fma; do
	[[ $flags == *" $f "* ]] || { variant=x64; break; }
done
[ -f "$bins/libggml-cpu-$variant.so" ] || { echo "llama_reference: no libggml-cpu-$variant.so in $bins" >&2; exit 1; }

# kept while it matches: the variant and the package's version
stamp="$variant $(jq -r .version "$src/package.json")"
if [ "$(cat "$ref/STAMP" 2>/dev/null)" = "$stamp" ] && [ -f "$pkg/bins/linux-x64/libggml-cpu-$variant.so" ]; then
	echo "$variant"
	exit 0
fi
rm -rf "$ref"
mkdir -p "$ref/node_modules"
cp -al "$src" "$pkg"
rm -rf "$pkg/bins"
mkdir -p "$pkg/bins/linux-x64"
for f in "$bins"/*; do
	case ${f##*/} in
	libggml-cpu-"$variant".so) ;;
	libggml-cpu-*) continue ;;
	esac
	ln "$f" "$pkg/bins/linux-x64/"
done
echo "$variant" >"$ref/VARIANT"
echo "$stamp" >"$ref/STAMP"
echo "$variant"
