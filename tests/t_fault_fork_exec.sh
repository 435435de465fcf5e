#!/usr/bin/env bash
# t_fault_fork_exec.sh - `record --binary` follows processes born after it
# attached, however they are born: a shell script starts the engine twice
# one after the other (fork + exec), once through `sh -c 'exec ...'` (the
# shell's own pid becomes the engine) and once from a forked subshell. Each
# engine process is traced under its own pid, and its counts equal that
# process's own --stats.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
need_bpf
need_models
need_binaries

cat >"$TMP/launch.sh" <<SH
#!/bin/sh
# each run writes its pid to \$dir/pid.N and its stats to \$dir/e.N.json
dir=\$1
"$INFER" "$MODELS/stories260K.bin" -b cpu -t 0 --ids -n 8 --stats "\$dir/e.1.json" >/dev/null & echo \$! >"\$dir/pid.1"; wait \$!
"$INFER" "$MODELS/stories260K.bin" -b cpu -t 0 --ids -n 12 --stats "\$dir/e.2.json" >/dev/null & echo \$! >"\$dir/pid.2"; wait \$!
sh -c 'echo \$\$ >"\$1/pid.3"; exec "\$2" "\$3" -b cpu -t 0 --ids -n 16 --stats "\$1/e.3.json"' sh "\$dir" "$INFER" "$MODELS/stories260K.bin" >/dev/null
# the subshell's own pid: the shell itself opens /proc/self (no fork)
( read -r self _ </proc/self/stat; echo \$self >"\$dir/pid.4"; exec "$INFER" "$MODELS/stories260K.bin" -b cpu -t 0 --ids -n 20 --stats "\$dir/e.4.json" >/dev/null )
SH
chmod +x "$TMP/launch.sh"

"$SPANTRACE" record -q --binary "$INFER" -o "$TMP/t.jsonl" --summary "$TMP/s.json" 2>"$TMP/rec.err" &
rec=$!
wait_attached "$TMP/t.jsonl" "$TMP/rec.err"
"$TMP/launch.sh" "$TMP" || fail "the launcher script failed"
kill -INT $rec
wait $rec || fail "record exited $?: $(cat "$TMP/rec.err")"
ok "$(jsonl_check "$TMP/t.jsonl") valid JSONL lines"

pids=()
for i in 1 2 3 4; do
	[ -s "$TMP/e.$i.json" ] || fail "run $i wrote no stats"
	pids+=("$(cat "$TMP/pid.$i")")
done
assert_eq "distinct engine pids" 4 "$(printf '%s\n' "${pids[@]}" | sort -u | wc -l)"
assert_eq "pids with spans in the JSONL" "$(printf '%s\n' "${pids[@]}" | sort -n | xargs)" \
	"$(jq -r 'select(.type == "span") | .pid' "$TMP/t.jsonl" | sort -un | xargs)"
for i in 1 2 3 4; do
	p=${pids[$((i - 1))]} e=$TMP/e.$i.json
	kinds=0
	for n in $(jq -r '.spans | to_entries[] | select(.value.count > 0) | .key' "$e"); do
		assert_eq "run $i (pid $p): span $n" "$(jq ".spans.$n.count" "$e")" \
			"$(jq -c "select(.type == \"span\" and .name == \"$n\" and .pid == $p)" "$TMP/t.jsonl" | wc -l)"
		kinds=$((kinds + 1))
	done
	assert_pos "run $i (pid $p): span kinds compared" "$kinds"
	assert_eq "run $i (pid $p): engine tokens (its -n)" $((4 + 4 * i)) "$(jq .tokens "$e")"
	assert_eq "run $i (pid $p): tokens" "$(jq .tokens "$e")" \
		"$(jq -c "select(.type == \"token\" and .pid == $p)" "$TMP/t.jsonl" | wc -l)"
done
assert_eq "dropped" 0 "$(jq .loss.dropped "$TMP/s.json")"
assert_eq "balanced" true "$(jq .loss.balanced "$TMP/s.json")"
