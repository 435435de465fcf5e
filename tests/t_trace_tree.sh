#!/usr/bin/env bash
# t_trace_tree.sh - the span tree says where time went on each backend.
# The (name, parent, depth) edges of `record`'s span records are:
# - cpu: the tree docs/probes.md draws (qkv holds attn_norm and rope, ffn holds
#   ffn_norm, logits holds final_norm, every phase sits in its layer);
# - opencl at the detail level (phases, chosen because op detail is
#   wanted): only spans that launch kernels, plus the host's wait (sync);
#   the norms and RoPE run inside their phase's kernel and fire no span;
# - opencl with the forward forced into one kernel: forward{sync}, no
#   empty layer or op spans.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
need_opencl
[ -x "$SPANTRACE" ] || fail "no $SPANTRACE (build first)"
need_cmd jq jq

tree() { # NAME BACKEND [INFER ARGS...]
	local name=$1 b=$2
	shift 2
	"$SPANTRACE" record -q -o "$TMP/$name.jsonl" -- "$INFER" "$MODELS/stories260K.bin" -b $b -n 6 -t 0 --ids "$@" \
		>/dev/null 2>"$TMP/$name.err" || fail "record on $name failed: $(cat "$TMP/$name.err")"
	jq -r 'select(.type == "span") | "\(.name) \(.parent) \(.depth)"' "$TMP/$name.jsonl" | sort -u >"$TMP/$name.tree"
	[ -s "$TMP/$name.tree" ] || fail "no spans on $name"
}
tree cpu cpu
tree phases opencl
tree fused opencl --cl-launch forward

expect="attention layer 2
attn_norm qkv 3
attn_out layer 2
embed forward 1
ffn layer 2
ffn_norm ffn 3
final_norm logits 2
forward null 0
layer forward 1
logits forward 1
model_load null 0
pack model_load 1
qkv layer 2
rope qkv 3
sample null 0
unload null 0"
assert_eq "cpu: the tree of docs/probes.md" "$expect" "$(cat "$TMP/cpu.tree")"
expect="attention layer 2
attn_out layer 2
embed forward 1
ffn layer 2
forward null 0
layer forward 1
logits forward 1
model_load null 0
pack model_load 1
qkv layer 2
sample null 0
sync forward 1
unload null 0"
assert_eq "opencl phases: spans that launch, and the sync" "$expect" "$(cat "$TMP/phases.tree")"
expect="forward null 0
model_load null 0
pack model_load 1
sample null 0
sync forward 1
unload null 0"
assert_eq "opencl forward launch: no empty spans" "$expect" "$(cat "$TMP/fused.tree")"

# launch modes on the forward records, device time on every span that launched
assert_eq "phases chosen for op detail" "phases" \
	"$(jq -r 'select(.type == "span" and .name == "forward") | .launch' "$TMP/phases.jsonl" | sort -u)"
assert_eq "forced forward launch" "forward" \
	"$(jq -r 'select(.type == "span" and .name == "forward") | .launch' "$TMP/fused.jsonl" | sort -u)"
assert_eq "cpu forwards run on the host" "host" \
	"$(jq -r 'select(.type == "span" and .name == "forward") | .launch' "$TMP/cpu.jsonl" | sort -u)"
assert_eq "no device time on the cpu backend" 0 \
	"$(jq -s '[.[] | select(.type == "span" and has("device_ns"))] | length' "$TMP/cpu.jsonl")"
assert_eq "phases: launching spans without device time" 0 \
	"$(jq -s '[.[] | select(.type == "span" and (.name | IN("sync", "sample", "model_load", "pack", "unload") | not) and ((.device_ns // 0) <= 0))] | length' "$TMP/phases.jsonl")"
assert_eq "host-only spans carry no device time" 0 \
	"$(jq -s '[.[] | select(.type == "span" and (.name | IN("sync", "sample", "model_load", "pack", "unload")) and has("device_ns"))] | length' "$TMP/phases.jsonl")"
