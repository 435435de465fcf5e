#!/usr/bin/env bash
# t_container.sh - the agent as deploy/Containerfile packages it (issue 44):
# the tracer and the libraries it links, nothing else, as a root filesystem
# of its own (podman cannot run containers in this VM's cgroup mode, so the
# rootfs is assembled from the same Debian files the image's runtime stage
# installs: the binary's ldd closure), run in its own mount namespace with
# the host's pid and network namespaces, /proc and /sys mounted as a
# DaemonSet mounts them (hostPID; /sys read-only). From there:
# - `spantrace check` passes;
# - `record -p` of an engine on the host sees its requests exactly (request
#   and http records = the client's 4);
# - `daemon --all-engines` finds it and counts the 4 requests it serves.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
need_root
need_bpf
need_node
need_cmd unshare util-linux
need_cmd jq jq
need_cmd curl curl
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
[ -f "$ROOT/deploy/Containerfile" ] && [ -f "$ROOT/deploy/daemonset.yaml" ] || fail "no deploy/ files"

# the image's root filesystem: /usr/local/bin/spantrace and its libraries
R=$TMP/rootfs
mkdir -p "$R/usr/local/bin" "$R/proc" "$R/sys" "$R/tmp" "$R/dev"
cp "$SPANTRACE" "$R/usr/local/bin/spantrace"
for lib in $(ldd "$SPANTRACE" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
	mkdir -p "$R$(dirname "$lib")"
	cp -L "$lib" "$R$lib"
done
touch "$R/dev/null"
[ ! -e "$R/bin/sh" ] && [ ! -e "$R/usr/bin/env" ] || fail "the rootfs holds more than the tracer"
ok "rootfs: $(find "$R" -type f | wc -l) files, $(du -sh "$R" | cut -f1)"

# in_container CMD...: CMD chrooted into the rootfs, in a new mount namespace
# (it execs: in the background its pid is the tracer's, for signals; in the
# foreground call it in a subshell)
# (it execs: in the background its pid is the tracer's, for signals; in the
# foreground call it in a subshell)
in_container() {
	exec unshare --mount --propagation private -- sh -c '
		R=$1; shift
		mount -t proc proc "$R/proc" && mount --rbind /sys "$R/sys" && mount -o remount,bind,ro "$R/sys" &&
			mount --bind /dev/null "$R/dev/null" && mount -t tmpfs tmpfs "$R/tmp" && exec chroot "$R" "$@"' \
		sh "$R" "$@"
}

(in_container /usr/local/bin/spantrace check) >"$TMP/check.out" 2>&1 || fail "check in the container: $(cat "$TMP/check.out")"
grep -q "^verdict: record can run here" "$TMP/check.out" || fail "check in the container: $(tail -n 3 "$TMP/check.out")"
ok "spantrace check passes inside"

start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --max-seqs 4
stream_spec 4 12 0 >"$TMP/spec.json"

in_container /usr/local/bin/spantrace record -q -p "$EPID" >"$TMP/r.jsonl" 2>"$TMP/rec.err" &
rec=$!
wait_for grep -qs '"type":"session"' "$TMP/r.jsonl" || fail "record in the container did not attach: $(cat "$TMP/rec.err")"
client "$TMP/spec.json" "$TMP/c1.jsonl"
wait_for grep -qs '"type":"http"' "$TMP/r.jsonl"
kill -INT "$rec"
wait "$rec" || fail "record in the container exited $?: $(cat "$TMP/rec.err")"
tokens=$(jq -s 'map(.usage.completion_tokens) | add' "$TMP/c1.jsonl")
assert_eq "record -p from the container: request records" 4 "$(jq -s 'map(select(.type == "request")) | length' "$TMP/r.jsonl")"
assert_eq "record -p from the container: http records" 4 "$(jq -s 'map(select(.type == "http")) | length' "$TMP/r.jsonl")"
assert_eq "record -p from the container: emits = the client's tokens" "$tokens" \
	"$(jq -s 'map(select(.type == "emit")) | length' "$TMP/r.jsonl")"

in_container /usr/local/bin/spantrace daemon --all-engines --listen 127.0.0.1:0 --interval 0.2 >"$TMP/daemon.log" 2>&1 &
dpid=$!
WAIT_S=30 wait_for grep -q 'metrics at http' "$TMP/daemon.log" || fail "daemon in the container: $(cat "$TMP/daemon.log")"
wait_for grep -q "engine pid $EPID " "$TMP/daemon.log" || fail "the daemon did not find pid $EPID: $(cat "$TMP/daemon.log")"
dport=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")
client "$TMP/spec.json" "$TMP/c2.jsonl"
counted() {
	curl -sf "http://127.0.0.1:$dport/metrics" >"$TMP/m.txt" &&
		grep -q "^spantrace_requests_total{pid=\"$EPID\".* 4$" "$TMP/m.txt" &&
		grep -q "^spantrace_http_requests_total{status=\"200\",pid=\"$EPID\".* 4$" "$TMP/m.txt"
}
wait_for counted || fail "daemon in the container: $(grep -E '^spantrace_(http_)?requests_total' "$TMP/m.txt")"
ok "daemon --all-engines from the container: the engine's 4 requests, and the socket's"
kill -TERM "$dpid"
wait "$dpid" || fail "daemon in the container exited $?: $(tail -n 3 "$TMP/daemon.log")"
stop_engine
