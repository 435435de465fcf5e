#!/usr/bin/env bash
# tools/uprobecost.sh - what a function-entry uprobe costs per call when the
# function opens with endbr64 (-fcf-protection): the probe on the endbr64
# itself (single-stepped out of line) against 4 bytes in, on the `push %rbp`
# the kernel emulates (what core/uprobe_entry.c picks). A tiny function in a
# shared library is called HITS times; the program times its own loop.
#
#   tools/uprobecost.sh            (root; perf for the perf rows)
#   HITS=200000 REPEAT=3 BUILD=build tools/uprobecost.sh
#
# Rows (ns per call, median of REPEAT):
#   none            untraced
#   span_at0        spantrace record --span uprobe:LIB:work with SPANTRACE_NO_ENDBR_SKIP=1
#                   (entry uprobe + uretprobe, both on the endbr64)
#   span_at4        the same, as spantrace places it now (+4, on the push)
#   perf_at0        perf stat on a perf probe at work (entry only, no BPF)
#   perf_at4        the same at work+4
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
HITS=${HITS:-200000}
REPEAT=${REPEAT:-3}
CC=${CC:-gcc}
SPANTRACE=$BUILD/spantrace
TMP=$(mktemp -d /tmp/uprobecost.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
die() { echo "uprobecost: $*" >&2; exit 1; }

[ -x "$SPANTRACE" ] || die "no $SPANTRACE (build first)"
# In assembly, so the prologue is the one measured: endbr64, then push %rbp.
cat >"$TMP/work.s" <<'EOF'
	.text
	.globl work
	.type work,@function
	.p2align 4
work:
	endbr64
	push %rbp
	mov %rsp,%rbp
	lea 1(%rdi,%rdi,2),%eax
	pop %rbp
	ret
	.size work,.-work
	.section .note.GNU-stack,"",@progbits
EOF
cat >"$TMP/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int work(int x);
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	volatile int acc = 0;
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		acc += work((int)i);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return 0;
}
EOF
$CC -shared -o "$TMP/libuc.so" "$TMP/work.s" ||
	die "cannot build the library"
$CC -O2 -o "$TMP/prog" "$TMP/prog.c" -L"$TMP" -luc -Wl,-rpath,"$TMP" || die "cannot build the program"
LIB=$TMP/libuc.so
head=$(objdump -d "$LIB" | awk '/<work>:/ { f = 1; next } f && /^ *[0-9a-f]+:/ { print; n++ } n == 2 { exit }')
echo "work() opens with:"
echo "$head" | sed 's/^/    /'
echo "$head" | head -n 1 | grep -q endbr64 || die "work() does not open with endbr64"
echo "$head" | tail -n 1 | grep -q "push *%rbp" || die "work() has no push %rbp after endbr64"

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

run_none() { "$TMP/prog" "$HITS"; }
run_span() { # $1: environment for spantrace
	env "$1" "$SPANTRACE" record -q --span "uprobe:$LIB:work:w" -o "$TMP/t.jsonl" -- "$TMP/prog" "$HITS" 2>"$TMP/err" ||
		die "record failed: $(tail -n 3 "$TMP/err")"
}
run_span_at0() { run_span SPANTRACE_NO_ENDBR_SKIP=1; }
run_span_at4() { run_span SPANTRACE_NO_ENDBR_SKIP=0; }
# perf probe (bpftrace 0.17 here refuses work+4): a uprobe trace event
# counted by perf stat; the same breakpoint and single-step or emulation.
run_perf() { # $1: event
	perf stat -x, -e "probe_libuc:$1" -o "$TMP/perf.out" -- "$TMP/prog" "$HITS"
}
run_perf_at0() { run_perf w0; }
run_perf_at4() { run_perf w4; }

rows="none span_at0 span_at4"
if command -v perf >/dev/null && perf probe -q -x "$LIB" -a w0=work && perf probe -q -x "$LIB" -a w4=work+4; then
	trap 'perf probe -q -d "probe_libuc:*"; rm -rf "$TMP"' EXIT
	rows="$rows perf_at0 perf_at4"
else
	perf probe -q -d "probe_libuc:*" 2>/dev/null
	echo "no perf probe: perf rows left out"
fi
for r in $rows; do : >"$TMP/$r.ns"; done
for i in $(seq "$REPEAT"); do # rounds interleave the variants
	for r in $rows; do "run_$r" | tail -n 1 >>"$TMP/$r.ns"; done
done
base=$(median <"$TMP/none.ns")
printf '%-14s %12s %14s\n' variant ns/call "probe ns/call"
for r in $rows; do
	m=$(median <"$TMP/$r.ns")
	printf '%-14s %12s %14s\n' "$r" "$m" "$(echo "$m - $base" | bc)"
done
