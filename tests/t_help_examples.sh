#!/usr/bin/env bash
# fast
# t_help_examples.sh - every engine command line in the tracer's --help
# EXAMPLES is one the engine accepts: `-- build/infer ARGS` is run with the
# demo model and tokenizer in place of model.bin/tokenizer.bin and a short
# -n, and must exit 0 (a stale flag such as a removed -m fails it); one
# that ends in "..." is not a whole command line and is left out. No
# example is so long that argp wraps it.
source "$(dirname "$0")/lib.sh"
for b in "$INFER" "$SPANTRACE" "$MKMODEL"; do [ -x "$b" ] || fail "no $b (build first)"; done
if [ ! -r "$DEMO_MODEL" ]; then
	mkdir -p "$(dirname "$DEMO_MODEL")"
	"$MKMODEL" "$DEMO_MODEL" --shape stories15M --seed 1 --tokenizer "$DEMO_TOK" >/dev/null ||
		fail "cannot make $DEMO_MODEL"
fi

checked=0
for cmd in record top profile; do
	"$SPANTRACE" $cmd --help >"$TMP/help.$cmd" || fail "$cmd --help exited $?"
	# argp wraps a line longer than 79 columns onto a line at column 0.
	wrapped=$(awk 'prev ~ /^  spantrace / && /^[^ ]/ { print prev } { prev = $0 }' "$TMP/help.$cmd")
	[ -z "$wrapped" ] || fail "$cmd --help: an example wraps: $wrapped"
	grep '^  spantrace ' "$TMP/help.$cmd" >"$TMP/examples.$cmd"
	while read -r line; do
		case $line in *" -- build/infer "*) ;; *) continue ;; esac
		args=${line#*-- build/infer }
		case $args in *...*) continue ;; esac
		args=$(echo " $args " | sed -e "s| model.bin | $DEMO_MODEL |" -e "s| tokenizer.bin | $DEMO_TOK |" \
			-e 's| -n [0-9]* | -n 4 |')
		# shellcheck disable=SC2086  # the example's words
		"$INFER" $args -b cpu >"$TMP/out" 2>"$TMP/err" </dev/null ||
			fail "$cmd --help example: 'build/infer ${line#*-- build/infer }' fails: $(head -c 300 "$TMP/err")"
		checked=$((checked + 1))
	done <"$TMP/examples.$cmd"
done
assert_le "engine command lines checked in the EXAMPLES" 4 "$checked"
