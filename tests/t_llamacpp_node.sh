#!/usr/bin/env bash
# t_llamacpp_node.sh - llama.cpp traced unmodified (issue 24): a node-llama-cpp
# program (its prebuilt libllama, dlopen'ed late) on the stories15M shape as
# GGUF, context 256, an 8-token prompt, 31 outputs. `record` with no flags
# finds the engine, and every figure equals what the program and llama.cpp
# counted themselves: 31 forwards (8 tokens, then 1), the tokens node-llama-
# cpp's meter says it evaluated, one request of 8 + 31, and the KV cache
# pool exactly the size llama.cpp logs (2 x 6 layers x 256 cells x 288 x 2
# bytes of F16 K and V). `top` and the daemon's Prometheus give the same.
# `--span` on llama_decode, which the profile also spans, nests the two.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
for c in jq:jq node:nodejs bpftrace:bpftrace curl:curl; do need_cmd "${c%%:*}" "${c#*:}"; done
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
LLAMA=$ROOT/tests/llama
BINS=$LLAMA/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
[ -d "$BINS" ] || fail "no node-llama-cpp (make deps)"
LIB=$(ls "$BINS"/libllama.v*.so | head -n 1)
"$MKMODEL" "$TMP/d15.gguf" --gguf f32 --from "$DEMO_MODEL" --vocab "$DEMO_TOK" >"$TMP/mk.err" 2>&1 ||
	fail "mkmodel: $(cat "$TMP/mk.err")"
GEN=(node "$LLAMA/generate.mjs" "$TMP/d15.gguf" 256 8 31)
KV_BYTES=$((2 * 6 * 256 * 288 * 2))

# ---- record, no flags ----
(cd "$LLAMA" && timeout 120 "$SPANTRACE" record -o "$TMP/r.jsonl" -- "${GEN[@]}") >"$TMP/prog.out" 2>"$TMP/rec.err" ||
	fail "record: $(tail -n 5 "$TMP/rec.err")"
prog=$(tail -n 1 "$TMP/prog.out")
jq -e . <<<"$prog" >/dev/null || fail "the program printed no result: $prog"
assert_eq "the program's outputs" 31 "$(jq '.ids | length' <<<"$prog")"
assert_eq "session: engine pending (node has none until it loads libllama)" pending \
	"$(jq -r 'select(.type=="session") | .engine' "$TMP/r.jsonl")"
jq -e --arg lib "$LIB" 'select(.type=="summary") | .engine.engine == "llamacpp" and .engine.path == $lib
	and (.engine.build_id | length) == 40 and .engine.missing == []' "$TMP/r.jsonl" >/dev/null ||
	fail "summary engine: $(jq -c 'select(.type=="summary") | .engine' "$TMP/r.jsonl")"
ok "summary names llama.cpp, $LIB, its build id, every function found"

fwd=$(jq -c 'select(.type=="span" and .name=="forward") | [.n_tokens, .n_seqs, .n_outputs]' "$TMP/r.jsonl")
assert_eq "forward spans" 31 "$(wc -l <<<"$fwd")"
assert_eq "first forward [n_tokens, n_seqs, n_outputs]" "[8,1,1]" "$(head -n 1 <<<"$fwd")"
assert_eq "the other 30" 30 "$(tail -n +2 <<<"$fwd" | grep -cx '\[1,1,1\]')"
assert_eq "tokens decoded = node-llama-cpp's meter (input + output)" \
	"$(jq '.input_tokens + .output_tokens' <<<"$prog")" \
	"$(jq -s 'map(select(.type=="span" and .name=="forward") | .n_tokens) | add' "$TMP/r.jsonl")"
assert_eq "one request: [prompt, generated]" "[8,31]" \
	"$(jq -c 'select(.type=="request") | [.prompt_tokens, .generated_tokens]' "$TMP/r.jsonl")"
assert_eq "steps" 31 "$(jq -s 'map(select(.type=="step")) | length' "$TMP/r.jsonl")"
assert_eq "model loads" 1 "$(jq -s 'map(select(.type=="span" and .name=="model_load")) | length' "$TMP/r.jsonl")"

# The KV cache: one buffer, exactly llama.cpp's size, which its log states too.
kvlog=$(jq -r '.kv_log[0]' <<<"$prog")
[[ $kvlog =~ size\ =\ +([0-9.]+)\ MiB\ \(\ +256\ cells,\ +6\ layers ]] || fail "llama.cpp's KV line: $kvlog"
assert_eq "llama.cpp's KV size (MiB, as it rounds)" "${BASH_REMATCH[1]}" "$(awk -v b=$KV_BYTES 'BEGIN{printf "%.2f", b/1048576}')"
assert_eq "kv_cache allocations [bytes, live after]" "[$KV_BYTES,$KV_BYTES]" \
	"$(jq -c 'select(.type=="alloc" and .pool=="kv_cache") | [.bytes, .live_bytes]' "$TMP/r.jsonl")"
assert_eq "kv_cache peak in the summary" $KV_BYTES \
	"$(jq 'select(.type=="summary") | .pools[] | .kv_cache.peak_bytes' "$TMP/r.jsonl")"
w=$(jq 'select(.type=="summary") | .pools[] | .weights.peak_bytes' "$TMP/r.jsonl")
size=$(stat -c %s "$TMP/d15.gguf")
[ "$w" -gt $((size * 9 / 10)) ] && [ "$w" -le "$size" ] || fail "weights pool $w for a $size-byte file"
ok "weights pool: $w bytes of the $size-byte file mapped"
assert_eq "loss" "0 0" "$(jq -r 'select(.type=="summary") | "\(.loss.dropped) \(.loss.invalid)"' "$TMP/r.jsonl")"

# ---- --span on a function the profile spans too: llama_decode, as the
# issue times llama.cpp. The kernel runs the two return probes in the order
# their entries ran; each must still close its own span. ----
(cd "$LLAMA" && timeout 120 "$SPANTRACE" record -q --span "uprobe:$LIB:llama_decode" -o "$TMP/s.jsonl" \
	--summary "$TMP/s.json" -- "${GEN[@]}") >/dev/null 2>"$TMP/span.err" || fail "record --span: $(tail -n 5 "$TMP/span.err")"
assert_eq "--span llama_decode: [its spans, forward spans inside one, span errors]" "[31,31,0]" \
	"$(jq -s -c '[(map(select(.type=="span" and .name=="llama_decode")) | length),
		(map(select(.type=="span" and .name=="forward" and .parent=="llama_decode" and (.mismatch | not))) | length),
		(map(select(.type=="summary"))[0].span_errors)]' "$TMP/s.jsonl")"

# ---- bpftrace, an outside witness: every llama_decode of the library the
# process maps. Quoted: the '@' of node_modules/@node-llama-cpp is bpftrace
# syntax. A probe on any other copy of libllama counts 0: uprobes belong
# to an inode, and only the mapped one runs. Only the program's own calls
# count (cpid): the probe fires in every process that maps the library. ----
cp "$LIB" "$TMP/libllama-copy.so"
for lib in "$LIB" "$TMP/libllama-copy.so"; do
	(cd "$LLAMA" && timeout 120 bpftrace -e "uprobe:\"$lib\":llama_decode /pid == cpid/ { @n = count(); }" \
		-c "$(command -v node) generate.mjs $TMP/d15.gguf 256 8 31") >"$TMP/bt.out" 2>&1 ||
		fail "bpftrace: $(tail -n 3 "$TMP/bt.out")"
	# a map never written is not printed: 0, once bpftrace attached and the program ran
	grep -q '^Attaching 1 probe' "$TMP/bt.out" || fail "bpftrace did not attach to $lib: $(head -n 3 "$TMP/bt.out")"
	grep -q '"ids"' "$TMP/bt.out" || fail "the program under bpftrace printed no result: $(tail -n 3 "$TMP/bt.out")"
	counts+=("$(awk '$1=="@n:"{print $2; f = 1} END {if (!f) print 0}' "$TMP/bt.out")")
done
assert_eq "bpftrace: llama_decode calls in the mapped library" 31 "${counts[0]}"
assert_eq "bpftrace: in a copy nobody maps" 0 "${counts[1]}"

# ---- top, by command ----
(cd "$LLAMA" && timeout 120 "$SPANTRACE" top -b -d 5 -- "${GEN[@]}") >"$TMP/top.out" 2>"$TMP/top.err" ||
	fail "top: $(tail -n 5 "$TMP/top.err")"
last=$(awk '/^spantrace top/{f=""} {f = f $0 "\n"} END{printf "%s", f}' "$TMP/top.out")
assert_eq "top: forward count" 31 "$(awk '$1=="-" && $2=="forward"{print $3}' <<<"$last")"
assert_eq "top: tokens" 31 "$(sed -n 's/.*tokens \([0-9]*\) .*/\1/p' <<<"$last" | head -n 1)"

# ---- top -p: attached to the running program before it generates ----
(cd "$LLAMA" && GENERATE_WAIT=$TMP/go exec "${GEN[@]}") >"$TMP/prog2.out" 2>"$TMP/prog2.err" &
NPID=$!
wait_for grep -q waiting "$TMP/prog2.err" || fail "the program did not get ready: $(cat "$TMP/prog2.err")"
"$SPANTRACE" top -b -d 5 -p $NPID >"$TMP/topp.out" 2>"$TMP/topp.err" &
TPID=$!
# Its first frame waits for the attach to every llama function found, and for an
# interval (5 s); under CI on a Zen 3 the default 10 s ran out first.
WAIT_S=60 wait_for grep -q 'spantrace top' "$TMP/topp.out" || fail "top -p: $(cat "$TMP/topp.err")"
touch "$TMP/go"
wait $NPID || fail "the program under top -p: $(tail -n 3 "$TMP/prog2.err")"
wait $TPID || fail "top -p: $(tail -n 3 "$TMP/topp.err")"
last=$(awk '/^spantrace top/{f=""} {f = f $0 "\n"} END{printf "%s", f}' "$TMP/topp.out")
assert_eq "top -p: forward count" 31 "$(awk '$1=="-" && $2=="forward"{print $3}' <<<"$last")"
assert_eq "top -p: tokens" 31 "$(sed -n 's/.*tokens \([0-9]*\) .*/\1/p' <<<"$last" | head -n 1)"

# ---- the daemon, on the library: every process that maps it (the counts
# are our program's pid's: other programs on the machine may map it too) ----
"$SPANTRACE" daemon --binary "$LIB" --listen 127.0.0.1:0 --interval 0.2 >"$TMP/daemon.log" 2>&1 &
DPID=$!
wait_for grep -q 'metrics at http' "$TMP/daemon.log" || fail "daemon: $(cat "$TMP/daemon.log")"
DPORT=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")
(cd "$LLAMA" && exec "${GEN[@]}") >/dev/null 2>&1 &
NPID=$!
wait $NPID || fail "the program under the daemon"
P="pid=\"$NPID\""
# the exit's last spans reach /metrics at the daemon's next interval
all_forwards() { metrics >"$TMP/m.txt" && [ "$(msum "$TMP/m.txt" spantrace_span_duration_seconds_count 'span=\"forward\"' "$P")" = 31 ]; }
wait_for all_forwards || true   # the assertions below say what is missing
stop_daemon
grep -q 'engine="llamacpp"' "$TMP/m.txt" || fail "no engine label: $(grep forward "$TMP/m.txt" | head -n 2)"
assert_eq "daemon: forward count" 31 "$(msum "$TMP/m.txt" spantrace_span_duration_seconds_count 'span=\"forward\"' "$P")"
assert_eq "daemon: generated tokens" 31 "$(msum "$TMP/m.txt" spantrace_generation_tokens_total "$P")"
assert_eq "daemon: prompt tokens" 8 "$(msum "$TMP/m.txt" spantrace_prompt_tokens_total "$P")"
assert_eq "daemon: kv_cache peak" $KV_BYTES "$(msum "$TMP/m.txt" spantrace_pool_peak_bytes 'pool=\"kv_cache\"' "$P")"

# ---- the daemon's host mode: finds the program by its libllama ----
"$SPANTRACE" daemon --all-engines --listen 127.0.0.1:0 --interval 0.2 >"$TMP/daemon.log" 2>&1 &
DPID=$!
wait_for grep -q 'metrics at http' "$TMP/daemon.log" || fail "daemon --all-engines: $(cat "$TMP/daemon.log")"
DPORT=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")
rm -f "$TMP/go"
(cd "$LLAMA" && GENERATE_WAIT=$TMP/go exec "${GEN[@]}") >/dev/null 2>&1 &
NPID=$!
wait_for grep -q "engine pid $NPID " "$TMP/daemon.log" || fail "host mode did not find pid $NPID: $(cat "$TMP/daemon.log")"
touch "$TMP/go"
wait $NPID || fail "the program under daemon --all-engines"
host_forwards() {
	metrics >"$TMP/mh.txt" &&
		[ "$(msum "$TMP/mh.txt" spantrace_span_duration_seconds_count 'span=\"forward\"' "pid=\\\"$NPID\\\"" 'engine=\"llamacpp\"')" = 31 ]
}
wait_for host_forwards || true   # the assertion below says what is missing
stop_daemon
got=$(msum "$TMP/mh.txt" spantrace_span_duration_seconds_count 'span=\"forward\"' "pid=\\\"$NPID\\\"" 'engine=\"llamacpp\"')
[ "$got" = 31 ] || { grep -v '^#' "$TMP/mh.txt" | grep forward >&2; cat "$TMP/daemon.log" >&2; }
assert_eq "host mode: forward count (engine label llamacpp)" 31 "$got"
