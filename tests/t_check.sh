#!/usr/bin/env bash
# t_check.sh - `spantrace check` (issue 44): on this machine every feature
# the tracer needs is present and it exits 0, naming what each is for. With
# a required feature read as missing (SPANTRACE_FEATURES_OFF) it exits 1 and
# says so, and record, top and daemon refuse early in one line naming the
# feature, before creating any output; an optional one (uprobe_multi) only
# degrades. Without CAP_BPF and CAP_PERFMON it says record cannot run.
# fast
source "$(dirname "$0")/lib.sh"
need_root
need_cmd capsh libcap2-bin
[ -x "$SPANTRACE" ] || fail "no $SPANTRACE (build first)"

"$SPANTRACE" check >"$TMP/check.out" 2>&1 || fail "check exited $? here: $(cat "$TMP/check.out")"
for f in btf ringbuf bpf_loop uprobes raw_tracepoints; do
	grep -Eq "^  $f +present" "$TMP/check.out" || fail "check does not say $f is present: $(grep "$f" "$TMP/check.out")"
done
grep -q "^verdict: record can run here" "$TMP/check.out" || fail "no verdict: $(tail -n 2 "$TMP/check.out")"
grep -q "perf_event_paranoid: [0-9-]*: profile" "$TMP/check.out" || fail "no perf_event_paranoid line"
grep -q "CAP_SYS_PTRACE" "$TMP/check.out" || fail "check does not name CAP_SYS_PTRACE"
ok "check: required features present, verdict and paranoid said"

RC=0
env SPANTRACE_FEATURES_OFF=ringbuf "$SPANTRACE" check >"$TMP/noring.out" 2>&1 || RC=$?
assert_eq "check without a ring buffer: exit" 1 "$RC"
grep -Eq "^  ringbuf +MISSING" "$TMP/noring.out" || fail "check does not say the ring buffer is missing"
grep -q "^verdict: record cannot run here" "$TMP/noring.out" || fail "no verdict: $(tail -n 1 "$TMP/noring.out")"
ok "check names the missing ring buffer, and that record cannot run"

for cmd in "record -o $TMP/no.jsonl -- true" "top -b -- true" "daemon --all-engines --listen 127.0.0.1:0"; do
	expect_fail "${cmd%% *} without bpf_loop" "this kernel lacks bpf_loop" \
		env SPANTRACE_FEATURES_OFF=uprobe_multi,bpf_loop "$SPANTRACE" $cmd
done
[ ! -e "$TMP/no.jsonl" ] || fail "record created its output before refusing"
ok "no output file left by the refusal"

env SPANTRACE_FEATURES_OFF=uprobe_multi "$SPANTRACE" check >"$TMP/degraded.out" ||
	fail "check with uprobe_multi off exited $?"
grep -A2 -E "^  uprobe_multi +MISSING" "$TMP/degraded.out" | grep -q "without it: one link per probe site" ||
	fail "check does not say what uprobe_multi's absence costs: $(grep -A2 uprobe_multi "$TMP/degraded.out")"
ok "an optional feature missing: check still says record can run, and what degrades"

RC=0
capsh --drop=cap_bpf,cap_perfmon,cap_sys_admin -- -c '"$@"' capsh "$SPANTRACE" check >"$TMP/nocaps.out" 2>&1 || RC=$?
assert_eq "check without CAP_BPF/CAP_PERFMON: exit" 1 "$RC"
grep -q "need CAP_BPF and CAP_PERFMON" "$TMP/nocaps.out" || fail "check does not name the capabilities: $(cat "$TMP/nocaps.out")"
ok "check without the capabilities: record cannot run, and why"
