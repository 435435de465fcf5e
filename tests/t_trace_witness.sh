#!/usr/bin/env bash
# t_trace_witness.sh - an independent witness: bpftrace counts every begin and
# end probe per span kind (and token/request begins) while `spantrace record`
# traces the same engine run; our per-name span counts equal bpftrace's.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
need_cmd bpftrace bpftrace
for b in "$INFER" "$SPANTRACE"; do [ -x "$b" ] || fail "no $b (build first)"; done

lib=$(cd "$BUILD" && pwd)/libinfer.so
[ -r "$lib" ] || fail "no $lib"
kinds=(forward embed layer attn_norm qkv rope attention attn_out ffn_norm ffn final_norm logits sample)

# Maps are keyed by pid: canary runs that prove bpftrace is armed stay
# apart from the traced run.
bpftrace -e "
usdt:$lib:infer:span_begin { @b[pid, arg0] = count(); }
usdt:$lib:infer:span_end { @e[pid, arg0] = count(); }
usdt:$lib:infer:op_begin { @b[pid, arg0] = count(); }
usdt:$lib:infer:op_end { @e[pid, arg0] = count(); }
usdt:$lib:infer:token_begin { @tok[pid] = count(); }
usdt:$lib:infer:request_begin { @req[pid] = count(); printf(\"armed %d\\n\", pid); }" >"$TMP/bt.out" 2>"$TMP/bt.err" &
bt=$!
wait_for grep -q Attaching "$TMP/bt.out" "$TMP/bt.err" || fail "bpftrace did not attach: $(cat "$TMP/bt.err")"
# "Attaching" is printed before the probes are armed: run one-token canaries
# until bpftrace reports one.
armed() {
	"$INFER" "$MODELS/stories260K.bin" -b cpu -n 1 -t 0 --ids >/dev/null 2>&1
	grep -q '^armed' "$TMP/bt.out"
}
wait_for armed || fail "bpftrace saw no canary request: $(cat "$TMP/bt.err")"

"$SPANTRACE" record -q -o "$TMP/t.jsonl" --summary "$TMP/s.json" -- \
	"$INFER" "$MODELS/stories260K.bin" -b cpu -n 32 -t 0 --ids >/dev/null 2>"$TMP/rec.err" ||
	fail "record failed: $(tail -n 3 "$TMP/rec.err")"
stop_bpftrace $bt
grep -q '^@b\[' "$TMP/bt.out" || fail "bpftrace printed no counts: $(head -c 500 "$TMP/bt.out")"

pid=$(jq -r 'select(.type == "span") | .pid' "$TMP/t.jsonl" | head -n 1)
[ -n "$pid" ] || fail "no span in the recording"
bt_count() { # MAP KEY -> the traced pid's count (0 if absent)
	awk -v m="@$1[$pid, $2]:" '$1 " " $2 == m { print $3; f = 1 } END { if (!f) print 0 }' "$TMP/bt.out"
}
bt_one() { # MAP -> the traced pid's count
	awk -v m="@$1[$pid]:" '$1 == m { print $2; f = 1 } END { if (!f) print 0 }' "$TMP/bt.out"
}
for i in "${!kinds[@]}"; do
	n=${kinds[$i]}
	ours=$(jq ".spans.$n.count // 0" "$TMP/s.json")
	assert_pos "span $n: spans recorded (the cpu engine runs every kind)" "$ours"
	assert_eq "span $n: begins seen by bpftrace vs our spans" "$(bt_count b "$i")" "$ours"
	assert_eq "span $n: ends seen by bpftrace vs our spans" "$(bt_count e "$i")" "$ours"
done
tokens=$(jq .tokens_generated "$TMP/s.json")
assert_eq "tokens recorded (the run's -n)" 32 "$tokens"
assert_eq "tokens (bpftrace vs ours)" "$(bt_one tok)" "$tokens"
assert_eq "requests recorded" 1 "$(jq .requests "$TMP/s.json")"
assert_eq "requests (bpftrace vs ours)" "$(bt_one req)" 1
