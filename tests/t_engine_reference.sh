#!/usr/bin/env bash
# Greedy ids from BOS (-t 0 -n 64) on stories260K: both backends must equal an
# independent numpy port of run.c (tools/llama2_ref.py) id for id.
source "$(dirname "$0")/lib.sh"
need_models
# make deps installs numpy (python3-pandas depends on python3-numpy)
/usr/bin/python3 -c 'import numpy' 2>/dev/null ||
	fail "no numpy for /usr/bin/python3: make deps installs it (Debian python3-numpy, via python3-pandas)"
/usr/bin/python3 "$ROOT/tools/llama2_ref.py" "$MODELS/stories260K.bin" 64 > "$TMP/ref.txt" || fail "reference failed"
[ "$(wc -w < "$TMP/ref.txt")" -gt 10 ] || fail "reference produced too few ids"
"$INFER" "$MODELS/stories260K.bin" --ids -t 0 -n 64 -b cpu > "$TMP/cpu.txt" 2>"$TMP/cpu.err" || fail "cpu run: $(cat "$TMP/cpu.err")"
assert_eq "cpu ids vs reference" "$(cat "$TMP/ref.txt")" "$(cat "$TMP/cpu.txt")"
need_opencl
"$INFER" "$MODELS/stories260K.bin" --ids -t 0 -n 64 -b opencl > "$TMP/cl.txt" 2>"$TMP/cl.err" || fail "opencl run: $(cat "$TMP/cl.err")"
assert_eq "opencl ids vs reference" "$(cat "$TMP/ref.txt")" "$(cat "$TMP/cl.txt")"
