#!/usr/bin/env bash
# t_bpf_headers.sh - every BPF header compiles on its own, after vmlinux.h
# and libbpf's headers, as libbpf-tools' do: a header that works only
# because its includer included something first is a defect. Each is
# compiled alone (clang -target bpf -fsyntax-only), and a planted header
# that uses a type it does not include must fail the same way.
# fast
source "$(dirname "$0")/lib.sh"
need_cmd clang clang
[ -s "$BUILD/vmlinux.h" ] || fail "no $BUILD/vmlinux.h (make all)"
arch=$(uname -m | sed 's/x86_64/x86/; s/aarch64/arm64/')
multi=$(gcc -print-multiarch 2>/dev/null)
alone() {   # alone DIR HEADER: 0 if HEADER compiles alone
	printf '#include "vmlinux.h"\n#include <bpf/bpf_helpers.h>\n#include <bpf/bpf_tracing.h>\n#include <bpf/bpf_core_read.h>\n#include "%s"\n' \
		"$2" >"$TMP/alone.c"
	clang -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_"$arch" -Wall -Werror -I"$BUILD" -I"$1" -I"$ROOT/bpf" \
		-I"$ROOT/include" ${multi:+-I/usr/include/$multi} -fsyntax-only "$TMP/alone.c" 2>"$TMP/alone.err"
}
n=0
for h in "$ROOT"/bpf/*.h; do
	alone "$ROOT/bpf" "$(basename "$h")" || fail "$(basename "$h") does not compile alone: $(grep -m2 error "$TMP/alone.err")"
	n=$((n + 1))
done
assert_ge "BPF headers compiled alone" "$n" 10
# the control: a header leaning on its includer (struct event_header, no include)
mkdir -p "$TMP/planted"
printf 'struct planted { struct event_header h; };\n' >"$TMP/planted/planted.h"
! alone "$TMP/planted" planted.h || fail "a header that does not include what it uses compiled alone"
grep -q 'incomplete type' "$TMP/alone.err" || fail "the planted header failed, but not for its missing type: $(cat "$TMP/alone.err")"
ok "the planted header without its include fails"
