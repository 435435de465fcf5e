# shellcheck shell=bash
# tests/daemon_lib.sh - sourced by tests/t_daemon_*.sh after lib.sh:
# start/stop `spantrace daemon`, read its /metrics, run the engine.

# start_daemon ARGS...: daemon on a free loopback port, fast ticks; sets DPID, DPORT.
start_daemon() {
	"$SPANTRACE" daemon --binary "$INFER" --listen 127.0.0.1:0 --interval 0.2 "$@" \
		> "$TMP/daemon.log" 2>&1 &
	DPID=$!
	wait_for grep -q 'metrics at http' "$TMP/daemon.log" \
		|| { cat "$TMP/daemon.log" >&2; fail "daemon did not start"; }
	DPORT=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")
	[ -n "$DPORT" ] || fail "no port in: $(cat "$TMP/daemon.log")"
}

# stop_daemon: SIGTERM, and the daemon must exit 0.
stop_daemon() {
	kill -TERM "$DPID"
	local rc=0
	wait "$DPID" || rc=$?
	assert_eq "daemon exit status after SIGTERM" 0 "$rc"
}

metrics() { curl -sf "http://127.0.0.1:$DPORT/metrics"; }

# msum FILE NAME [LABEL=\"V\"...]: sum of NAME's samples having every label given.
# NAME's family must be declared in FILE (a "# TYPE" line for NAME, or for
# its base name for _bucket/_sum/_count): a failed scrape or an empty file is
# not a sum of 0. A declared family with no matching series sums to 0.
# msum prints an integer (counts); msumf seconds, to the nanosecond.
msum() { _msum %d "$@"; }
msumf() { _msum %.9f "$@"; }
_msum() {
	local fmt=$1 file=$2 name=$3 base; shift 3
	base=$name
	case $name in *_bucket | *_sum | *_count) base=${name%_*} ;; esac
	grep -q -e "^# TYPE $name " -e "^# TYPE $base " "$file" 2>/dev/null ||
		fail "msum: no metric family $name in $file ($(wc -c 2>/dev/null <"$file" || echo no) bytes)"
	awk -v name="$name" -v want="$*" -v fmt="$fmt" '
		BEGIN { n = split(want, w, " ") }
		index($0, name "{") == 1 || $1 == name {
			for (i = 1; i <= n; i++) if (index($0, w[i]) == 0) next
			s += $NF
		}
		END { printf fmt "\n", s }' "$file"
}

# run_engine STATS [ARGS...]: the 260K model on the CPU backend; sets EPID.
run_engine() {
	local stats=$1; shift
	"$INFER" "$MODELS/stories260K.bin" -b cpu -s 1 -t 0 --ids -n 64 --stats "$stats" "$@" \
		> /dev/null 2> "$TMP/engine.err" &
	EPID=$!
	wait "$EPID" || { cat "$TMP/engine.err" >&2; fail "engine failed"; }
}

# stat_count STATS KIND: the engine's own span count for KIND.
stat_count() { jq -r ".spans.$2.count" "$1"; }

need_daemon_build() {
	[ -x "$SPANTRACE" ] && [ -x "$INFER" ] || fail "build $SPANTRACE and $INFER first"
	need_cmd curl curl
	need_cmd jq jq
}

