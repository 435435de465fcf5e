#!/usr/bin/env bash
# t_trace_tree.sh - both backends give the same span tree: the set of
# (name, parent, depth) edges in `record`'s span records is identical for
# the cpu and opencl backends on the same model and prompt, and it is the
# tree the README draws (qkv holds attn_norm and rope, ffn holds ffn_norm,
# logits holds final_norm, every phase sits in its layer).
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
need_opencl
[ -x "$SPANTRACE" ] || fail "no $SPANTRACE (build first)"
command -v jq >/dev/null || skip "jq not installed"

for b in cpu opencl; do
	"$SPANTRACE" record -q -o "$TMP/$b.jsonl" -- "$INFER" "$MODELS/stories260K.bin" -b $b -n 6 -t 0 --ids \
		>/dev/null 2>"$TMP/$b.err" || fail "record on $b failed: $(cat "$TMP/$b.err")"
	jq -r 'select(.type == "span") | "\(.name) \(.parent) \(.depth)"' "$TMP/$b.jsonl" | sort -u >"$TMP/$b.tree"
	[ -s "$TMP/$b.tree" ] || fail "no spans on $b"
done
diff "$TMP/cpu.tree" "$TMP/opencl.tree" >"$TMP/diff" || fail "the backends' trees differ: $(cat "$TMP/diff")"
ok "same edges on both backends: $(tr '\n' ';' <"$TMP/cpu.tree")"
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
qkv layer 2
rope qkv 3
sample null 0"
assert_eq "the README's tree" "$expect" "$(cat "$TMP/cpu.tree")"
