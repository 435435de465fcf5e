#!/usr/bin/env bash
# tools/ci_sanitize.sh - the sanitizer pass: builds everything with ASan+UBSan
# into build-san/ and runs the fast test subset (scripts marked "# fast", and
# every unit binary) against it.
#
#   tools/ci_sanitize.sh            SAN_BUILD=DIR picks another build dir
#
# Runtime settings, found by running the engine under gcc 12's ASan here:
# - UBSan: halt on the first report with a stack (the build already uses
#   -fno-sanitize-recover=undefined).
# - ASan: leak checking stays on. PoCL and its LLVM keep compiler state until
#   exit (~3.8 MB in ~4700 allocations on the first kernel compile), so those
#   libraries' leaks are suppressed by tools/lsan.supp; a leak whose stack has
#   an allocation site inside them (e.g. a cl_mem the engine never releases)
#   is hidden too, so OpenCL object lifetimes are checked by the engine's own
#   pool counters, not here.
# - LSAN_OPTIONS=use_tls=0: PoCL dlopens and dlcloses each compiled kernel
#   library, which leaves a stale dynamic-TLS slot (e.g. 0x6a4-0x8000017a6);
#   gcc 12's LeakSanitizer walks it at exit and dies ("Tracer caught signal
#   11 ... LeakSanitizer has encountered a fatal error", exit 1) in programs
#   that build more than one OpenCL program (test_cl_build, test_cl_vs_cpu).
#   Not scanning TLS for roots avoids that; no false leaks showed up with it.
#   protect_shadow_gap and detect_leaks=0 are not needed.
# - PoCL compiles kernels on first use (seconds under ASan); its cache
#   (POCL_CACHE_DIR, default ~/.cache/pocl) makes later runs fast.
set -u
cd "$(dirname "$0")/.." || exit 2
SAN_BUILD=${SAN_BUILD:-build-san}
. tools/sanitize.env

echo "== sanitizer build into $SAN_BUILD"
make -j"$(nproc)" BUILD="$SAN_BUILD" SANITIZE=1 all models || { echo "sanitizer build failed" >&2; exit 1; }
echo "== fast tests under ASan+UBSan"
FAST=1 BUILD="$PWD/$SAN_BUILD" tests/run.sh
