#!/usr/bin/env bash
# fast
# t_top_batch.sh - `spantrace top -b` over a started engine: a frame every
# interval whose counts grow while it runs, a final frame when the command
# exits whose forward/layer/attention/token/request counts equal the engine's
# own --stats, the command's output kept out of the frames (--cmd-output);
# -n on a running server (-p) prints exactly N frames and leaves it running;
# a closed output pipe stops top with an error and the command with it.
source "$(dirname "$0")/lib.sh"
need_bpf
for b in "$INFER" "$SPANTRACE" "$MKMODEL"; do [ -x "$b" ] || fail "no $b (build first)"; done
need_cmd jq jq
if [ ! -r "$DEMO_MODEL" ]; then
	mkdir -p "$(dirname "$DEMO_MODEL")"
	"$MKMODEL" "$DEMO_MODEL" --shape stories15M --seed 1 --tokenizer "$DEMO_TOK" >/dev/null ||
		fail "cannot make $DEMO_MODEL"
fi
backend=cpu
clinfo -l 2>/dev/null | grep -q Device && backend=opencl

# count_of FRAME_FILE ROW: COUNT of the first row with that name (tree
# markers "- "/"+ " ignored), 0 when absent
count_of() {
	awk -v want="$2" '{ line = $0; sub(/^ *[-+]? */, "", line)
		if (index(line, want " ") == 1) { rest = substr(line, length(want) + 1)
			split(rest, f, " "); print f[1]; found = 1; exit } }
		END { if (!found) print 0 }' "$1"
}
# header_field FRAME_FILE WORD: the number after WORD in the header
header_field() { grep -m1 -o "$2 [0-9]*" "$1" | awk '{print $2}'; }
# split_frames FILE: frame.1, frame.2, ... in $TMP (frames start with "spantrace top")
split_frames() {
	rm -f "$TMP"/frame.*
	awk -v dir="$TMP" '/^spantrace top/ { n++ } n { print > (dir "/frame." n) }' "$1"
	ls "$TMP"/frame.* 2>/dev/null | wc -l
}

# done_frame FILE: the last complete frame of a FILE top is still writing
# (one another frame follows; the newest may be half-written) into $TMP/done
done_frame() {
	awk '/^spantrace top/ { if (n++) last = cur; cur = "" } { cur = cur $0 "\n" }
		END { printf "%s", last }' "$1" >"$TMP/done"
}
# done_forward_above FILE N: that frame's forward count is > N
done_forward_above() { done_frame "$1"; [ "$(count_of "$TMP/done" forward)" -gt "$2" ]; }

# ---- a command: 3 requests through --serve from a fifo we feed, a frame
# every 0.5 s. The next request goes only once a frame shows the last one's
# progress, so running frames show growth at any engine speed. ----
mkfifo "$TMP/cmd.in"
exec 3<>"$TMP/cmd.in"
"$SPANTRACE" top -b -d 0.5 -w 100 --cmd-output "$TMP/cmd.out" -- \
	"$INFER" "$DEMO_MODEL" -z "$DEMO_TOK" -b $backend --serve -n 160 -t 0 --stats "$TMP/stats.json" \
	<"$TMP/cmd.in" >"$TMP/frames" 2>"$TMP/top.err" 3>&- &
top=$!
echo "once upon a time" >&3
wait_long done_forward_above "$TMP/frames" 0 || fail "no frame with forward passes: $(cat "$TMP/top.err")"
c1=$(count_of "$TMP/done" forward)
echo "the little dog" >&3
wait_long done_forward_above "$TMP/frames" "$c1" || fail "no frame with more than $c1 forward passes"
echo "a big red ball" >&3
exec 3>&- # EOF: the engine answers the last request and exits
wait $top
rc=$?
[ $rc = 0 ] || fail "top exited $rc: $(cat "$TMP/top.err")"
n=$(split_frames "$TMP/frames")
assert_le "frames printed (two running ones seen, then a final one)" 3 "$n"
grep -q "target exited with status 0" "$TMP/top.err" || fail "no exit status on stderr: $(cat "$TMP/top.err")"
grep -q '\[exited\]' "$TMP/frame.$n" || fail "final frame not marked [exited]"
assert_eq "the engine's completions went to --cmd-output" 3 "$(grep -vc '^achieved tok/s' "$TMP/cmd.out")"
assert_eq "no engine output among the frames" 0 "$(grep -c 'achieved tok/s' "$TMP/frames")"

# While it runs, counts only grow, and two consecutive frames show progress.
prev=0 grew=0
for i in $(seq 1 "$n"); do
	c=$(count_of "$TMP/frame.$i" forward)
	assert_le "forward count frame $((i - 1)) -> $i" "$prev" "$c"
	[ "$i" -lt "$n" ] && [ "$prev" -gt 0 ] && [ "$c" -gt "$prev" ] && grew=1
	prev=$c
done
[ $grew = 1 ] || fail "no two consecutive running frames with a growing forward count"
ok "forward count grows between consecutive intervals"

# The final frame agrees with the engine's own counts.
S=$TMP/stats.json F=$TMP/frame.$n
L=$(jq .model.n_layers "$S")
assert_eq "dropped" 0 "$(header_field "$F" dropped)"
assert_eq "forward = engine's forward spans" "$(jq .spans.forward.count "$S")" "$(count_of "$F" forward)"
assert_eq "layers = engine's layer spans" "$(jq .spans.layer.count "$S")" "$(count_of "$F" "layers ($L)")"
assert_eq "attention = engine's attention spans" "$(jq .spans.attention.count "$S")" "$(count_of "$F" attention)"
assert_eq "tokens = engine's tokens" "$(jq .tokens "$S")" "$(header_field "$F" tokens)"
assert_eq "requests = engine's requests" "$(jq .requests "$S")" "$(header_field "$F" requests)"
assert_eq "token rows = tokens" "$(jq .tokens "$S")" "$(count_of "$F" token)"
if [ $backend = opencl ]; then
	assert_eq "opencl kernels = engine's kernels" "$(jq .opencl.kernels "$S")" "$(count_of "$F" "opencl kernels")"
fi

# ---- -p on a running server: exactly -n frames, the server lives on ----
# --ids with empty lines: every request is BOS + 7 tokens = 8 forward passes
mkfifo "$TMP/in"
exec 3<>"$TMP/in"
# 3>&-: a writer inside the server itself would keep it from ever seeing EOF
"$INFER" "$DEMO_MODEL" -b cpu --ids --serve -n 8 -t 0 <"$TMP/in" >"$TMP/srv.out" 2>"$TMP/srv.err" 3>&- &
srv=$!
echo >&3
wait_long [ -s "$TMP/srv.out" ] || fail "server did not answer: $(cat "$TMP/srv.err")"
"$SPANTRACE" top -b -n 2 -d 0.5 -p $srv >"$TMP/pframes" 2>"$TMP/ptop.err" 3>&-
rc=$?
[ $rc = 0 ] || fail "top -p -n 2 exited $rc: $(cat "$TMP/ptop.err")"
assert_eq "frames with -n 2" 2 "$(split_frames "$TMP/pframes")"
assert_eq "forward passes of an idle server" 0 "$(count_of "$TMP/frame.2" forward)"
kill -0 $srv 2>/dev/null || fail "the server died under top -p -n 2"
# One request while attached (no -n: stopped by SIGTERM once a frame shows it)
"$SPANTRACE" top -b -d 0.5 -p $srv >"$TMP/cframes" 2>"$TMP/ctop.err" 3>&- &
top=$!
# the first frame is out once the probes are armed
wait_long grep -q '^spantrace top' "$TMP/cframes" || fail "no first frame: $(cat "$TMP/ctop.err")"
echo >&3
answered() { [ "$(wc -l <"$TMP/srv.out")" -ge "$1" ]; }
wait_long answered 2 || fail "no reply under top -p: $(cat "$TMP/srv.err")"
request_shown() {
	local r
	done_frame "$TMP/cframes"
	r=$(header_field "$TMP/done" requests)
	[ "$(count_of "$TMP/done" forward)" -ge 8 ] && [ "${r:-0}" -ge 1 ]
}
wait_long request_shown || fail "no frame shows the request: $(tail -n 40 "$TMP/cframes")"
kill -TERM $top
wait $top || fail "top -p exited $? on SIGTERM: $(cat "$TMP/ctop.err")"
n=$(split_frames "$TMP/cframes")
assert_eq "forward passes before the request" 0 "$(count_of "$TMP/frame.1" forward)"
grep -q "pid $srv " "$TMP/frame.$n" || fail "frame does not name pid $srv: $(head -1 "$TMP/frame.$n")"
assert_eq "forward passes of the one request" 8 "$(count_of "$TMP/frame.$n" forward)"
assert_eq "requests" 1 "$(header_field "$TMP/frame.$n" requests)"
kill -0 $srv 2>/dev/null || fail "the server died under top -p"
echo >&3
wait_long answered 3 || fail "the server stopped answering after top -p"
ok "server answers after top -p detached"
# The traced process exits (EOF on its input): top prints a last frame, exits 0.
"$SPANTRACE" top -b -d 0.5 -p $srv >"$TMP/eframes" 2>"$TMP/etop.err" 3>&- &
top=$!
wait_long grep -q '^spantrace top' "$TMP/eframes" || fail "no first frame: $(cat "$TMP/etop.err")"
exec 3>&-
wait $srv || fail "server exited $? at EOF"
wait $top || fail "top -p exited $? when its target exited: $(cat "$TMP/etop.err")"
n=$(split_frames "$TMP/eframes")
grep -q '\[exited\]' "$TMP/frame.$n" || fail "last frame of top -p not marked [exited]"
ok "top -p ends with its target ($n frames, the last one [exited])"

# SIGTERM in batch mode: one more, final frame, exit 0.
"$SPANTRACE" top -b -d 0.5 --binary "$INFER" >"$TMP/tframes" 2>"$TMP/ttop.err" &
top=$!
wait_long grep -q '^spantrace top' "$TMP/tframes" || fail "no first frame: $(cat "$TMP/ttop.err")"
kill -TERM $top
wait $top || fail "top -b exited $? on SIGTERM: $(cat "$TMP/ttop.err")"
n=$(split_frames "$TMP/tframes")
assert_le "frames after SIGTERM (a final one after the first)" 2 "$n"
grep -q 'waiting for events' "$TMP/frame.$n" || fail "final frame on SIGTERM: $(cat "$TMP/frame.$n")"

# ---- a closed pipe: top fails with a message, its command does not linger ----
# The command waits on a fifo nobody writes to: only top can end it.
marker=$TMP/epipe-stats.json
mkfifo "$TMP/pin"
exec 4<>"$TMP/pin"
"$SPANTRACE" top -b -d 0.2 --cmd-output /dev/null -- "$INFER" "$DEMO_MODEL" -b cpu --ids --serve -n 8 \
	--stats "$marker" <"$TMP/pin" 2>"$TMP/epipe.err" 4>&- | head -n 1 >/dev/null
rc=${PIPESTATUS[0]}
exec 4>&-
[ "$rc" != 0 ] || fail "top exited 0 writing to a closed pipe"
grep -q "cannot write the frame" "$TMP/epipe.err" || fail "no write error: $(cat "$TMP/epipe.err")"
ok "closed pipe: exit $rc, '$(grep -m1 'error:' "$TMP/epipe.err")'"
pgrep -f "$marker" >/dev/null && fail "the command outlived top"
ok "the command stopped with top ($(grep -o 'target [a-z ,A-Z0-9]*' "$TMP/epipe.err"))"
