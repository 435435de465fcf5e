#!/usr/bin/env bash
# t_profile_threads.sh - a thread-pool run of our engine charges its samples
# to spans: `infer -b cpu --threads 2` (OpenMP workers, which fire no probes
# and take their process's span), profiled at -F 999 from its exec. The load
# is a span tree (model_load > pack), so packing the weights is charged;
# the exit's unmapping is unload. Asserted: >= 0.9 of all samples under a
# span, >= 0.95 of those in compute frames (matmul, the engine's OpenMP
# regions, weight packing), `[pool idle]` folded = summary's pool_idle, and
# no pool wait counted as [no span].
source "$(dirname "$0")/lib.sh"
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
