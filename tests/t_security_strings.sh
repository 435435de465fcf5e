#!/usr/bin/env bash
# t_security_strings.sh - strings that come from the target (its path, its
# library's path, its command line) are escaped and bounded: the engine is
# copied into a directory whose name holds a quote, a backslash, a newline
# and a tab, under an executable name with a quote and a newline, and into a
# ~3000-byte-deep path. Traced with -- CMD, --binary and -p PID, every JSONL
# line stays valid JSON, the session line decodes back to the exact paths,
# and the counts are right. The daemon's Prometheus labels carrying the
# path pass `promtool check metrics`.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
need_bpf
need_models
need_binaries
need_cmd promtool prometheus
need_cmd curl curl

# The engine finds libinfer.so through $ORIGIN, so a copy of the two runs anywhere.
weird_dir=$TMP/$(printf 'we"ird\\\n\tdir')
exe_name=$(printf 'i"n\nfer')
mkdir -p "$weird_dir"
cp "$INFER" "$weird_dir/$exe_name"
cp "$LIBINFER" "$weird_dir/libinfer.so"
WEXE=$weird_dir/$exe_name
long_dir=$TMP
while [ ${#long_dir} -lt 3000 ]; do long_dir=$long_dir/$(printf 'x%.0s' $(seq 200)); done
mkdir -p "$long_dir"
cp "$INFER" "$long_dir/infer"
cp "$LIBINFER" "$long_dir/libinfer.so"

# session_field FILE FIELD: the decoded string (newlines kept) of the first line
session_field() { /usr/bin/python3 -c 'import json, sys; v = json.loads(open(sys.argv[1]).readline()); f = v; exec("for k in sys.argv[2].split(\".\"): f = f[int(k)] if k.isdigit() else f[k]"); sys.stdout.write(f)' "$1" "$2"; }
same() { # NAME EXPECTED ACTUAL (strings may hold newlines)
	[ "$2" = "$3" ] || fail "$1: expected $(printf %q "$2"), got $(printf %q "$3")"
	ok "$1 decodes to $(printf %q "$3" | cut -c1-80)"
}

# 1. -- CMD, from the weird and from the long directory
for exe in "$WEXE" "$long_dir/infer"; do
	"$SPANTRACE" record -q -o "$TMP/c.jsonl" --summary "$TMP/c.json" -- \
		"$exe" "$MODELS/stories260K.bin" -b cpu -n 6 -t 0 --ids >/dev/null 2>"$TMP/err" ||
		fail "record -- $(printf %q "$exe") failed: $(tail -n 3 "$TMP/err")"
	ok "-- CMD (${#exe}-byte path): $(jsonl_check "$TMP/c.jsonl") valid JSONL lines"
	same "-- CMD: session .command[0]" "$exe" "$(session_field "$TMP/c.jsonl" command.0)"
	same "-- CMD: session .binary" "$(dirname "$exe")/libinfer.so" "$(session_field "$TMP/c.jsonl" binary)"
	assert_eq "-- CMD: tokens" 6 "$(jq .tokens_generated "$TMP/c.json")"
done

# 2. --binary on the weird executable
"$SPANTRACE" record -q --binary "$WEXE" -o "$TMP/b.jsonl" --summary "$TMP/b.json" 2>"$TMP/err" &
rec=$!
wait_attached "$TMP/b.jsonl" "$TMP/err"
"$WEXE" "$MODELS/stories260K.bin" -b cpu -n 5 -t 0 --ids >/dev/null 2>&1 || fail "the copied engine failed"
kill -INT $rec
wait $rec || fail "record --binary exited $?: $(cat "$TMP/err")"
ok "--binary: $(jsonl_check "$TMP/b.jsonl") valid JSONL lines"
same "--binary: session .binary" "$weird_dir/libinfer.so" "$(session_field "$TMP/b.jsonl" binary)"
assert_eq "--binary: tokens" 5 "$(jq .tokens_generated "$TMP/b.json")"

# 3. the daemon: the path becomes a Prometheus label value
"$SPANTRACE" daemon --binary "$WEXE" --listen 127.0.0.1:0 --interval 0.2 >"$TMP/daemon.log" 2>&1 &
dpid=$!
wait_for grep -q 'metrics at http' "$TMP/daemon.log" || fail "daemon did not start: $(cat "$TMP/daemon.log")"
port=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")
"$WEXE" "$MODELS/stories260K.bin" -b cpu -n 5 -t 0 --ids >/dev/null 2>&1 || fail "the copied engine failed"
labelled() { curl -sf "http://127.0.0.1:$port/metrics" >"$TMP/m.txt" && grep -q 'binary="' "$TMP/m.txt"; }
wait_for labelled || true   # the checks below say what is missing
kill -TERM $dpid
wait $dpid || fail "daemon exited $?"
grep -q 'binary="' "$TMP/m.txt" || fail "no binary label in the metrics"
out=$(promtool check metrics <"$TMP/m.txt" 2>&1) || fail "promtool rejects the metrics: $out"
# the label decodes back to the path (Prometheus escapes \\, \" and \n)
/usr/bin/python3 - "$TMP/m.txt" "$WEXE" <<'PY' || fail "no binary label decodes to the weird path"
import re, sys
text, want = open(sys.argv[1]).read(), sys.argv[2]
unesc = lambda v: re.sub(r'\\(.)', lambda m: {'n': '\n'}.get(m.group(1), m.group(1)), v)
vals = {unesc(v) for v in re.findall(r'binary="((?:[^"\\]|\\.)*)"', text)}
sys.exit(0 if any(v == want or v.startswith(want.rsplit('/', 1)[0] + '/') for v in vals) else 1)
PY
ok "daemon: $(grep -c 'binary="' "$TMP/m.txt") samples with the path as a label; promtool accepts them"

# 4. -p PID of a serving engine started from the weird directory
ensure_demo_model
mkfifo "$TMP/in"
OMP_NUM_THREADS=1 "$WEXE" "$DEMO_MODEL" -z "$DEMO_TOK" --serve -n 6 -b cpu -t 0 <"$TMP/in" >"$TMP/out" 2>/dev/null &
SRV=$!
exec 3>"$TMP/in"
ask
"$SPANTRACE" record -q -p "$SRV" -o "$TMP/p.jsonl" --summary "$TMP/p.json" 2>"$TMP/err" &
rec=$!
attached_or_gone() { [ -s "$TMP/p.jsonl" ] || ! kill -0 $rec 2>/dev/null; }
wait_for attached_or_gone
[ -s "$TMP/p.jsonl" ] || fail "-p: cannot attach to a process whose library path holds a newline: $(cat "$TMP/err")"
ask
ask
kill -INT $rec
wait $rec || fail "record -p exited $?: $(cat "$TMP/err")"
ok "-p: $(jsonl_check "$TMP/p.jsonl") valid JSONL lines"
same "-p: session .binary" "$weird_dir/libinfer.so" "$(session_field "$TMP/p.jsonl" binary)"
assert_eq "-p: requests" 2 "$(jq .requests "$TMP/p.json")"
stop_server
