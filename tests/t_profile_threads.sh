#!/usr/bin/env bash
# t_profile_threads.sh - a thread-pool run of our engine charges its samples
# to spans: `infer -b cpu --threads 2` (OpenMP workers, which fire no probes
# and take their process's span), profiled at -F 999 from its exec. The load
# is a span tree (model_load > pack), so packing the weights is charged;
# the exit's unmapping is unload. Asserted: >= 0.9 of all samples under a
# span, >= 0.95 of those in compute frames (matmul, the engine's OpenMP
# regions, weight packing), `[pool idle]` folded = summary's pool_idle, and
# no pool wait counted as [no span]. Then llama.cpp's own pool: llama-server
# -t 2 (ggml's threadpool) profiled by pid under streaming load: >= 0.95 of
# the samples in ggml's compute frames under a span, and every lost stack
# counted in the summary (stack_errors, no_user_stack), never silent.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_bpf
need_models
[ -x "$SPANTRACE" ] || fail "no $SPANTRACE (build first)"

ENGINE=("$INFER" "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --threads 2 -n 256 -t 0 -i "Once upon a time")
"$SPANTRACE" profile -q -F 999 -o "$TMP/prof" -- "${ENGINE[@]}" >/dev/null 2>"$TMP/err" \
	|| { cat "$TMP/err"; fail "spantrace profile failed"; }
F=$TMP/prof/folded.txt
S=$TMP/prof/summary.json
[ -s "$F" ] || fail "no folded.txt"
# root COUNT per line; compute: a frame of a matmul, an OpenMP region or the packing
read -r total under compute compute_under idle nospan_pool < <(awk '
	{ n = $NF; root = $1; sub(/;.*/, "", root); t += n
	  named = root != "[no" && root != "[pool"
	  if (named) u += n
	  if ($0 ~ /matmul|_omp_fn|pack_matrix/) { c += n; if (named) cu += n }
	  if (root == "[pool") i += n
	  if (root == "[no" && $0 ~ /libgomp/ && $0 !~ /_omp_fn/) np += n }
	END { print t + 0, u + 0, c + 0, cu + 0, i + 0, np + 0 }' "$F")
echo "samples $total, under a span $under; compute $compute, under a span $compute_under; pool idle $idle"
grep -E '^\[(no span|pool idle)\]' "$F" | cut -c1-160
assert_ge "samples (a 2-thread run at -F 999)" "$total" 200
assert_ge "samples under a span x100 / all" "$((under * 100 / total))" 90
assert_ge "compute samples" "$compute" 100
assert_ge "compute samples under a span x100 / compute" "$((compute_under * 100 / compute))" 95
assert_pos "samples in pack (the load's weight packing)" \
	"$(awk '$1 ~ /^pack;/ { t += $NF } END { print t + 0 }' "$F")"
assert_eq "[pool idle] folded = summary pool_idle" "$idle" "$(jq .samples.pool_idle "$S")"
assert_eq "pool waits left as [no span]" 0 "$nospan_pool"
assert_eq "samples in summary = folded total" "$total" "$(jq .samples.total "$S")"
ok "thread pool: $under of $total samples under a span, $compute_under of $compute compute"

# ---- llama-server -t 2 ----
need_node
server=$("$ROOT/tools/build_llama_server.sh" --check) || fail "no llama-server fixture (make llama-server)"
"$MKMODEL" "$TMP/m.gguf" --gguf q8_0 --from "$DEMO_MODEL" --vocab "$DEMO_TOK" >/dev/null || fail "mkmodel gguf"
lport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$server" -m "$TMP/m.gguf" -c 2048 -np 4 -t 2 --host 127.0.0.1 --port "$lport" >"$TMP/llama.log" 2>&1 &
lpid=$!
at_exit 'kill $lpid 2>/dev/null'
BASE="http://127.0.0.1:$lport"
WAIT_S=60 wait_for curl -sf -o /dev/null "$BASE/health" || fail "llama-server did not start: $(tail -n 3 "$TMP/llama.log")"
"$SPANTRACE" profile -q -F 999 -p "$lpid" --duration 6 -o "$TMP/lprof" 2>"$TMP/lerr" &
prof=$!
stream_spec 4 200 10 >"$TMP/spec.json"
# load for as long as the profile runs (what comes before its attach is not sampled)
while kill -0 "$prof" 2>/dev/null; do client "$TMP/spec.json" "$TMP/client.jsonl"; done
wait "$prof" || fail "profile -p llama-server: $(cat "$TMP/lerr")"
F=$TMP/lprof/folded.txt
S=$TMP/lprof/summary.json
read -r total compute compute_under < <(awk '
	{ n = $NF; root = $1; sub(/;.*/, "", root); t += n
	  if ($0 ~ /ggml_vec_dot|ggml_compute_forward|ggml_graph_compute/) { c += n; if (root != "[no" && root != "[pool") cu += n } }
	END { print t + 0, c + 0, cu + 0 }' "$F")
echo "llama-server -t 2: samples $total; ggml compute $compute, under a span $compute_under"
assert_ge "llama-server: ggml compute samples" "$compute" 100
assert_ge "llama-server: compute samples under a span x100 / compute" "$((compute_under * 100 / compute))" 95
assert_eq "llama-server: samples in summary = folded total" "$total" "$(jq .samples.total "$S")"
assert_eq "llama-server: samples fired = total + dropped" "$(jq .samples.fired "$S")" \
	"$(jq '.samples.total + .samples.dropped' "$S")"
jq -e '.samples | has("stack_errors") and has("no_user_stack")' "$S" >/dev/null ||
	fail "lost stacks not counted in the summary: $(jq -c .samples "$S")"
read -r n nouser <<<"$(sed -n 's/^# \([0-9]*\) samples; \([0-9]*\) without a user stack.*/\1 \2/p' "$TMP/lprof/top_functions.txt")"
assert_eq "llama-server: top_functions.txt's samples = the summary's" "$(jq .samples.total "$S")" "$n"
assert_eq "llama-server: top_functions.txt's stacks lost = the summary's" "$(jq .samples.no_user_stack "$S")" "$nouser"
ok "llama-server: lost stacks counted (stack_errors $(jq .samples.stack_errors "$S"), no user stack $(jq .samples.no_user_stack "$S"))"
