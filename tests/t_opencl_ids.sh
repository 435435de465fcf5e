#!/usr/bin/env bash
# t_opencl_ids.sh - greedy generation on stories260K gives the same token ids
# on the opencl and cpu backends (prefill of a prompt, then 60+ decodes), with
# the f32 KV cache and with the f16 one.
# fast
source "$(dirname "$0")/lib.sh"
need_models
need_opencl
need_cmd jq jq
[ -x "$INFER" ] || fail "no $INFER (build first)"

m=$MODELS/stories260K.bin
for b in opencl cpu; do
	"$INFER" "$m" --ids -t 0 -n 64 -b "$b" >"$TMP/$b.ids" 2>"$TMP/$b.err" \
		|| fail "$b run failed: $(tail -n 1 "$TMP/$b.err")"
done
n=$(wc -w <"$TMP/cpu.ids")
[ "$n" -ge 32 ] || fail "cpu produced only $n ids"
assert_eq "opencl ids == cpu ids ($n tokens)" "$(cat "$TMP/cpu.ids")" "$(cat "$TMP/opencl.ids")"

# same with stats on, in both launch modes: kernel profiling events, and
# one kernel per forward or one per phase, must not change the numbers
for launch in forward phases; do
	s=$TMP/$launch.json
	"$INFER" "$m" --ids -t 0 -n 64 -b opencl --cl-launch $launch --stats "$s" >"$TMP/prof.ids" \
		2>"$TMP/prof.err" || fail "opencl --stats run failed: $(tail -n 1 "$TMP/prof.err")"
	assert_eq "$launch: opencl ids with profiling" "$(cat "$TMP/cpu.ids")" "$(cat "$TMP/prof.ids")"

	# phases: every forward fired each op span that launches a kernel once
	# per layer, and no span for the norms and RoPE inside those kernels;
	# forward: one kernel and no op span but the host's wait (sync)
	fw=$(jq .forward_passes "$s")
	[ "$fw" -ge 32 ] || fail "only $fw forward passes in the stats"
	layers=$(jq .model.n_layers "$s")
	[ "$layers" = 5 ] || fail "stats say $layers layers, stories260K has 5"
	per_layer=$layers per_fw=1
	[ $launch = forward ] && per_layer=0 per_fw=0
	for k in qkv attention attn_out ffn layer; do
		assert_eq "$launch: $k spans" $((fw * per_layer)) "$(jq ".spans.$k.count // 0" "$s")"
	done
	for k in embed logits; do
		assert_eq "$launch: $k spans" $((fw * per_fw)) "$(jq ".spans.$k.count // 0" "$s")"
	done
	for k in attn_norm rope ffn_norm final_norm; do
		assert_eq "$launch: no empty $k spans" 0 "$(jq ".spans.$k.count // 0" "$s")"
	done
	assert_eq "$launch: one sync span a forward" "$fw" "$(jq ".spans.sync.count" "$s")"
	assert_eq "$launch: forwards by launch mode" "$fw" "$(jq ".opencl.forwards_by_launch.$launch" "$s")"
	per_forward=1
	[ $launch = phases ] && per_forward=$((5 * layers + 2))
	assert_eq "$launch: opencl kernels timed" $((fw * per_forward)) "$(jq .opencl.kernels "$s")"
	assert_eq "$launch: cl_batch hits (one per forward)" "$fw" "$(jq .probes.cl_batch "$s")"
	assert_eq "$launch: device buffers freed" "$(jq .pools.device.allocs "$s")" \
		"$(jq .pools.device.frees "$s")"
	# the device KV cache counts in kv_cache, as on the CPU backend:
	# layers x seq_len x kv_dim(32) x (k, v) x 4 bytes
	assert_eq "$launch: kv_cache pool on the device" $((5 * 512 * 32 * 2 * 4)) \
		"$(jq .pools.kv_cache.peak_bytes "$s")"
	# kernels run one after another inside the forward calls (in-order
	# queue), so their device time is positive and no more than the
	# forwards' wall time
	dev=$(jq .opencl.device_ns "$s")
	[ "$dev" -gt 0 ] || fail "$launch: device_ns is $dev"
	assert_le "$launch: kernel device ns vs forward span ns" "$dev" "$(jq .spans.forward.total_ns "$s")"
done

# --kv-type f16: the cache in half the bytes, the same ids in both launch
# modes (the kernels store and read it alike), and the F32 cache's first 32
# ids. They part at token 37, where the F32 cache parts from llama.cpp's
# F16 one (t_gguf_llamacpp checks these ids against llama.cpp's).
for launch in forward phases; do
	s=$TMP/f16.$launch.json
	"$INFER" "$m" --ids -t 0 -n 64 -b opencl --kv-type f16 --cl-launch $launch --stats "$s" \
		>"$TMP/f16.$launch.ids" 2>"$TMP/f16.err" || fail "opencl --kv-type f16 failed: $(tail -n 1 "$TMP/f16.err")"
	assert_eq "$launch, --kv-type f16: kv_cache pool is half" $((5 * 512 * 32 * 2 * 2)) \
		"$(jq .pools.kv_cache.peak_bytes "$s")"
	assert_eq "$launch, --kv-type f16: the stats say so" f16 "$(jq -r .kv_type "$s")"
done
assert_eq "--kv-type f16: forward ids = phases ids" "$(cat "$TMP/f16.forward.ids")" "$(cat "$TMP/f16.phases.ids")"
assert_eq "--kv-type f16: first 32 ids = the f32 cache's" "$(cut -d' ' -f1-32 "$TMP/cpu.ids")" \
	"$(cut -d' ' -f1-32 "$TMP/f16.forward.ids")"

# The cpu backend's f16 cache: half the bytes, each value rounded to the
# nearest half as the kernels' vstore_half_rte, and on stories260K the same
# ids as opencl's f16 cache.
s=$TMP/f16.cpu.json
"$INFER" "$m" --ids -t 0 -n 64 -b cpu --kv-type f16 --stats "$s" >"$TMP/f16.cpu.ids" 2>"$TMP/f16.err" ||
	fail "cpu --kv-type f16 failed: $(tail -n 1 "$TMP/f16.err")"
assert_eq "cpu, --kv-type f16: kv_cache pool is half" $((5 * 512 * 32 * 2 * 2)) \
	"$(jq .pools.kv_cache.peak_bytes "$s")"
assert_eq "cpu, --kv-type f16: the stats say so" f16 "$(jq -r .kv_type "$s")"
assert_eq "cpu --kv-type f16 ids = opencl's" "$(cat "$TMP/f16.forward.ids")" "$(cat "$TMP/f16.cpu.ids")"
