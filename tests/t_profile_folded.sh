#!/usr/bin/env bash
# t_profile_folded.sh - span-attributed CPU samples land in the right span.
# A generated model with a huge vocabulary makes the classifier matmul (the
# `logits` span) dominate a single-threaded CPU run; `spantrace profile -F 999`
# must give `logits` the largest share of the generation's samples in folded.txt
# (the load's pack span aside), with the
# engine's own matmul function (libinfer.so) in its stacks, a sample count
# that fits -F and the engine's CPU time (not a fixed floor: CPU speed
# varies), every sample accounted for (delivered + dropped == fired), and a
# non-empty top table.
# fast
source "$(dirname "$0")/lib.sh"
need_bpf
[ -x "$SPANTRACE" ] && [ -x "$MKMODEL" ] || fail "no $SPANTRACE or $MKMODEL (build first)"

"$MKMODEL" "$TMP/big.bin" --shape 64,172,2,8,4,120000,64 --seed 1 >/dev/null || fail "mkmodel"
HZ=999
# 64 tokens (the whole context): profile reads a target's maps when it
# drains its first samples, so the run must outlive that; at 24 tokens the
# faster CPU backend exited first and every user frame stayed [unknown].
ENGINE=("$INFER" "$TMP/big.bin" -n 64 -b cpu -s 1 -t 0 --ids)
OMP_NUM_THREADS=1 "$SPANTRACE" profile -q -F $HZ -o "$TMP/prof" -- "${ENGINE[@]}" >/dev/null 2>"$TMP/err" \
	|| { cat "$TMP/err"; fail "spantrace profile failed"; }

F=$TMP/prof/folded.txt
S=$TMP/prof/summary.json
for f in folded.txt top_functions.txt counters.json summary.json spans.jsonl trace.json; do
	[ -s "$TMP/prof/$f" ] || fail "profile did not write $f"
done
# every line is "root;frames... COUNT"
bad=$(awk '$NF !~ /^[0-9]+$/' "$F" | wc -l)
assert_eq "malformed folded lines" 0 "$bad"
per_span=$(awk '{n=$NF; $NF=""; split($0, a, ";"); sub(/ +$/, "", a[1]); s[a[1]] += n} END {for (k in s) print s[k], k}' "$F" | sort -rn)
echo "$per_span" | head -5
# the generation's span with the most samples: the load's own tree
# (model_load > pack: packing the 120,000-row classifier is as long as the
# run's logits, and wins or loses by the machine's load) and its unload
# are spans too, but not the generation's; "[no span]" is the rest of the
# start (mapping, slow under ASan)
top=$(echo "$per_span" | grep -v -e '\[no span\]' -e ' model_load$' -e ' pack$' -e ' unload$' | head -1 | awk '{print $2}')
total=$(awk '{t += $NF} END {print t}' "$F")
logits=$(echo "$per_span" | awk '$2 == "logits" {print $1}')
assert_eq "span with the most samples (the load's aside)" logits "$top"
assert_pos "samples in the load's packing (a span of its own)" "$(echo "$per_span" | awk '$2 == "pack" { print $1 + 0 }')"
# Floor from this machine's speed: the same deterministic run untraced takes
# CPU_S of CPU; -F HZ gives ~HZ samples per on-CPU second. A quarter of that
# leaves slack for VM steal and run-to-run noise, and is still far above
# what a wrong rate (e.g. the default 99 Hz) gives.
cpu_s=$( { TIMEFORMAT='%3U %3S'; time OMP_NUM_THREADS=1 "${ENGINE[@]}" >/dev/null 2>&1; } 2>&1 | awk '{print $1 + $2}')
floor=$(awk -v s="$cpu_s" -v hz=$HZ 'BEGIN{printf "%d", s * hz / 4}')
echo "samples: $total; untraced engine CPU ${cpu_s}s -> floor $floor"
assert_le "samples for the engine's CPU time at -F $HZ" "$floor" "$total"
# one engine thread: at most ~HZ samples per second of session wall time
assert_le "samples within -F x wall" "$total" "$(jq --argjson hz $HZ '.wall_s * $hz * 2 + 10 | floor' "$S")"
# Under SANITIZE=1 a sample in ASan's runtime (its memcpy checks: no frame
# pointers there) loses the frame that called it, so those stacks cannot
# show the matmul either way: they are left out of the count (about half
# of them there).
walkable=$(grep '^logits;' "$F" | grep -v -e __asan -e __sanitizer | awk '{t += $NF} END {print t + 0}')
matmul=$(grep '^logits;' "$F" | grep -v -e __asan -e __sanitizer | grep matmul | awk '{t += $NF} END {print t + 0}')
[ "$walkable" -gt 0 ] || fail "no logits stack outside the sanitizer's runtime"
assert_le "logits samples in a matmul frame (of $walkable walkable, $logits in all)" "$(( walkable / 2 ))" "$matmul"
assert_eq "samples in summary = folded total" "$total" "$(jq .samples.total "$S")"
assert_eq "sample loss balances" true "$(jq '.samples.fired == .samples.total + .samples.dropped' "$S")"
assert_eq "all events balance" true "$(jq .loss.balanced "$S")"
grep -q '^span logits: ' "$TMP/prof/top_functions.txt" || fail "no logits table in top_functions.txt"
grep -A3 '^span logits: ' "$TMP/prof/top_functions.txt" | grep -q matmul || fail "matmul is not a top function of logits"
ok "logits' top function is matmul"
