#!/usr/bin/env bash
# t_daemon_tail.sh - tail capture under disk caps: with a zero threshold every
# span goes to JSONL; tiny caps force rotation, and the files stay whole-line,
# valid JSON, within the per-file and total caps and the retention count, with
# every span accounted for (written + dropped = delivered = fired).
# Lines bigger than a file are dropped and the drop counter says so; SIGHUP
# starts a new file; a percentile threshold captures only a minority.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_bpf
need_models
need_daemon_build

# settle_spans PID STATS: true once a snapshot shows all of PID's layer spans
# (so the engine's run is in it) and every span fired is written or dropped.
settle_spans() {
	metrics > "$TMP/m.txt" || return 1
	local fired written dropped
	[ "$(msum "$TMP/m.txt" spantrace_span_duration_seconds_count 'span="layer"' "pid=\"$1\"")" \
		= "$(stat_count "$2" layer)" ] || return 1
	fired=$(msum "$TMP/m.txt" spantrace_events_fired_total 'event="span"')
	written=$(msum "$TMP/m.txt" spantrace_tail_spans_written_total)
	dropped=$(msum "$TMP/m.txt" spantrace_tail_spans_dropped_total)
	[ $((written + dropped)) = "$fired" ]
}

# 1. Tiny caps: 8 KiB files, 24 KiB in all, at most 3 files (detail level:
#    every op span, ~2900 lines of ~190 bytes, so many rotations).
mkdir "$TMP/j1"
start_daemon --level detail --jsonl-dir "$TMP/j1" --slow-ms 0 --file-max 8K --total-max 24K --retain 5
run_engine "$TMP/stats.json"
wait_for settle_spans $EPID "$TMP/stats.json" || fail "spans not all accounted for: $(grep -E 'span"|tail_spans' "$TMP/m.txt")"
fired=$(msum "$TMP/m.txt" spantrace_events_fired_total 'event="span"')
engine_spans=$(jq '[.spans[].count] | add' "$TMP/stats.json")
assert_eq "spans fired = the engine's span count" "$engine_spans" "$fired"
assert_eq "spans delivered = fired" "$fired" "$(msum "$TMP/m.txt" spantrace_events_delivered_total 'event="span"')"
assert_eq "ring buffer drops" 0 "$(msum "$TMP/m.txt" spantrace_events_dropped_total 'event="span"')"
written=$(msum "$TMP/m.txt" spantrace_tail_spans_written_total)
assert_eq "every line fits a file: written = fired" "$fired" "$written"
deleted=$(msum "$TMP/m.txt" spantrace_tail_files_deleted_total)
assert_le "old files deleted (at least 1)" 1 "$deleted"
total=$(cat "$TMP/j1"/*.jsonl | wc -c)
assert_le "bytes on disk within the total cap" "$total" 24576
assert_eq "daemon's disk gauge = bytes on disk" "$total" "$(msum "$TMP/m.txt" spantrace_tail_disk_bytes)"
for f in "$TMP/j1"/*.jsonl; do
	assert_le "$(basename "$f") within the per-file cap" "$(stat -c %s "$f")" 8192
	[ -z "$(tail -c 1 "$f")" ] || fail "$f does not end with a newline"
	jq -e 'select(.type == "span" and .dur_ns >= 0)' "$f" > /dev/null || fail "$f is not JSONL spans"
done
nfiles=$(ls "$TMP/j1"/*.jsonl | wc -l)
assert_le "files within the retention count" "$nfiles" 5

# SIGHUP: a new file is started.
before=$(ls "$TMP/j1" | sort | tail -n 1)
kill -HUP "$DPID"
newest() { [ "$(ls "$TMP/j1" | sort | tail -n 1)" != "$before" ]; }
wait_for newest || fail "SIGHUP did not start a new file"
ok "SIGHUP started $(ls "$TMP/j1" | sort | tail -n 1)"
stop_daemon

# 2. A file cap smaller than any line: everything is dropped, and counted.
mkdir "$TMP/j2"
start_daemon --level coarse --jsonl-dir "$TMP/j2" --slow-ms 0 --file-max 64 --total-max 64
run_engine "$TMP/stats.json"
wait_for settle_spans $EPID "$TMP/stats.json" || fail "spans not all accounted for"
fired=$(msum "$TMP/m.txt" spantrace_events_fired_total 'event="span"')
assert_eq "oversized lines dropped and counted" "$fired" "$(msum "$TMP/m.txt" spantrace_tail_spans_dropped_total)"
assert_eq "nothing written" 0 "$(cat "$TMP/j2"/*.jsonl | wc -c)"
stop_daemon

# 3. --slow-pct 90: after a first run measures the distribution, a second
#    run captures a minority of its layer spans.
mkdir "$TMP/j3"
start_daemon --level coarse --jsonl-dir "$TMP/j3" --slow-pct 90
run_engine "$TMP/stats.json" -n 256
has_threshold() { metrics > "$TMP/m.txt" && grep -q 'spantrace_tail_threshold_seconds{span="layer"}' "$TMP/m.txt"; }
wait_for has_threshold || fail "no layer threshold after $(stat_count "$TMP/stats.json" layer) layer spans"
ok "threshold: $(grep 'threshold_seconds{span="layer"}' "$TMP/m.txt")"
lines_before=$(cat "$TMP/j3"/*.jsonl | jq -r 'select(.name == "layer") | .pid' | wc -l)
run_engine "$TMP/stats.json" -n 256; pid=$EPID
wait_for settle_spans $pid "$TMP/stats.json" || fail "second run not accounted for"
captured=$(cat "$TMP/j3"/*.jsonl | jq -r "select(.name == \"layer\" and .pid == $pid) | .pid" | wc -l)
layer_spans=$(stat_count "$TMP/stats.json" layer)
ok "captured $captured of $layer_spans layer spans in the second run (first run: $lines_before)"
assert_le "p90 threshold captures under half" "$((captured * 2))" "$layer_spans"
stop_daemon
