#!/usr/bin/env bash
# fast
# Greedy decoding of the real stories260K checkpoint on the CPU backend:
# deterministic, in-vocabulary, and equal to llama2.c run.c's ids (checked
# against an independent float64 numpy forward pass when written).
source "$(dirname "$0")/lib.sh"
need_models
[ -x "$INFER" ] || fail "no $INFER (build first)"

want="461 461 401 401 401 461 378 455 473 456 435 299 362 409 283 264 283 452 288 13 431 431 431 431 431 431 431 431 431 431 431 431 431 293 430 417 363 416 315 342 418 424 400 442 402 303 266 299 374 466 396 303 271 362 390 469 306 469 423 314 347 305 356 333"

run() { "$INFER" "$MODELS/stories260K.bin" --ids -t 0 -n 64 -b cpu 2>"$TMP/err"; }
a=$(run) || fail "infer failed: $(cat "$TMP/err")"
b=$(run) || fail "second run failed"
assert_eq "two greedy runs agree" "$a" "$b"
assert_eq "generated ids (run.c generates one per position: 64)" 64 "$(wc -w <<<"$a")"
t1=$("$INFER" "$MODELS/stories260K.bin" --ids -t 0 -n 64 -b cpu --threads 1 2>/dev/null)
assert_eq "one thread gives the same ids" "$a" "$t1"
max=$(tr ' ' '\n' <<<"$a" | sort -n | tail -1)
assert_le "largest id < vocab 512" "$max" 511
assert_eq "ids equal run.c's greedy ids" "$want" "$a"
grep -q '^achieved tok/s: [0-9.]* (64 tokens' "$TMP/err" || fail "no tok/s line on stderr: $(cat "$TMP/err")"
ok "tok/s reported"

# -n 0 means seq_len; a short -n stops early; a sampled run is seed-determined
c=$("$INFER" "$MODELS/stories260K.bin" --ids -t 0 -n 10 -b cpu 2>/dev/null)
assert_eq "-n 10 gives the first 10 ids" "$(cut -d' ' -f1-10 <<<"$want")" "$c"
s1=$("$INFER" "$MODELS/stories260K.bin" --ids -t 1.0 -p 0.9 -s 7 -n 40 -b cpu 2>/dev/null)
s2=$("$INFER" "$MODELS/stories260K.bin" --ids -t 1.0 -p 0.9 -s 7 -n 40 -b cpu 2>/dev/null)
assert_eq "same seed, same sample" "$s1" "$s2"
[ "$s1" != "$a" ] || fail "top-p sampling gave the greedy ids"
ok "sampling differs from greedy"
