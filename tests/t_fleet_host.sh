#!/usr/bin/env bash
# t_fleet_host.sh - `daemon --all-engines` traces engines in their own mount
# and pid namespaces (unshare), run from files at a path that does not
# exist on the host (a tmpfs mounted inside) and from an overlayfs; their
# series carry the host pid, the pid inside the namespace and the cgroup,
# and count exactly what each engine counted itself. `record -p HOSTPID`
# traces a namespaced engine too. Other engines on the host may be traced
# as well: this test asserts only about the engines it started.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_daemon_build
command -v unshare >/dev/null || skip "no unshare (util-linux)"
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
unshare --mount --pid --fork --mount-proc true 2>/dev/null || skip "cannot make mount+pid namespaces here"

lower=$TMP/lower
mkdir -p "$lower" "$TMP/upper" "$TMP/work"
cp "$INFER" "$BUILD/libinfer.so" "$lower/"
ctr=spantrace-ctr-$$-$RANDOM
[ -e "/srv/$ctr" ] && fail "/srv/$ctr exists on the host"

# container NAME: sets UPID, the unshare process of an engine in new mount+pid namespaces, fed by $TMP/NAME.in;
# tmpfs: files copied to /srv/$ctr (a tmpfs there); overlay: /srv/$ctr/ovl.
container() {
	local name=$1 setup dir
	if [ "$name" = tmpfs ]; then
		dir=/srv/$ctr
		setup="mount -t tmpfs none /srv && mkdir $dir && cp $lower/infer $lower/libinfer.so $dir/"
	else
		dir=/srv/$ctr/ovl
		setup="mount -t tmpfs none /srv && mkdir -p $dir && mount -t overlay overlay -o lowerdir=$lower,upperdir=$TMP/upper,workdir=$TMP/work $dir"
	fi
	mkfifo "$TMP/$name.in"
	OMP_NUM_THREADS=1 unshare --mount --pid --fork --mount-proc sh -c "$setup && exec $dir/infer $DEMO_MODEL -z $DEMO_TOK --serve -n 16 -b cpu -t 0 --stats $TMP/$name.st" \
		>"$TMP/$name.out" 2>"$TMP/$name.err" <"$TMP/$name.in" &
	UPID=$!
}

"$SPANTRACE" daemon --all-engines --listen 127.0.0.1:0 --interval 0.2 >"$TMP/daemon.log" 2>&1 &
DPID=$!
wait_for grep -q 'metrics at http' "$TMP/daemon.log" || fail "daemon did not start: $(cat "$TMP/daemon.log")"
DPORT=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")

declare -A host fd
n=3
for name in tmpfs overlay; do
	container $name
	u=$UPID
	exec {f}>"$TMP/$name.in"
	fd[$name]=$f
	wait_for pgrep -P "$u" >/dev/null || fail "$name: no engine under unshare $u"
	host[$name]=$(pgrep -P "$u")
	wait_long grep -q "engine pid ${host[$name]} " "$TMP/daemon.log" ||
		fail "$name: daemon did not find pid ${host[$name]}: $(cat "$TMP/daemon.log") $(cat "$TMP/$name.err")"
	ok "$name: $(grep -m1 "engine pid ${host[$name]} " "$TMP/daemon.log")"
done
[ -e "/srv/$ctr" ] && fail "/srv/$ctr appeared on the host"

# ask NAME: one prompt to that container's engine, waits for its reply
ask_ctr() {
	local want=$(($(wc -l <"$TMP/$1.out") + 1))
	echo "once upon a time" >&"${fd[$1]}"
	wait_for eval "[ \$(wc -l <'$TMP/$1.out') -ge $want ]" || fail "$1: no reply $want: $(cat "$TMP/$1.err")"
}

# by pid, from the host
"$SPANTRACE" record -q -p "${host[tmpfs]}" -o "$TMP/t.jsonl" 2>"$TMP/rec.err" &
rec=$!
wait_for [ -s "$TMP/t.jsonl" ] || fail "record -p did not attach: $(cat "$TMP/rec.err")"
ask_ctr tmpfs; ask_ctr tmpfs
kill -INT $rec
wait $rec || fail "record exited $?: $(cat "$TMP/rec.err")"
assert_eq "record -p on the namespaced engine: requests" 2 "$(jq -c 'select(.type == "request")' "$TMP/t.jsonl" | wc -l)"
ask_ctr overlay; ask_ctr overlay

for name in tmpfs overlay; do
	exec {fd[$name]}>&-
done
for name in tmpfs overlay; do   # they write --stats and exit
	wait_long eval "! kill -0 ${host[$name]} 2>/dev/null" || fail "$name: engine did not exit"
done
for name in tmpfs overlay; do
	pid=${host[$name]}
	want=$(jq -r .tokens "$TMP/$name.st")
	has_tokens() { metrics >"$TMP/m.txt" && [ "$(msum "$TMP/m.txt" spantrace_tokens_total "pid=\"$pid\"")" = "$want" ]; }
	wait_long has_tokens || fail "$name: daemon counted $(msum "$TMP/m.txt" spantrace_tokens_total "pid=\"$pid\"") tokens, engine $want"
	ok "$name: daemon counted the engine's $want tokens"
	line=$(grep "^spantrace_tokens_total{pid=\"$pid\"" "$TMP/m.txt")
	assert_eq "$name: ns_pid label" 'ns_pid="1"' "$(grep -o 'ns_pid="[0-9]*"' <<<"$line")"
	grep -q "cgroup=\"" <<<"$line" || fail "$name: no cgroup label: $line"
	grep -q "binary=\"/srv/$ctr/" <<<"$line" || fail "$name: binary label is not the path inside: $line"
	ok "$name: labels $(grep -o '{.*}' <<<"$line")"
done
kill -TERM $DPID
wait $DPID || fail "daemon exited $?"
