#!/usr/bin/env bash
# t_security_caps.sh - without CAP_BPF/CAP_PERFMON (and CAP_SYS_ADMIN, which
# also grants them) `record` and `daemon` refuse to start: non-zero exit, one
# line naming the missing capabilities, no output file created and no
# command started. With one of the two missing, the message names that one.
# Capabilities are dropped with capsh (Debian libcap2-bin).
# fast
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
need_root
need_models
need_binaries
need_cmd capsh libcap2-bin

# without DROPS CMD...: runs CMD with those capabilities dropped
# (bounding set, so effective too); sets RC, output in $TMP/err.
without() {
	local drops=$1
	shift
	RC=0
	capsh --drop="$drops" -- -c '"$@"' capsh "$@" >/dev/null 2>"$TMP/err" </dev/null || RC=$?
}

check_refused() { # NAME WANT_IN_MESSAGE...
	local name=$1 w
	shift
	[ "$RC" != 0 ] || fail "$name: started without the capabilities"
	for w in "$@"; do grep -q "$w" "$TMP/err" || fail "$name: message does not name $w: $(cat "$TMP/err")"; done
	assert_eq "$name: lines of error" 1 "$(grep -c . "$TMP/err")"
	ok "$name: exit $RC: $(cat "$TMP/err")"
}

without cap_bpf,cap_perfmon,cap_sys_admin \
	"$SPANTRACE" record -o "$TMP/t.jsonl" -- "$INFER" "$MODELS/stories260K.bin" -b cpu -n 4 --stats "$TMP/e.json"
check_refused "record" CAP_BPF CAP_PERFMON
[ -e "$TMP/t.jsonl" ] && fail "record created its output without privileges"
[ -e "$TMP/e.json" ] && fail "record started the command without privileges"

without cap_bpf,cap_perfmon,cap_sys_admin "$SPANTRACE" daemon --binary "$INFER" --listen 127.0.0.1:0
check_refused "daemon" CAP_BPF CAP_PERFMON

without cap_perfmon,cap_sys_admin "$SPANTRACE" record -o "$TMP/t.jsonl" -p $$
check_refused "record without CAP_PERFMON only" "missing CAP_PERFMON)"

without cap_bpf,cap_sys_admin "$SPANTRACE" record -o "$TMP/t.jsonl" -p $$
check_refused "record without CAP_BPF only" "missing CAP_BPF)"
