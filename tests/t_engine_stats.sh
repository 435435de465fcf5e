#!/usr/bin/env bash
# fast
# The engine's --stats JSON is internally consistent: span counts follow
# from the forward passes and layers, probe-site calls match the spans,
# pools balance, quantiles are ordered. Also --serve and a clean SIGTERM.
source "$(dirname "$0")/lib.sh"
need_models
need_cmd jq jq
M=$MODELS/stories260K.bin
S=$TMP/stats.json

"$INFER" "$M" --ids -t 0 -n 64 -b cpu --stats "$S" >/dev/null 2>"$TMP/err" || fail "infer: $(cat "$TMP/err")"
j() { jq -r "$1" "$S"; }
L=$(j .model.n_layers)
F=$(j .forward_passes)
T=$(j .tokens)
assert_eq "backend" cpu "$(j .backend)"
assert_eq "layers from the header" 5 "$L"
assert_eq "tokens (one per position from BOS)" 64 "$T"
assert_eq "forward passes (prefill of BOS + 63 decodes)" 64 "$F"
assert_eq "requests" 1 "$(j .requests)"
assert_eq "prompt tokens" 1 "$(j .prompt_tokens)"
assert_eq "forward spans" "$F" "$(j .spans.forward.count)"
assert_eq "layer spans = forward passes x layers" $((F * L)) "$(j .spans.layer.count)"
for k in attn_norm qkv rope attention attn_out ffn_norm ffn; do
	assert_eq "$k spans" $((F * L)) "$(j .spans.$k.count)"
done
for k in embed final_norm logits; do assert_eq "$k spans" "$F" "$(j .spans.$k.count)"; done
assert_eq "sample spans" "$T" "$(j .spans.sample.count)"
assert_eq "span_begin calls" $((F * (1 + L))) "$(j .probes.span_begin)"
assert_eq "span_end calls" $((F * (1 + L))) "$(j .probes.span_end)"
# + 3: the load's model_load and pack, the exit's unload
assert_eq "op_begin calls" $((F * (3 + 7 * L) + T + 3)) "$(j .probes.op_begin)"
assert_eq "op_end calls" "$(j .probes.op_begin)" "$(j .probes.op_end)"
assert_eq "token_begin calls" "$T" "$(j .probes.token_begin)"
assert_eq "token_end calls" "$T" "$(j .probes.token_end)"
assert_eq "request_end calls" 1 "$(j .probes.request_end)"
assert_eq "kv_usage calls (one per forward)" "$F" "$(j .probes.kv_usage)"
assert_eq "alloc calls = pool allocs" "$(j '[.pools[].allocs] | add')" "$(j .probes.alloc)"
assert_eq "every alloc freed" "$(j .probes.alloc)" "$(j .probes.free)"
assert_eq "nothing live at exit" 0 "$(j '[.pools[].live_bytes] | add')"
assert_eq "nothing reserved at exit" 0 "$(j '[.pools[].reserved_bytes] | add')"
page=$(getconf PAGESIZE)
assert_eq "weights reserve whole pages of the mapping" $(( ($(stat -c %s "$M") + page - 1) / page * page )) \
	"$(j .pools.weights.peak_reserved_bytes)"
assert_eq "no used pool reserves less than it peaked at" 0 \
	"$(j '[.pools[] | select(.peak_reserved_bytes < .peak_bytes)] | length')"
assert_eq "weights peak = the checkpoint's size" "$(stat -c %s "$M")" "$(j .pools.weights.peak_bytes)"
# kv cache: layers x seq_len x kv_dim(32) x (k, v) x 4 bytes
assert_eq "kv cache bytes" $((5 * 512 * 32 * 2 * 4)) "$(j .pools.kv_cache.peak_bytes)"
assert_eq "spans ordered median <= p95 <= max <= total" 0 \
	"$(j '[.spans[] | select(.count > 0) | select(.median_ns > .p95_ns or .p95_ns > .max_ns or .max_ns > .total_ns)] | length')"
assert_le "layers nest inside forwards" "$(j .spans.layer.total_ns)" "$(j .spans.forward.total_ns)"
assert_le "forwards fit in the wall time" "$(j .spans.forward.total_ns)" "$(j .wall_ns)"
assert_eq "tok/s = tokens / wall" 0 "$(j '(.tok_per_s - .tokens * 1e9 / .wall_ns) | fabs | . > 0.01 | if . then 1 else 0 end')"
assert_eq "no OpenCL kernels on cpu" 0 "$(j .opencl.kernels)"

# A prompt over the backend's batch limit (64) prefills in two forward calls.
"$MKMODEL" "$TMP/m.bin" --shape 64,172,2,4,4,512,256 --seed 3 --tokenizer "$TMP/tok.bin" || fail mkmodel
prompt="the cat and the dog went to the park with a ball and a big red bird on a tree there"
prompt="$prompt, and $prompt"
"$INFER" "$TMP/m.bin" -z "$TMP/tok.bin" -b cpu -t 0 -n 200 -i "$prompt" --stats "$S" >/dev/null 2>"$TMP/err" \
	|| fail "prompted run: $(cat "$TMP/err")"
P=$(j .prompt_tokens) T=$(j .tokens)
[ "$P" -gt 64 ] && [ "$P" -le 128 ] || fail "prompt should be 65..128 tokens, is $P"
assert_eq "prefill in ceil(P/64) calls, then one per token" $((2 + T - 1)) "$(j .forward_passes)"
assert_eq "layer spans with a batched prefill" $(( (2 + T - 1) * 2 )) "$(j .spans.layer.count)"

# --serve: one line per request, ids 1..3, each like a fresh greedy run.
want=$("$INFER" "$M" --ids -t 0 -n 20 -b cpu 2>/dev/null)
printf '\n\n\n' | "$INFER" "$M" --ids -t 0 -n 20 -b cpu --serve --stats "$S" >"$TMP/out" 2>"$TMP/err" \
	|| fail "serve: $(cat "$TMP/err")"
assert_eq "serve output lines" 3 "$(wc -l <"$TMP/out")"
assert_eq "every request equals a fresh run" 3 "$(grep -cxF "$want" "$TMP/out")"
assert_eq "serve requests" 3 "$(j .requests)"
assert_eq "serve tokens" 60 "$(j .tokens)"

# SIGTERM while waiting for input: exit 0 and still write the stats.
rm -f "$S"
mkfifo "$TMP/in"
"$INFER" "$M" --ids -t 0 -n 20 -b cpu --serve --stats "$S" <"$TMP/in" >"$TMP/out" 2>"$TMP/err" &
pid=$!
exec 3>"$TMP/in"
echo >&3
wait_for grep -q . "$TMP/out" || fail "no completion from --serve"
kill -TERM "$pid"
wait "$pid"; rc=$?
exec 3>&-
assert_eq "exit status after SIGTERM" 0 "$rc"
assert_eq "stats written after SIGTERM" 1 "$(j .requests)"
