#!/usr/bin/env bash
# t_opencl_engine.sh - --opencl on our own engine, which reports its kernels
# through its cl_batch probe too: two independent paths, one run. Every
# kernel the engine reports is one clEnqueueNDRangeKernel the loader saw,
# and the device time the engine read for its kernels (cl_batch records)
# sums to exactly what the loader's clGetEventProfilingInfo returns gave.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
need_opencl
need_cmd jq jq
for b in "$INFER" "$SPANTRACE"; do [ -x "$b" ] || fail "no $b (build first)"; done

# both launch modes: one kernel per forward, and one per phase
for mode in forward:12 phases:100; do
	launch=${mode%%:*}
	"$SPANTRACE" record -q --opencl -o "$TMP/t.jsonl" -- "$INFER" "$MODELS/stories260K.bin" -b opencl \
		--cl-launch "$launch" -n 16 -t 0 --ids >/dev/null 2>"$TMP/rec.err" \
		|| fail "record failed: $(tail -n 3 "$TMP/rec.err")"
	n=$(jq -c 'select(.type == "kernel")' "$TMP/t.jsonl" | wc -l)
	assert_le "$launch: the engine reported kernels" "${mode#*:}" "$n"
	assert_eq "$launch: loader enqueues vs the engine's kernel records" "$n" \
		"$(jq -c 'select(.type == "cl_kernel")' "$TMP/t.jsonl" | wc -l)"
	assert_eq "$launch: device times read, one per kernel" "$n" \
		"$(jq -c 'select(.type == "cl_devtime" and .dur_ns != null)' "$TMP/t.jsonl" | wc -l)"
	assert_eq "$launch: device ns: engine (cl_batch) vs loader (clGetEventProfilingInfo)" \
		"$(jq -s '[.[] | select(.type == "kernel") | .end_ns - .start_ns] | add' "$TMP/t.jsonl")" \
		"$(jq -s '[.[] | select(.type == "cl_devtime") | .dur_ns] | add' "$TMP/t.jsonl")"
	assert_eq "$launch: every enqueue named" 0 \
		"$(jq -c 'select(.type == "cl_kernel" and .name == null)' "$TMP/t.jsonl" | wc -l)"
done
