#!/usr/bin/env bash
# fast
# t_top_tmux.sh - the interactive `spantrace top` in a real 80x24 terminal
# (tmux): it starts an engine serving a stream of requests, the header shows
# a non-zero tok/s and the forward / layers / attention rows have counts;
# `e` on the layers row collapses and expands it, `l` splits it into
# "layer N" rows; `q` exits 0, the terminal is restored (no alternate screen,
# the table gone, the shell prompt back) and the engine is stopped. Then ^C
# and -n end the view the same way.
source "$(dirname "$0")/lib.sh"
need_bpf
need_cmd tmux tmux
for b in "$INFER" "$SPANTRACE" "$MKMODEL"; do [ -x "$b" ] || fail "no $b (build first)"; done
if [ ! -r "$DEMO_MODEL" ]; then
	mkdir -p "$(dirname "$DEMO_MODEL")"
	"$MKMODEL" "$DEMO_MODEL" --shape stories15M --seed 1 --tokenizer "$DEMO_TOK" >/dev/null ||
		fail "cannot make $DEMO_MODEL"
fi
backend=cpu
clinfo -l 2>/dev/null | grep -q Device && backend=opencl

sock=spantrace-test-$$
tm() { tmux -L "$sock" "$@"; }
trap 'tmux -L "$sock" kill-server 2>/dev/null; rm -rf "$TMP"; jobs -p | xargs -r kill 2>/dev/null' EXIT
screen() { tm capture-pane -p -t top; }
# row_count NAME: COUNT of the first screen row with that name, or empty
row_count() { screen | awk -v want="$1" '{ line = $0; sub(/^ *[-+]? */, "", line)
	if (index(line, want " ") == 1) { split(substr(line, length(want) + 1), f, " "); print f[1]; exit } }'; }
shows() { screen | grep -q -- "$1"; }
hides() { ! screen | grep -q -- "$1"; }
nonzero_row() { [ "$(row_count "$1")" -gt 0 ] 2>/dev/null; }
header_ok() { screen | grep -q '^tok/s [1-9][0-9.]* now' && nonzero_row forward &&
	nonzero_row "layers (6)" && nonzero_row attention && nonzero_row request; }

mkfifo "$TMP/in"
exec 3<>"$TMP/in"
for i in $(seq 40); do echo "once upon a time"; done >&3  # far more work than the test needs
marker=$TMP/tmux-stats.json
cmd=$(printf '%q ' "$SPANTRACE" top -d 1 -- "$INFER" "$DEMO_MODEL" -z "$DEMO_TOK" -b $backend \
	-n 256 -t 0 --serve --stats "$marker")
tm new-session -d -s top -x 80 -y 24 "bash --norc --noprofile" 3>&- || fail "tmux cannot start"
tm send-keys -t top "PS1='READY\$ '; clear" Enter
wait_for shows 'READY\$' || fail "no shell prompt in tmux: $(screen)"
tm send-keys -t top "$cmd <$TMP/in 2>$TMP/top.err; echo \$? >$TMP/rc" Enter

# Live numbers: non-zero tok/s and the rows of a forward pass (15 s: the
# first request must finish for the request row).
for i in 1 2 3; do wait_for header_ok && break; done
header_ok || fail "no live numbers after 30 s: $(screen; cat "$TMP/top.err")"
ok "header: $(screen | grep -m1 '^tok/s')"
ok "rows: forward $(row_count forward), layers $(row_count 'layers (6)'), attention $(row_count attention)"
assert_eq "width of the screen" 80 "$(screen | awk '{ if (length($0) > m) m = length($0) } END { print m }')"

# Move the selection to the layers row: Home, then down as many rows as it
# is below the first table row.
first=$(screen | grep -n '^NAME' | cut -d: -f1)
layers=$(screen | grep -n 'layers (6)' | cut -d: -f1)
tm send-keys -t top g
for i in $(seq $((layers - first - 1))); do tm send-keys -t top j; done
tm send-keys -t top e
wait_for shows '+ layers (6)' || fail "e did not collapse the layers row: $(screen)"
# ffn: a phase of every backend; its kernels are ffn_up and ffn_down
wait_for hides ' ffn  ' || fail "collapsed layers still show their phases"
ok "e collapses the layers row"
tm send-keys -t top e
wait_for shows ' ffn  ' || fail "e did not expand the layers row again: $(screen)"
ok "e expands it again"
tm send-keys -t top l
wait_for shows 'layer 0 ' || fail "l did not split the layers: $(screen)"
wait_for shows 'layer 5 ' || fail "not every layer got a row: $(screen)"
assert_le "layer 0 count" 1 "$(row_count 'layer 0')"
ok "l splits into per-layer rows"
screen >"$TMP/screen.txt"

tm send-keys -t top q
wait_for [ -s "$TMP/rc" ] || fail "top did not exit on q: $(screen)"
assert_eq "exit status after q" 0 "$(cat "$TMP/rc")"
assert_eq "alternate screen left" 0 "$(tm display-message -p -t top '#{alternate_on}')"
wait_for shows '^READY\$ *$' || fail "no shell prompt after top: $(screen)"
hides 'NAME  *COUNT' || fail "table left on the restored screen: $(screen)"
ok "terminal restored: $(screen | grep -c .) non-empty lines, prompt back"
grep -q "target stopped with SIGTERM" "$TMP/top.err" || fail "engine not stopped: $(cat "$TMP/top.err")"
pgrep -f "$marker" >/dev/null && fail "the engine outlived top"
[ -s "$marker" ] || fail "the engine did not exit cleanly (no --stats written)"
ok "engine stopped cleanly: $(grep -o 'target [^;]*' "$TMP/top.err")"

# restored_after WHAT: exit 0, no alternate screen, no table, prompt back
restored_after() {
	wait_for [ -s "$TMP/rc" ] || fail "$1: top did not exit: $(screen)"
	assert_eq "$1: exit status" 0 "$(cat "$TMP/rc")"
	assert_eq "$1: alternate screen left" 0 "$(tm display-message -p -t top '#{alternate_on}')"
	wait_for shows '^READY\$ *$' || fail "$1: no shell prompt after top: $(screen)"
	hides 'NAME  *COUNT' || fail "$1: table left on the restored screen: $(screen)"
	ok "$1: terminal restored"
}
tm send-keys -t top "clear" Enter
rm -f "$TMP/rc"
tm send-keys -t top "$(printf '%q ' "$SPANTRACE" top --binary "$INFER") 2>$TMP/top.err; echo \$? >$TMP/rc" Enter
wait_for shows 'waiting for events' || fail "no view for --binary: $(screen; cat "$TMP/top.err")"
tm send-keys -t top C-c
restored_after "^C"
tm send-keys -t top "clear" Enter
rm -f "$TMP/rc"
tm send-keys -t top "$(printf '%q ' "$SPANTRACE" top -n 2 -d 0.5 --binary "$INFER") 2>$TMP/top.err; echo \$? >$TMP/rc" Enter
wait_for shows 'waiting for events' || fail "no view for -n 2: $(screen; cat "$TMP/top.err")"
restored_after "-n 2"

# The terminal goes away under a running top (ssh dropped, tmux killed): top
# must end, not spin on a hung-up tty.
tm send-keys -t top "clear" Enter
tm send-keys -t top "$(printf '%q ' "$SPANTRACE" top --binary "$INFER") 2>$TMP/hup.err" Enter
wait_for shows 'waiting for events' || fail "no view before the hangup: $(screen; cat "$TMP/hup.err")"
toppid=$(pgrep -f "^$SPANTRACE top --binary") || fail "no top process to hang up on"
tm kill-server
gone() { ! kill -0 "$toppid" 2>/dev/null; }
wait_for gone || { ps -o pid,stat,pcpu,args -p "$toppid"; kill "$toppid"; fail "top outlived its terminal"; }
ok "top ended when its terminal hung up"
