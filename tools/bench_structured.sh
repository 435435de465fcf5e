#!/usr/bin/env bash
# bench_structured.sh - what a constrained token costs (issue 58): the HTTP
# engine's time for a reply under a JSON schema over the time for as many
# free tokens of the same request, same seed.
#
#   tools/bench_structured.sh       REPEAT=5 BUILD=build
#
# Per round, three seeds at temperature 1 and one greedy request: the
# constrained reply (response_format json_schema) and a free one asked for
# exactly as many tokens (BOS and EOS biased away, so it runs them all),
# in turn first and second from round to round. The client's wall time per
# request (curl) is the figure; the ratio is the median of the pairs'
# constrained / free. Target: under 2.
source "$(dirname "$0")/bench_lib.sh"
BENCH_NAME=bench_structured
need_built "$INFER"
[ -r "$DEMO_MODEL" ] || die "no $DEMO_MODEL (make models)"
command -v curl >/dev/null && command -v jq >/dev/null || skipped "no curl or jq"
"$INFER" "$DEMO_MODEL" -z "$BUILD/models/demo_tokenizer.bin" -b cpu --http 127.0.0.1:0 2>"$TMP/engine.err" &
engine=$!
bench_cleanup_hook() { kill "$engine" 2>/dev/null; }
wait_until 30 grep -q 'listening on' "$TMP/engine.err" || die "engine did not start: $(cat "$TMP/engine.err")"
BASE=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$TMP/engine.err")
SCHEMA='{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},"color":{"enum":["red","green","blue"]},"ok":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string","maxLength":6},"minItems":1,"maxItems":3}},"required":["name","age","color","ok"]}'

# post BODY: "seconds tokens" of one completion
post() {
	local t
	t=$(curl -s -o "$TMP/out.json" -w '%{time_total}' "$BASE/v1/completions" -d "$1") || return 1
	echo "$t $(jq -r .usage.completion_tokens "$TMP/out.json")"
}
: >"$TMP/pairs"
for ((round = 1; round <= REPEAT; round++)); do
	for seed in 1 2 3 0; do
		t=1 s=",\"seed\":$seed"
		[ $seed = 0 ] && t=0 s=
		con="{\"prompt\":\"Once upon a time\",\"max_tokens\":300,\"temperature\":$t$s,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"schema\":$SCHEMA}}}"
		if ((round % 2)); then
			read -r ct n < <(post "$con")
			read -r ft fn < <(post "{\"prompt\":\"Once upon a time\",\"max_tokens\":$n,\"temperature\":$t$s,\"logit_bias\":{\"1\":-100,\"2\":-100}}")
		else
			# the free one first: its length is the constrained one's from round 1
			n=$(awk -v s=$seed '$1 == s { print $2; exit }' "$TMP/lengths")
			read -r ft fn < <(post "{\"prompt\":\"Once upon a time\",\"max_tokens\":$n,\"temperature\":$t$s,\"logit_bias\":{\"1\":-100,\"2\":-100}}")
			read -r ct n < <(post "$con")
		fi
		[ "$round" = 1 ] && echo "$seed $n" >>"$TMP/lengths"
		[ "$fn" = "$n" ] || die "the free reply ran $fn tokens, the constrained $n"
		echo "round $round seed $seed: constrained $n tokens in $ct s, free in $ft s"
		awk -v a="$ct" -v b="$ft" 'BEGIN { printf "%.4f\n", a / b }' >>"$TMP/pairs"
	done
done
echo "constrained / free, per pair: $(tr '\n' ' ' <"$TMP/pairs")"
ratio constrained_over_free_token "$(median <"$TMP/pairs")" "<2"
