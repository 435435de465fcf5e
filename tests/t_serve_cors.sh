#!/usr/bin/env bash
# t_serve_cors.sh - a browser front end can call `infer --http` as it calls
# llama-server (issue 58, part 5), llama-server as the witness: a preflight
# (OPTIONS, with Origin and Access-Control-Request-*) gets 200 from both,
# each allowing POST and the headers asked for, and naming the origin; a
# POST, a GET and an error answer name it too. With --cors-origin ORIGIN
# ours names that origin, whoever asks.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_cmd curl curl
need_cmd python3 python3
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"
demo_gguf q8_0 "$TMP/m.gguf"
llama_on "$TMP/m.gguf" -c 256 -np 1 -t 1
start_engine "$TMP/m.gguf" -b cpu
ORIGIN=http://app.example:5173

# header FILE NAME: the value of header NAME in curl's dump FILE, lower-cased
header() { tr -d '\r' <"$1" | sed -n "s/^$2: *//Ip" | head -n 1 | tr 'A-Z' 'a-z'; }
status() { tr -d '\r' <"$1" | sed -n '1s/^HTTP\/[0-9.]* \([0-9]*\).*/\1/p'; }

for who in ours llama; do
	base=$BASE
	[ $who = llama ] && base=$LBASE
	curl -s -D "$TMP/pre.$who" -o /dev/null -X OPTIONS "$base/v1/chat/completions" -H "Origin: $ORIGIN" \
		-H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: content-type, authorization'
	assert_eq "$who: preflight status" 200 "$(status "$TMP/pre.$who")"
	assert_eq "$who: preflight names the origin" "$ORIGIN" "$(header "$TMP/pre.$who" Access-Control-Allow-Origin)"
	[[ $(header "$TMP/pre.$who" Access-Control-Allow-Methods) == *post* ]] || fail "$who: preflight does not allow POST"
	allowed=$(header "$TMP/pre.$who" Access-Control-Allow-Headers)
	[[ $allowed == '*' || ($allowed == *content-type* && $allowed == *authorization*) ]] ||
		fail "$who: preflight does not allow the headers asked for: '$allowed'"
	ok "$who: preflight allows POST and headers '$allowed'"
	curl -s -D "$TMP/post.$who" -o /dev/null "$base/v1/completions" -H "Origin: $ORIGIN" \
		-H 'Content-Type: application/json' -d '{"prompt":"Once","max_tokens":2}'
	curl -s -D "$TMP/get.$who" -o /dev/null "$base/v1/models" -H "Origin: $ORIGIN"
	curl -s -D "$TMP/err.$who" -o /dev/null "$base/v1/completions" -H "Origin: $ORIGIN" -d '{"prompt":'
	for k in post get err; do
		assert_eq "$who: $k answer names the origin" "$ORIGIN" "$(header "$TMP/$k.$who" Access-Control-Allow-Origin)"
	done
	[ $who = llama ] || assert_eq "$who: the bad body is a 400" 400 "$(status "$TMP/err.$who")" # llama-server's is a 500
done
kill "$lpid"
wait "$lpid" 2>/dev/null
stop_engine

start_engine "$TMP/m.gguf" -b cpu --cors-origin https://only.example
curl -s -D "$TMP/one" -o /dev/null -X OPTIONS "$BASE/v1/completions" -H "Origin: $ORIGIN"
assert_eq "--cors-origin: the preflight names that origin, not the asker's" https://only.example \
	"$(header "$TMP/one" Access-Control-Allow-Origin)"
stop_engine
"$INFER" "$TMP/m.gguf" --http 127.0.0.1:0 --cors-origin '' >/dev/null 2>"$TMP/bad.err" && fail "--cors-origin '' was taken"
grep -q 'cors-origin' "$TMP/bad.err" || fail "--cors-origin '': the error does not name it: $(cat "$TMP/bad.err")"
ok "--cors-origin '': refused, naming the option"
