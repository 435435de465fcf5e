#!/usr/bin/env bash
# t_record_badinput.sh - bad input gives one clear error line and a non-zero
# exit: no such pid, a process without our probes, a binary without probes,
# missing CAP_BPF/CAP_PERFMON, an unwritable output, a symlink planted at the
# output path (not followed), a full disk mid-run (whole lines kept), and
# contradictory options; a failed profile leaves no empty output directory.
# fast
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh" # jsonl_check
need_bpf
need_models
for b in "$INFER" "$SPANTRACE"; do [ -x "$b" ] || fail "no $b (build first)"; done
need_cmd capsh libcap2-bin
m=$MODELS/stories260K.bin

expect_fail "nonexistent pid" "no process with pid 99999999" "$SPANTRACE" record -p 99999999 -o "$TMP/x"
sleep 30 &
expect_fail "process without probes" "has no 'infer' USDT probes" "$SPANTRACE" record -p $! -o "$TMP/x"
kill $!
expect_fail "binary without probes" "no 'infer' USDT probes" "$SPANTRACE" record --binary /bin/true -o "$TMP/x"
expect_fail "not an ELF file" "not an ELF file" "$SPANTRACE" record --binary "$0" -o "$TMP/x"
expect_fail "command not found" "command not found" "$SPANTRACE" record -o "$TMP/x" -- no-such-command-xyz
expect_fail "two targets" "exactly one target" "$SPANTRACE" record -p 1 --binary "$INFER"
expect_fail "no target" "exactly one target" "$SPANTRACE" record -o "$TMP/x"
expect_fail "bad level" "invalid level" "$SPANTRACE" record --level loud --binary "$INFER"
# profile's default output directory (./spantrace-profile-<time>) is made
# before the attach; a failed attach leaves nothing of it behind
mkdir "$TMP/cwd"
(cd "$TMP/cwd" && expect_fail "profile of a nonexistent pid" "no process with pid 99999999" \
	"$SPANTRACE" profile -p 99999999)
assert_empty "directories a failed profile left behind" "$(ls -A "$TMP/cwd")"
expect_fail "bad duration" "invalid duration" "$SPANTRACE" record --duration 1x --binary "$INFER"
expect_fail "bad pid text" "invalid pid" "$SPANTRACE" record -p 12ab
expect_fail "list without probes" "no 'infer' USDT probes" "$SPANTRACE" list /bin/true

expect_fail "no privileges" "CAP_BPF and CAP_PERFMON" \
	capsh --drop=cap_bpf,cap_perfmon,cap_sys_admin -- -c "exec $SPANTRACE record --binary $INFER -o $TMP/x"

expect_fail "unwritable output" "cannot create $TMP/no/such/dir/t.jsonl" \
	"$SPANTRACE" record -o "$TMP/no/such/dir/t.jsonl" -- "$INFER" "$m" -b cpu -n 4 --ids
expect_fail "summary path is a directory" "cannot create $TMP: Is a directory" \
	"$SPANTRACE" record -o "$TMP/t.jsonl" --summary "$TMP" -- "$INFER" "$m" -b cpu -n 4 --ids

echo "precious" >"$TMP/victim"
ln -s "$TMP/victim" "$TMP/link.jsonl"
expect_fail "planted symlink" "symbolic link" "$SPANTRACE" record -o "$TMP/link.jsonl" -- "$INFER" "$m" -b cpu -n 4 --ids
assert_eq "symlink target untouched" precious "$(cat "$TMP/victim")"

expect_fail "disk full (/dev/full)" "writing /dev/full: No space left on device" \
	"$SPANTRACE" record -q -o /dev/full -- "$INFER" "$m" -b cpu -n 32 --ids

# A real filesystem filling up mid-run: the error names the file, and what
# was written before is whole lines of valid JSON. Last: a machine that
# cannot mount a tmpfs (a container) skips only this case.
mkdir -p "$TMP/small"
trap 'umount "$TMP/small" 2>/dev/null; rm -rf "$TMP"; jobs -p | xargs -r kill 2>/dev/null' EXIT
mount -t tmpfs -o size=64k tmpfs "$TMP/small" 2>"$TMP/mount.err" ||
	skip "cannot mount a small tmpfs, mid-run disk full not checked: $(cat "$TMP/mount.err")"
expect_fail "disk full mid-run" "writing $TMP/small/t.jsonl: No space left on device" \
	"$SPANTRACE" record -q -o "$TMP/small/t.jsonl" -- "$INFER" "$m" -b cpu -n 200 -t 0 --ids
# jsonl_check: at least one line, every line whole JSON, the last one ended
ok "$(jsonl_check "$TMP/small/t.jsonl") whole JSONL lines kept ($(stat -c %s "$TMP/small/t.jsonl") bytes)"
