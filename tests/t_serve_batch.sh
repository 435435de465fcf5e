#!/usr/bin/env bash
# Batch invariance end to end: N concurrent greedy requests (streaming and
# not, different prompts and lengths) produce exactly the text and ids each
# produces alone. stories260K (id prompts) and the stories15M shape, cpu and
# opencl, a tiny KV pool that forces preemption by recompute, and the F16
# KV cache. Seeded requests at a temperature, whose rows a step samples on
# several threads, draw alone what they draw at once, and each step's
# sampling is a span of its own.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_node
need_models
need_cmd jq jq
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"
[ -r "$MODELS/tokenizer.bin" ] || skip "no ../shared/models/tokenizer.bin"

# spec CONCURRENT PROMPT... : lengths 20, 27, 34, ... tokens
spec() { greedy_spec "$1" 20 7 "" "${@:2}"; }

# check NAME PROMPTS... : solo (one at a time) vs all at once on the running engine.
check() {
	local name=$1
	shift
	spec false "$@" >"$TMP/solo.json"
	spec true "$@" >"$TMP/conc.json"
	client "$TMP/solo.json" "$TMP/solo"
	client "$TMP/conc.json" "$TMP/conc"
	jq -e 'select(.error)' "$TMP/conc" >/dev/null && fail "$name: a request failed: $(grep error "$TMP/conc" | head -n 1)"
	same_outputs "$TMP/solo" "$TMP/conc" || fail "$name: concurrent outputs differ from solo ones"
	ok "$name: $# concurrent requests = solo, text and ids"
	assert_eq "$name: every request finished" "$#" "$(jq -s '[.[] | select(.finish_reason)] | length' "$TMP/conc")"
	# stories260K finishes a request in milliseconds, so on a loaded machine
	# its requests may never overlap; the slower shape must batch.
	case $name in
	stories260K*) assert_ge "$name: most sequences in a step" "$(stat .serving.max_step_seqs)" 1 ;;
	*) assert_le "$name: steps batched more than one sequence" 2 "$(stat .serving.max_step_seqs)" ;;
	esac
}

ids_prompts=('[1]' '[1, 461, 401]' '[1, 378, 455, 473]' '[1]' '[1, 299, 362, 409, 283]' '[1, 13]')
text_prompts=('"Once upon a time"' '"The cat sat"' '"A dog"' '""' '"In the park there was a big tree"' '"Lily"')

for b in cpu opencl; do
	[ $b = opencl ] && need_opencl
	start_engine "$MODELS/stories260K.bin" -z "$MODELS/tokenizer.bin" -b $b --max-seqs 6
	check "stories260K $b" "${ids_prompts[@]}"
	stop_engine
	start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b $b --max-seqs 6
	check "stories15M shape $b" "${text_prompts[@]}"
	stop_engine
	# 12 blocks of 8 positions: not enough for six sequences of ~30-60 positions
	start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b $b --max-seqs 6 --kv-blocks 12 --block-size 8
	check "tiny pool $b" "${text_prompts[@]}"
	assert_le "tiny pool $b: sequences were preempted" 1 "$(stat .serving.preempted)"
	assert_eq "tiny pool $b: preemptions counted per request too" "$(stat .serving.preempted)" \
		"$(stat '[.serving.per_request[].preemptions] | add')"
	assert_eq "tiny pool $b: all blocks back" 0 "$(health kv_blocks_used)"
	stop_engine
done

# The F16 KV cache (opencl) batches alike: concurrent = solo.
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b opencl --max-seqs 6 --kv-type f16
check "stories15M shape opencl --kv-type f16" "${text_prompts[@]}"
stop_engine

# sampled_spec CONCURRENT: request I at temperature 0.8 and top-p 0.9 when I
# is even, else at OpenAI's defaults (1 and 1), seed I, 30 tokens
sampled_spec() {
	local i=0 sep= p
	printf '{"concurrent": %s, "requests": [' "$1"
	for p in "${text_prompts[@]}"; do
		if [ $((i % 2)) = 0 ]; then
			printf '%s{"prompt": %s, "max_tokens": 30, "temperature": 0.8, "top_p": 0.9, "seed": %d}' "$sep" "$p" $i
		else
			printf '%s{"prompt": %s, "max_tokens": 30, "seed": %d}' "$sep" "$p" $i
		fi
		sep=,
		i=$((i + 1))
	done
	printf ']}\n'
}
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b opencl --max-seqs 6
sampled_spec false >"$TMP/solo.json"
sampled_spec true >"$TMP/conc.json"
client "$TMP/solo.json" "$TMP/solo"
# the concurrent batch traced at detail level where BPF can be loaded
why_not=$(bpf_missing)
if [ -z "$why_not" ]; then
	"$SPANTRACE" record -q -p "$EPID" --level detail -o "$TMP/run.jsonl" 2>"$TMP/record.err" &
	rec=$!
	wait_for grep -qs '"type":"session"' "$TMP/run.jsonl" || fail "record did not attach: $(cat "$TMP/record.err")"
fi
client "$TMP/conc.json" "$TMP/conc"
assert_eq "sampled: every request finished" "${#text_prompts[@]}" \
	"$(jq -s '[.[] | select(.finish_reason)] | length' "$TMP/conc")"
same_outputs "$TMP/solo" "$TMP/conc" || fail "sampled: concurrent outputs differ from solo ones"
ok "sampled (seeded, temperature 0.8 and 1): concurrent = solo"
assert_le "sampled: steps batched more than one sequence" 2 "$(stat .serving.max_step_seqs)"
if [ -n "$why_not" ]; then
	echo "note: the sample span check did not run: $why_not"
else
	kill -INT $rec
	wait $rec || fail "record exited $?: $(cat "$TMP/record.err")"
	# one sample span per step, inside it (every step here has rows to
	# sample: the prompts fit a step)
	steps=$(jq -s 'map(select(.type == "step")) | length' "$TMP/run.jsonl")
	assert_le "sampled: steps traced" 30 "$steps"
	assert_eq "sampled: a sample span per step" "$steps" \
		"$(jq -s 'map(select(.type == "span" and .name == "sample")) | length' "$TMP/run.jsonl")"
	assert_eq "sampled: every sample span inside a step, and not empty" 0 "$(jq -s '
		[.[] | select(.type == "step")] as $steps |
		[.[] | select(.type == "span" and .name == "sample") | . as $sp |
		 select(.dur_ns <= 0 or ([$steps[] | select(.ts_ns <= $sp.ts_ns and
			$sp.ts_ns + $sp.dur_ns <= .ts_ns + .dur_ns)] | length) != 1)] | length' "$TMP/run.jsonl")"
fi
stop_engine
