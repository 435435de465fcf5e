#!/usr/bin/env bash
# t_fleet_state_attach.sh - attach to an idle engine that has served before:
# the engine re-fires its state (state_* probes, on the tracer's signal), so
# `top -p` shows the weights and KV pools and the weight tree, and no
# "unknown frees"; `record -p` then sees a request and the engine's exit, and
# its per-pool live and peak bytes equal the engine's own --stats, with every
# free matched. Before, top showed only the activations pool and the
# engine's first free as a problem.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
for b in "$INFER" "$SPANTRACE"; do [ -x "$b" ] || fail "no $b (build first)"; done
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"

mkfifo "$TMP/in"
OMP_NUM_THREADS=1 "$INFER" "$DEMO_MODEL" -z "$DEMO_TOK" --serve -n 6 -b cpu -t 0 --stats "$TMP/st.json" \
	<"$TMP/in" >"$TMP/out" 2>"$TMP/srv.err" &
SRV=$!
exec 3>"$TMP/in"
ask
ok "the engine served one request before any tracer"

# top on the idle engine
"$SPANTRACE" top -b -n 2 -d 0.5 -w 200 -p $SRV >"$TMP/frames" 2>"$TMP/top.err" 3>&- ||
	fail "top exited $?: $(cat "$TMP/top.err")"
last=$(awk '/^spantrace top/ {n++} {f[n] = f[n] $0 "\n"} END {printf "%s", f[n]}' "$TMP/frames")
grep -q 'weights [0-9.]*[KMG]' <<<"$last" || fail "no weights pool in top: $last"
grep -q 'kv_cache [0-9.]*[KMG]' <<<"$last" || fail "no kv_cache pool in top: $last"
grep -q 'tensors 11 ' <<<"$last" || fail "no weight tree in top: $last"
grep -q 'unknown frees' <<<"$last" && fail "top lists unknown frees: $last"
ok "top -p on the idle engine: $(grep -o 'weights [^ ]*' <<<"$last"), $(grep -o 'kv_cache [^ ]*' <<<"$last"), $(grep -o 'tensors [^)]*)' <<<"$last")"

# top --binary: the running processes of the file are asked for their state too
"$SPANTRACE" top -b -n 2 -d 0.5 -w 200 --binary "$BUILD/libinfer.so" >"$TMP/bframes" 2>"$TMP/btop.err" 3>&- ||
	fail "top --binary exited $?: $(cat "$TMP/btop.err")"
last=$(awk '/^spantrace top/ {n++} {f[n] = f[n] $0 "\n"} END {printf "%s", f[n]}' "$TMP/bframes")
grep -q 'weights [0-9.]*[KMG]' <<<"$last" || fail "no weights pool in top --binary: $last"
grep -q 'tensors 11 ' <<<"$last" || fail "no weight tree in top --binary: $last"
grep -q 'unknown frees' <<<"$last" && fail "top --binary lists unknown frees: $last"
ok "top --binary with the engine running: $(grep -o 'weights [^ ]*' <<<"$last"), $(grep -o 'tensors [^)]*)' <<<"$last")"

# record through a request and the engine's exit
"$SPANTRACE" record -q -p $SRV -o "$TMP/t.jsonl" 2>"$TMP/rec.err" 3>&- &
rec=$!
wait_for [ -s "$TMP/t.jsonl" ] || fail "tracer did not attach: $(cat "$TMP/rec.err")"
have_state() { [ "$(jq -c 'select(.type == "tensor")' "$TMP/t.jsonl" | wc -l)" -ge 11 ]; }
wait_for have_state || fail "no state dump in the record"
ask
exec 3>&-
wait $SRV || fail "engine exited $?"
wait $rec || fail "record exited $?: $(cat "$TMP/rec.err")"

j() { jq -s "$1" "$TMP/t.jsonl"; }
assert_eq "unknown frees" 0 "$(j '[.[] | select(.type == "free" and .unknown)] | length')"
assert_eq "tok_embeddings shape" "[32000,288]" "$(jq -c 'select(.type == "tensor" and .name == "tok_embeddings") | .shape' "$TMP/t.jsonl" | head -n1)"
# live at attach: the weights and kv_cache pools never change after load,
# so their live bytes at attach are the engine's peaks.
# (The engine's figures must be there: two missing fields would agree.)
for pool in weights kv_cache; do
	peak=$(jq ".pools.$pool.peak_bytes" "$TMP/st.json")
	assert_pos "engine's $pool peak bytes" "$peak"
	assert_eq "$pool live at attach = engine's" "$peak" \
		"$(j "[.[] | select(.type == \"alloc\" and .at_attach and .pool == \"$pool\")] | last | .live_bytes")"
done
for pool in weights kv_cache activations; do
	for f in live_bytes peak_bytes; do
		want=$(jq ".pools.$pool.$f" "$TMP/st.json")
		need_num "engine's $pool $f" "$want"
		assert_eq "$pool $f at the end = engine's --stats" "$want" \
			"$(j "[.[] | select((.type == \"alloc\" or .type == \"free\") and .pool == \"$pool\")] | last | .$f")"
	done
done

# The weight tree says each tensor's type: F32 for the llama2.c checkpoint
# above; for a Q8_0 GGUF file, every tensor as the file lists it (2 + 9 a
# layer), its bytes those of its stored type.
assert_eq "tok_embeddings dtype" '"F32"' "$(jq -c 'select(.type == "tensor" and .name == "tok_embeddings") | .dtype' "$TMP/t.jsonl" | head -n1)"
"$MKMODEL" "$TMP/q8.gguf" --gguf q8_0 --from "$DEMO_MODEL" --vocab "$DEMO_TOK" >/dev/null || fail "mkmodel --gguf"
mkfifo "$TMP/in2"
"$INFER" "$TMP/q8.gguf" --serve -n 4 -b cpu -t 0 <"$TMP/in2" >/dev/null 2>"$TMP/srv2.err" &
SRV=$!
exec 3>"$TMP/in2"
"$SPANTRACE" record -q -p $SRV -o "$TMP/g.jsonl" --duration 2 2>"$TMP/rec2.err" 3>&- ||
	fail "record on the GGUF engine: $(cat "$TMP/rec2.err")"
exec 3>&-
wait $SRV
tensors() { jq -c "select(.type == \"tensor\") | $1" "$TMP/g.jsonl"; }
assert_eq "GGUF tensors in the tree" 56 "$(tensors .name | wc -l)"
assert_eq "token_embd.weight: Q8_0, 32000 x 288 in 34-byte blocks of 32" '{"dtype":"Q8_0","bytes":9792000}' \
	"$(tensors 'select(.name == "token_embd.weight") | {dtype, bytes}' | head -n1)"
assert_eq "norms are F32" '["F32"]' "$(jq -s -c '[.[] | select(.type == "tensor" and (.name | endswith("norm.weight"))) | .dtype] | unique' "$TMP/g.jsonl")"
