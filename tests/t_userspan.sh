#!/usr/bin/env bash
# t_userspan.sh - `--span` on a program that is not our engine: USDT pairs
# fired through the public header (include/spantrace/spans.h, by
# build/spans_example) and a libc function (uprobe on nanosleep), through
# the same matcher, histograms and outputs as our own spans:
#   record: counts equal what the program says it fired and what bpftrace
#           counts on the same probes; nesting (parent, depth) is right,
#           also for two spans on one function;
#   top:    a row per span name with the same counts;
#   daemon: spantrace_span_duration_seconds{span="step"} counts the same.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_daemon_build
need_cmd bpftrace bpftrace
ex=$BUILD/spans_example
[ -x "$ex" ] || fail "no $ex (build first)"
libc=$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ { print $NF; exit }')
n=40
spans=()
for s in load step sample; do spans+=(--span "usdt:$ex:example:${s}_begin,${s}_end:$s"); done
spans+=(--span "uprobe:$libc:nanosleep:sleep")
nap=(--span "uprobe:$libc:nanosleep:nap") # a second span on the same function

# (bpftrace 0.17 here failed to load a second program on load_end: the canary probes it alone.)
bpftrace -e "usdt:$ex:example:*_begin { @b[pid, probe] = count(); }
usdt:$ex:example:load_end { printf(\"armed %d\\n\", pid); }" >"$TMP/bt.out" 2>"$TMP/bt.err" &
bt=$!
armed() { "$ex" 0 0 >/dev/null; grep -q '^armed' "$TMP/bt.out"; }
wait_for armed || fail "bpftrace saw no canary: $(cat "$TMP/bt.err")"
"$SPANTRACE" record -q "${spans[@]}" "${nap[@]}" -o "$TMP/t.jsonl" --summary "$TMP/s.json" -- "$ex" $n \
	>"$TMP/ex.out" 2>"$TMP/rec.err" || fail "record failed: $(tail -n 3 "$TMP/rec.err")"
stop_bpftrace $bt
pid=$(jq -r 'select(.type == "span") | .pid' "$TMP/t.jsonl" | head -n 1)
for s in load step sample; do
	theirs=$(jq ".$s" "$TMP/ex.out")
	assert_eq "$s: spans recorded vs fired by the program" "$theirs" "$(jq ".spans.$s.count" "$TMP/s.json")"
	assert_eq "$s: begins seen by bpftrace" "$theirs" \
		"$(awk -v m="@b[$pid, usdt:$ex:example:${s}_begin]:" 'index($0, m) == 1 { print $NF }' "$TMP/bt.out")"
done
assert_eq "sleep (nanosleep uprobe): one per sleep the program made" $((2 * n + 1)) "$(jq .spans.sleep.count "$TMP/s.json")"
assert_eq "step inside load, sample inside step" "$n $n" \
	"$(jq -s '[.[] | select(.type == "span")] | "\(map(select(.name == "step" and .parent == "load" and .depth == 1)) | length) \(map(select(.name == "sample" and .parent == "step" and .depth == 2)) | length)"' -r "$TMP/t.jsonl")"
# Both begin in one hit and the kernel runs their return probes in the order
# their entries ran: whichever began first must be the inner one.
assert_eq "nap (nanosleep again): as many, one of each pair inside the other" "$((2 * n + 1)) $((2 * n + 1))" \
	"$(jq -s -r '[.[] | select(.type == "span")] | "\(map(select(.name == "nap")) | length) \(map(select((.name == "sleep" and .parent == "nap") or (.name == "nap" and .parent == "sleep")) | select(.mismatch | not)) | length)"' "$TMP/t.jsonl")"
assert_eq "span errors" 0 "$(jq .span_errors "$TMP/s.json")"

"$SPANTRACE" top -b -d 1 -w 100 "${spans[@]}" -- "$ex" $n >"$TMP/top.out" 2>"$TMP/top.err" ||
	fail "top failed: $(tail -n 3 "$TMP/top.err")"
row() { awk -v n="$1" '$1 == n { v = $2 } END { print v }' "$TMP/top.out"; }
# one row per span name given to top, each with the program's count
for s in load step sample; do
	assert_eq "top: $s row" "$(jq ".$s" "$TMP/ex.out")" "$(row $s)"
done
assert_eq "top: sleep row" $((2 * n + 1)) "$(row sleep)"

"$SPANTRACE" daemon --binary "$ex" "${spans[@]:0:4}" --listen 127.0.0.1:0 --interval 0.2 >"$TMP/daemon.log" 2>&1 &
DPID=$!
wait_for grep -q 'metrics at http' "$TMP/daemon.log" || fail "daemon did not start: $(cat "$TMP/daemon.log")"
DPORT=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$TMP/daemon.log")
"$ex" $n 100 >/dev/null || fail "$ex under the daemon exited $?"
caught_up() { metrics >"$TMP/m.txt" && [ "$(msum "$TMP/m.txt" spantrace_span_duration_seconds_count 'span="step"')" -ge $n ]; }
wait_for caught_up || fail "daemon never showed the steps: $(grep -c span_duration "$TMP/m.txt") lines"
stop_daemon
assert_eq "daemon: step spans" $n "$(msum "$TMP/m.txt" spantrace_span_duration_seconds_count 'span="step"')"
assert_eq "daemon: load spans" 1 "$(msum "$TMP/m.txt" spantrace_span_duration_seconds_count 'span="load"')"
