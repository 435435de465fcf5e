#!/usr/bin/env bash
# t_profile_node.sh - readable profiles of node-llama-cpp (issue 44):
# `spantrace profile -- node --perf-basic-prof generate.mjs` on the
# stories15M shape as GGUF, 240 tokens (enough samples in the decode). Its folded stacks hold llama.cpp's C++ functions
# demangled (llama_context's methods, as perf shows them) and no _Z name that
# c++filt could demangle; and frames in node's JIT code are named from the /tmp/perf-PID.map
# that --perf-basic-prof writes, each such name one the map holds.
source "$(dirname "$0")/lib.sh"
need_bpf
need_cmd node nodejs
need_cmd c++filt binutils
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
LLAMA=$ROOT/tests/llama
[ -d "$LLAMA/node_modules/node-llama-cpp" ] || fail "no node-llama-cpp (make deps)"
"$MKMODEL" "$TMP/d15.gguf" --gguf f32 --from "$DEMO_MODEL" --vocab "$DEMO_TOK" >"$TMP/mk.err" 2>&1 ||
	fail "mkmodel: $(cat "$TMP/mk.err")"

(cd "$LLAMA" && timeout 120 "$SPANTRACE" profile -F 999 -o "$TMP/prof" -- \
	node --perf-basic-prof --logfile="$TMP/v8.log" --no-logfile-per-isolate generate.mjs "$TMP/d15.gguf" 256 8 240) >"$TMP/prog.out" 2>"$TMP/prof.err" ||
	fail "profile: $(tail -n 5 "$TMP/prof.err")"
F=$TMP/prof/folded.txt
[ -s "$F" ] || fail "no folded stacks"

# demangled: a llama_context method (which one the stack reaches depends on
# the unwinding, frame pointers only so far: issue 61 asks for decode's)
grep -q "llama_context::" "$F" || fail "no demangled llama_context:: method in the stacks"
# a frame left as _Z... must be one c++filt cannot demangle either (a V8
# template or two are beyond both demanglers)
tr ';' '\n' <"$F" | sed 's/ [0-9]*$//' | grep '^_Z' | sort -u >"$TMP/mangled"
c++filt <"$TMP/mangled" | paste -d'\t' "$TMP/mangled" - | awk -F'\t' '$1 != $2' >"$TMP/demanglable"
[ ! -s "$TMP/demanglable" ] || fail "frames left mangled that c++filt demangles: $(head -n 2 "$TMP/demanglable")"
ok "frames left mangled: $(wc -l <"$TMP/mangled"), each one c++filt cannot demangle either"
ok "C++ frames demangled: $(tr ';' '\n' <"$F" | grep -m1 'llama_context::' | cut -c1-80)"

map=$(ls -t /tmp/perf-*.map 2>/dev/null | head -n 1)
[ -n "$map" ] || fail "node wrote no /tmp/perf-PID.map"
# the JIT names in the stacks: frames that are entries of the map
cut -d' ' -f3- "$map" | sort -u >"$TMP/jit_names"
tr ';' '\n' <"$F" | sed 's/ [0-9]*$//' | sort -u >"$TMP/frames"
jit=$(comm -12 "$TMP/jit_names" "$TMP/frames" | wc -l)
assert_pos "frames named from node's perf map ($map)" "$jit"
ok "e.g. $(comm -12 "$TMP/jit_names" "$TMP/frames" | head -n 2 | tr '\n' '|' | cut -c1-120)"
rm -f "$map"
