#!/usr/bin/env bash
# t_gguf.sh - GGUF models (issue 23): mkmodel --gguf writes F32, F16, Q8_0 and Q4_0
# files from a llama2.c checkpoint; the engine runs them.
#  - F32 from stories260K: greedy ids equal the .bin's for the whole
#    sequence, on the cpu and opencl backends;
#  - the tokenizer inside the file encodes and decodes as llama2.c's does:
#    the same text from a prompt, with the 32000-token tokenizer and with
#    the demo's synthetic one;
#  - F16, Q8_0 and Q4_0: weights stay in their type (the packed bytes in
#    the device pool are the type's, not F32's); Q8_0 ids equal F32's for
#    the demo model's first 32 tokens; the OpenCL kernels (both launch
#    modes) give the cpu backend's ids for F16, Q8_0 and Q4_0;
#  - a model whose layers mix matrix types runs on the cpu backend, and
#    OpenCL names two layer matrices that differ (an embedding of another
#    type than the layers': t_gguf_llamacpp.sh, on llama-quantize's files);
#  - --kv-type auto picks f16 for F16 and quantized layers, else f32;
#  - bad files get one clear line and exit 1, never a crash: truncated,
#    overlapping and out-of-range tensors, absurd dimensions, a missing
#    tensor, a wrong shape, another architecture, an unsupported type (named
#    with its tensor) and an unknown one, a metadata key twice, settings the
#    engine cannot honour (the legacy RoPE scale, no BOS, EOS added), a
#    byte token out of place and a tokenizer larger than the embedding.
source "$(dirname "$0")/lib.sh"
[ -r "$MODELS/stories260K.bin" ] || skip "no $MODELS/stories260K.bin beside the project"
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
EDIT="/usr/bin/python3 $ROOT/tests/helpers/gguf_edit.py"
need_cmd jq jq
need_cmd clinfo clinfo
# Without an OpenCL device the cpu checks run and the test ends in a skip
# that says the opencl ones did not.
backends=cpu
clinfo -l 2>/dev/null | grep -q Device && backends="cpu opencl"

mk() { "$MKMODEL" "$@" >"$TMP/mk.err" 2>&1 || fail "mkmodel $*: $(cat "$TMP/mk.err")"; }
mk "$TMP/s260.gguf" --gguf f32 --from "$MODELS/stories260K.bin" --tokenizer "$TMP/s260tok.bin"
mk "$TMP/s260f16.gguf" --gguf f16 --from "$MODELS/stories260K.bin" --tokenizer "$TMP/s260tok.bin"
mk "$TMP/d.gguf" --gguf f32 --from "$DEMO_MODEL" --vocab "$DEMO_TOK"
mk "$TMP/dq8.gguf" --gguf q8_0 --from "$DEMO_MODEL" --vocab "$DEMO_TOK"
mk "$TMP/dq4.gguf" --gguf q4_0 --from "$DEMO_MODEL" --vocab "$DEMO_TOK"
mk "$TMP/dreal.gguf" --gguf f32 --from "$DEMO_MODEL" --vocab "$MODELS/tokenizer.bin"
ok "mkmodel wrote F32, F16, Q8_0 and Q4_0 GGUF files"

# -b auto (the default): a GGUF file on the cpu backend where OpenCL has no
# GPU (the faster one there: docs/benchmarks.md, llamabench), OpenCL where a
# device is named; a llama2.c checkpoint on OpenCL, as before.
backend_of() { "$INFER" "$@" -n 2 -t 0 --ids --stats "$TMP/b.json" >/dev/null 2>&1 &&
	jq -r .backend "$TMP/b.json"; }
gpu=$(clinfo -l 2>/dev/null | grep -ciE "gpu|nvidia|amd|intel.*graphics" || true)
if [ "$backends" = "cpu opencl" ] && [ "$gpu" = 0 ]; then
	assert_eq "auto: a GGUF file runs on cpu (OpenCL has no GPU)" cpu "$(backend_of "$TMP/dq8.gguf")"
	assert_eq "auto: --cl-device names OpenCL" opencl "$(backend_of "$TMP/dq8.gguf" --cl-device 0)"
	assert_eq "auto: a llama2.c checkpoint runs on OpenCL" opencl "$(backend_of "$DEMO_MODEL")"
	assert_eq "-b opencl is obeyed for a GGUF file" opencl "$(backend_of "$TMP/dq8.gguf" -b opencl)"
fi

# ids and text end the test when infer fails (in $(...) too); their output
# is compared as is, never as a digest: two empty outputs have one md5
ids() { "$INFER" "$@" -t 0 --ids 2>"$TMP/ids.err" || fail "infer $*: $(cat "$TMP/ids.err")"; }
for b in $backends; do
	want=$(ids "$MODELS/stories260K.bin" -b $b -n 0)
	# -n 0 runs the whole sequence: 512 positions
	assert_eq "stories260K, $b: ids of the .bin (whole sequence)" 512 "$(wc -w <<<"$want")"
	assert_eq "stories260K, $b: GGUF F32 ids = .bin ids (whole sequence)" "$want" "$(ids "$TMP/s260.gguf" -b $b -n 0)"
done

text() { "$INFER" "$@" -t 0 -n 48 -b cpu -i "once upon a time there was" 2>"$TMP/text.err" ||
	fail "infer $*: $(cat "$TMP/text.err")"; }
want=$(text "$DEMO_MODEL" -z "$MODELS/tokenizer.bin")
[ -n "$want" ] || fail "no text from the .bin"
assert_eq "32000-token tokenizer inside the GGUF: same text" "$want" "$(text "$TMP/dreal.gguf")"
assert_eq "synthetic tokenizer inside the GGUF: same text" "$(text "$DEMO_MODEL" -z "$DEMO_TOK")" "$(text "$TMP/d.gguf")"

# F16, Q8_0 and Q4_0: computed as stored. The packed copy in the device
# pool is the type's size: half of F32's for F16, ~0.28 for Q8_0
# (36 bytes a block of 32 against 128), ~0.16 for Q4_0 (20 bytes).
f32_ids=$(ids "$TMP/d.gguf" -b cpu -n 32)
assert_eq "demo model, cpu: F32 ids" 32 "$(wc -w <<<"$f32_ids")"
assert_eq "demo model, cpu: Q8_0 ids = F32 ids (32 tokens)" "$f32_ids" "$(ids "$TMP/dq8.gguf" -b cpu -n 32)"
ids "$TMP/s260f16.gguf" -b cpu -n 32 >/dev/null
device_peak() { "$INFER" "$1" -b cpu -n 2 -t 0 --ids --stats "$TMP/st.json" >/dev/null 2>"$TMP/st.err" ||
	fail "infer $1: $(cat "$TMP/st.err")"; jq '.pools.device.peak_bytes' "$TMP/st.json"; }
p32=$(device_peak "$TMP/d.gguf") p8=$(device_peak "$TMP/dq8.gguf") p4=$(device_peak "$TMP/dq4.gguf")
assert_pos "F32 packed weights (bytes)" "$p32"
need_num "Q8_0 and Q4_0 packed weights (bytes)" "$p8" "$p4"
awk -v a="$p8" -v b="$p32" 'BEGIN { exit !(a > 0.25 * b && a < 0.32 * b) }' ||
	fail "Q8_0 packed weights take $p8 bytes against F32's $p32: not Q8_0-sized"
ok "Q8_0 packed weights: $p8 bytes, $(awk -v a="$p8" -v b="$p32" 'BEGIN { printf "%.3f", a / b }') of F32's"
awk -v a="$p4" -v b="$p32" 'BEGIN { exit !(a > 0.14 * b && a < 0.18 * b) }' ||
	fail "Q4_0 packed weights take $p4 bytes against F32's $p32: not Q4_0-sized"
ok "Q4_0 packed weights: $p4 bytes, $(awk -v a="$p4" -v b="$p32" 'BEGIN { printf "%.3f", a / b }') of F32's"
# F16, on stories260K (the header promises it too)
s32=$(device_peak "$TMP/s260.gguf") s16=$(device_peak "$TMP/s260f16.gguf")
assert_pos "stories260K F32 packed weights (bytes)" "$s32"
need_num "stories260K F16 packed weights (bytes)" "$s16"
awk -v a="$s16" -v b="$s32" 'BEGIN { exit !(a > 0.45 * b && a < 0.55 * b) }' ||
	fail "F16 packed weights take $s16 bytes against F32's $s32: not F16-sized"
ok "F16 packed weights: $s16 bytes, $(awk -v a="$s16" -v b="$s32" 'BEGIN { printf "%.3f", a / b }') of F32's"
# The kernels against the cpu backend with the f32 cache (auto's is f16
# for these types).
if [[ $backends == *opencl* ]]; then
	for f in s260f16 dq8 dq4; do
		want=$(ids "$TMP/$f.gguf" -b cpu -n 64)
		for mode in forward phases; do
			assert_eq "$f, opencl --cl-launch $mode: ids = cpu's" "$want" \
				"$(ids "$TMP/$f.gguf" -b opencl --cl-launch $mode --kv-type f32 -n 64)"
		done
	done
fi
# --kv-type auto (the default): f16 for F16 and quantized weights, f32 for
# F32 weights, on both backends; the stats say which.
kv_of() { "$INFER" "$1" -b "$2" -n 2 -t 0 --ids --stats "$TMP/kv.json" >/dev/null 2>"$TMP/kv.err" ||
	fail "infer $1 -b $2: $(cat "$TMP/kv.err")"; jq -r .kv_type "$TMP/kv.json"; }
for f in s260 s260f16 dq8 dq4; do
	for b in $backends; do
		want=f16
		[ "$f" = s260 ] && want=f32
		assert_eq "$f, $b, --kv-type auto: the cache is $want" "$want" "$(kv_of "$TMP/$f.gguf" "$b")"
	done
done
# one F32 matrix retyped F16 (its bytes reinterpreted: numbers, not sense)
$EDIT "$TMP/s260.gguf" "$TMP/mixed.gguf" type blk.1.attn_q.weight 1 || fail "gguf_edit"
ids "$TMP/mixed.gguf" -b cpu -n 4 >/dev/null
ok "a model mixing F32 and F16 layer matrices runs on the cpu backend"
if [[ $backends == *opencl* ]]; then
	expect_fail "opencl on mixed layer matrices" \
		"opencl backend: tensor blk.1.attn_q.weight is F16 but blk.0.attn_q.weight is F32" \
		"$INFER" "$TMP/mixed.gguf" -b opencl -n 2 --ids
fi

# Bad files: exit 1 (not a signal), one line naming the problem.
bad() { # WHAT EXPECT EDIT ARGS...
	local what=$1 expect=$2
	shift 2
	$EDIT "$TMP/s260.gguf" "$TMP/bad.gguf" "$@" || fail "gguf_edit $*"
	expect_fail "$what" "$expect" "$INFER" "$TMP/bad.gguf" -b cpu -n 2 --ids
}
size=$(stat -c %s "$TMP/s260.gguf")
bad "truncated file" "truncated" truncate $((size / 2))
bad "truncated header" "truncated or corrupt" truncate 100
bad "overlapping tensors" "overlap" offset blk.0.attn_q.weight blk.0.attn_k.weight
bad "tensor past the end" "runs past the end" offset_far blk.1.ffn_up.weight
bad "absurd dimension" "absurd dimension" dim blk.0.attn_q.weight 1125899906842624
bad "missing tensor" "tensor blk.0.attn_q.weight is missing" rename blk.0.attn_q.weight blk.0.attn_X.weight
bad "wrong shape" "has shape" dim blk.0.ffn_norm.weight 32
bad "another architecture" "architecture 'gpt2x' is not supported" string general.architecture gpt2x
bad "unsupported type" "tensor blk.0.ffn_up.weight has type BF16" type blk.0.ffn_up.weight 30
bad "unknown type" "unknown type 99" type blk.0.ffn_up.weight 99
bad "a metadata key twice" "metadata key tokenizer.ggml.eos_token_id appears twice" \
	rename_key tokenizer.ggml.bos_token_id tokenizer.ggml.eos_token_id
bad "the legacy RoPE scale" "llama.rope.scale_linear is 4; the engine has no RoPE scaling" \
	add_f32 llama.rope.scale_linear 4
bad "no BOS" "add_bos_token is false" bool tokenizer.ggml.add_bos_token 0
bad "EOS added" "add_eos_token is true" bool tokenizer.ggml.add_eos_token 1
# without llama.vocab_size, which would name the mismatch first
$EDIT "$TMP/s260.gguf" "$TMP/novocab.gguf" rename_key llama.vocab_size llama.vocab_sizX ||
	fail "gguf_edit rename_key"
$EDIT "$TMP/novocab.gguf" "$TMP/bad.gguf" dim token_embd.weight 500 1 || fail "gguf_edit dim"
expect_fail "fewer embedding rows than tokens" "its tokenizer has 512 tokens but token_embd.weight has 500 rows" \
	"$INFER" "$TMP/bad.gguf" -b cpu -n 2 --ids
bad "a byte token out of place" "token 4 is '<0x02>', not the byte token <0x01>" token 4 '<0x02>'
bad "RoPE scaling by YaRN" "llama.rope.scaling.type is 'yarn'; the engine has no RoPE scaling" \
	add_str llama.rope.scaling.type yarn
bad "a RoPE scaling factor" "llama.rope.scaling.factor is 4; the engine has no RoPE scaling" \
	add_f32 llama.rope.scaling.factor 4
bad "a RoPE attention factor" "llama.rope.scaling.attn_factor is 0.5; the engine has no RoPE scaling" \
	add_f32 llama.rope.scaling.attn_factor 0.5
bad "the alignment as an int32" "general.alignment is not a uint32" kv_type general.alignment 5
# no scaling, said in each way llama.cpp reads as none, runs: a scale of 1
# or 0 (llama.cpp reads 0 so), type none whatever the factor, type linear
# with a factor of 1, and a factor of 0 present (the older key then unread)
scaled() { # NAME EDIT ARGS... [-- EDIT ARGS...]: s260 with the edits applied in turn
	local name=$1 from=$TMP/s260.gguf n=0 args=()
	shift
	for a in "$@" --; do
		if [ "$a" = -- ]; then
			n=$((n + 1))
			$EDIT "$from" "$TMP/scale$n.gguf" "${args[@]}" || fail "gguf_edit ${args[*]}"
			from=$TMP/scale$n.gguf args=()
		else
			args+=("$a")
		fi
	done
	assert_eq "$name: the same ids" "$(ids "$TMP/s260.gguf" -b cpu -n 16)" "$(ids "$from" -b cpu -n 16)"
}
scaled "llama.rope.scale_linear 1" add_f32 llama.rope.scale_linear 1
scaled "llama.rope.scale_linear 0" add_f32 llama.rope.scale_linear 0
scaled "scaling none, factor 4" add_str llama.rope.scaling.type none -- add_f32 llama.rope.scaling.factor 4
scaled "scaling linear, factor 1" add_str llama.rope.scaling.type linear -- add_f32 llama.rope.scaling.factor 1
scaled "factor 0, scale_linear 4" add_f32 llama.rope.scaling.factor 0 -- add_f32 llama.rope.scale_linear 4
[[ $backends == *opencl* ]] || skip "clinfo lists no OpenCL device: the opencl checks did not run"
