#!/usr/bin/env bash
# tools/bench_serve_q8.sh - the batching ratio on Q8_0 GGUF models: the serve
# section (tools/bench_serve.sh, its rounds and ratios) on two files that
# mkmodel writes here:
#   - the demo model as Q8_0 (stories15M shape, 16 MB: it stays in cache,
#     so one stream is not held by memory), both backends;
#   - a generated stories110M shape as Q8_0 (116 MB), the default backend;
#   - the 15M one again with sampled requests (temperature 1, top_p 1:
#     OpenAI's defaults), the default backend: sampling a 32000-token row
#     takes ~0.2 ms, a fifth of a lone 15M token's step.
# Ratio names gain _s15m_q8_0 or _s110m_q8_0 after the backend (and _t1).
#
#   tools/bench_serve_q8.sh
#   REPEAT=5 tools/bench_serve_q8.sh
export BENCH_NAME=bench_serve_q8
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
[ -x "$INFER" ] && [ -x "$BUILD/mkmodel" ] || die "build first"
[ -r "$DEMO_MODEL" ] || skipped "no demo model (make models)"

"$BUILD/mkmodel" "$TMP/s15q8.gguf" --gguf q8_0 --from "$DEMO_MODEL" \
	--vocab "$BUILD/models/demo_tokenizer.bin" >/dev/null || die "mkmodel --gguf q8_0 (15M)"
make_s110m "$TMP/s110" q8_0

# The GGUF files carry their vocabularies: no -z (TOK empty).
LABEL=_s15m_q8_0 TOK='' "$ROOT/tools/bench_serve.sh" "$TMP/s15q8.gguf" || die "15M Q8_0"
LABEL=_s110m_q8_0 TOK='' BACKENDS=opencl MAX_TOKENS=48 "$ROOT/tools/bench_serve.sh" "$TMP/s110_q8_0.gguf" ||
	die "110M Q8_0"
LABEL=_s15m_q8_0 TOK='' BACKENDS=opencl TEMPERATURE=1 "$ROOT/tools/bench_serve.sh" "$TMP/s15q8.gguf" ||
	die "15M Q8_0 sampled"
