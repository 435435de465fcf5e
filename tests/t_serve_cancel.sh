#!/usr/bin/env bash
# fast
# Cancelling: two streaming clients that close after a few chunks, and a
# non-streaming one that times out, are aborted before their 240 tokens;
# their KV blocks and every pool's live bytes return to their idle values,
# and the engine's counts say "abort" for exactly those three.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_node
need_cmd jq jq
need_cmd curl curl
[ -r "$DEMO_MODEL" ] && [ -r "$DEMO_TOK" ] || fail "no demo model (make models first)"

for b in cpu opencl; do
	[ $b = opencl ] && need_opencl
	start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b $b
	pools() { stat '.pools | map_values(.live_bytes)' | jq -c .; }
	idle=$(pools)
	# an empty map would equal an empty map after cancelling too
	jq -e 'length > 0 and all(.[]; type == "number")' <<<"$idle" >/dev/null || fail "$b: no pools in /stats: '$idle'"
	echo '{"requests":[{"prompt":"Once upon a time","max_tokens":8,"temperature":0}]}' >"$TMP/warm.json"
	client "$TMP/warm.json" "$TMP/warm"
	assert_eq "$b: live bytes after a finished request = idle" "$idle" "$(pools)"

	cat >"$TMP/cancel.json" <<'J'
{"concurrent": true, "requests": [
 {"prompt": "Once upon a time", "max_tokens": 240, "temperature": 0, "stream": true, "abort_after": 3},
 {"prompt": "The cat", "max_tokens": 240, "temperature": 0.9, "stream": true, "abort_after": 5},
 {"prompt": "A dog", "max_tokens": 20, "temperature": 0}
]}
J
	client "$TMP/cancel.json" "$TMP/cancel"
	assert_eq "$b: two clients went away" 2 "$(jq -s '[.[] | select(.aborted)] | length' "$TMP/cancel")"
	assert_eq "$b: the third finished" length "$(sed -n 3p "$TMP/cancel" | jq -r .finish_reason)"
	# a non-streaming client that gives up
	curl -s -m 0.1 "$BASE/v1/completions" -d '{"prompt":"Lily","max_tokens":240,"temperature":0}' >/dev/null
	wait_for stat_is .serving.finished.abort 3 || fail "$b: aborts counted $(stat .serving.finished.abort), want 3"
	ok "$b: three aborts counted"
	wait_for health_is kv_blocks_used 0 || fail "$b: KV blocks still held: $(health kv_blocks_used)"
	assert_eq "$b: nothing running or waiting" "0 0" "$(health running) $(health waiting)"
	assert_eq "$b: live bytes after cancelling = idle" "$idle" "$(pools)"
	# ([] | all is true: the count must be there too)
	aborted=$(stat '[.serving.per_request[] | select(.reason == "abort") | .generated_tokens]
		| "\(length) \(map(. < 240) | all)"')
	assert_eq "$b: aborted requests, all stopped before 240 tokens" "3 true" "$aborted"
	stop_engine
done
