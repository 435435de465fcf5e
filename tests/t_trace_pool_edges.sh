#!/usr/bin/env bash
# t_trace_pool_edges.sh - the tracer's pool accounting on the awkward cases
# (tests/helpers/poolcases.c): an allocation at a pointer still on record
# takes the old bytes back and counts a missed free; a free of an unknown
# pointer is counted and changes nothing; reserved is never below bytes.
# The pool ends at exactly live 57 (50 + 7) and reserved 71 (64 + 7).
# fast
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/helpers/fault_lib.sh"
need_bpf
need_binaries
build_helper poolcases

"$SPANTRACE" record -q -o "$TMP/t.jsonl" --summary "$TMP/s.json" -- "$TMP/poolcases" 2>"$TMP/rec.err" ||
	fail "record failed: $(tail -n 3 "$TMP/rec.err")"
pid=$(jq -r '.pids[0]' <(head -n 1 "$TMP/t.jsonl"))
dev() { jq -r ".pools[\"$pid\"].device.$1" "$TMP/s.json"; }
assert_eq "missed frees" 1 "$(jq .missed_frees "$TMP/s.json")"
assert_eq "unknown frees" 1 "$(jq .unknown_frees "$TMP/s.json")"
assert_eq "device live bytes" 57 "$(dev live_bytes)"
assert_eq "device reserved bytes" 71 "$(dev reserved_bytes)"
assert_eq "device peak bytes (100, before the repeat)" 100 "$(dev peak_bytes)"
assert_eq "device peak reserved bytes" 128 "$(dev peak_reserved_bytes)"
assert_eq "allocation records" 3 "$(jq -c 'select(.type == "alloc")' "$TMP/t.jsonl" | wc -l)"
assert_eq "the unknown free is marked" true "$(jq -c 'select(.type == "free") | .unknown' "$TMP/t.jsonl")"
assert_eq "no allocation reserves less than it holds" 0 \
	"$(jq -c 'select(.type == "alloc" and .reserved < .bytes)' "$TMP/t.jsonl" | wc -l)"
