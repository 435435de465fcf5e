#!/usr/bin/env bash
# t_userspan_badinput.sh - bad --span and --opencl input: one clear line on
# stderr and a non-zero exit, never a silent empty trace.
# fast
source "$(dirname "$0")/lib.sh"
[ -x "$SPANTRACE" ] || fail "no $SPANTRACE (build first)"
expect_fail "malformed spec" "--span 'bogus'" "$SPANTRACE" record --span bogus -- true
expect_fail "usdt spec without END" "want usdt:PATH" "$SPANTRACE" record --span usdt:/bin/true:p:b -- true
expect_fail "missing file" "No such file" "$SPANTRACE" record --span uprobe:/no/such/file:f -- true
expect_fail "name used twice" "already used" "$SPANTRACE" record --span uprobe:/bin/true:a:x --span uprobe:/bin/true:b:x -- true
expect_fail "daemon --span without value" "needs a value" "$SPANTRACE" daemon --binary /bin/true --span
# (the pattern names the missing probes: "infer" alone is in most messages)
expect_fail "no infer probes and neither flag" "no 'infer' USDT probes" "$SPANTRACE" record -- /bin/true
need_bpf
expect_fail "function not in the file" "cannot attach" "$SPANTRACE" record -q --span uprobe:/bin/true:no_such_function -o /dev/null -- /bin/true
sleep 30 &
sl=$!
expect_fail "--opencl -p on a process without the loader" "has not loaded the OpenCL ICD loader" \
	"$SPANTRACE" record -q --opencl -p $sl -o /dev/null
kill $sl
