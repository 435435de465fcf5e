#!/usr/bin/env bash
# t_profile_perf.sh - perf's own SDT tooling works alongside spantrace on the
# same probes: `perf buildid-cache --add` registers the engine library,
# `perf list sdt` shows every infer probe, `perf probe sdt_infer:token_begin`
# defines the events, and `perf record -e sdt_infer:{token,span,op}_begin`
# wrapped around `spantrace record -- infer` sees every token and every span
# begin, exactly as many as spantrace streamed and the engine counted itself.
source "$(dirname "$0")/lib.sh"
need_bpf
need_models
need_cmd perf linux-perf
need_tracefs
[ -x "$SPANTRACE" ] || fail "no $SPANTRACE (build first)"

LIB=$BUILD/libinfer.so
EVENTS="token_begin span_begin op_begin"

# Event names are global; ones left by someone else are theirs to keep.
for ev in $EVENTS; do
	if perf probe -l 2>/dev/null | grep -q "sdt_infer:$ev "; then
		skip "sdt_infer:$ev is already defined on this machine (perf probe -l); not touching it"
	fi
done
defined=()
cleanup() { for ev in "${defined[@]}"; do perf probe -q -d "sdt_infer:$ev" 2>/dev/null; done; rm -rf "$TMP"; jobs -p | xargs -r kill 2>/dev/null; }
trap cleanup EXIT

perf buildid-cache --add "$LIB" || fail "perf buildid-cache --add $LIB"
# An identical build elsewhere (same build id) keeps the cache entry at its
# path, and `perf probe -x` then finds no SDT notes for ours: point it here.
perf buildid-cache -u "$LIB" || fail "perf buildid-cache -u $LIB"
# perf lists every probe name of every binary it has cached. A name that
# several cached builds carry gets "@PATH(BUILD-ID)" after it, one line per
# build; a name only one build carries is listed bare (perf 6.1). So each of
# our probes shows either with our build id or bare.
bid=$(perf buildid-list -i "$LIB" 2>/dev/null | cut -c1-12)
[ -n "$bid" ] || fail "perf buildid-list -i $LIB gave no build id"
mapfile -t ours < <("$SPANTRACE" list "$LIB" | awk '$1 ~ /^infer:/ { sub(/^infer:/, "", $1); print $1 }')
nprobes=$(readelf -n "$LIB" | grep -c 'Provider: infer')
assert_eq "infer probes in $LIB: spantrace list = readelf" "$nprobes" "${#ours[@]}"
perf list sdt 2>/dev/null >"$TMP/sdt"
listed=0
for p in "${ours[@]}"; do
	grep -qE "sdt_infer:$p( |@[^ ]*\\($bid)" "$TMP/sdt" && listed=$((listed + 1))
done
assert_eq "our infer probes in perf list sdt (bare or with build id $bid)" "$nprobes" "$listed"
for ev in $EVENTS; do
	perf probe -q -x "$LIB" -a "sdt_infer:$ev" || fail "perf probe -x $LIB -a sdt_infer:$ev"
	defined+=("$ev")
	perf probe -l 2>/dev/null | grep -q "sdt_infer:$ev " || fail "perf probe -l does not show sdt_infer:$ev"
done

N=48
perf record -q -e sdt_infer:token_begin -e sdt_infer:span_begin -e sdt_infer:op_begin -o "$TMP/perf.data" -- \
	"$SPANTRACE" record -q -o "$TMP/trace.jsonl" -- \
	"$INFER" "$MODELS/stories260K.bin" -z "$MODELS/tokenizer.bin" -n $N -b cpu -s 1 -t 0 \
	--stats "$TMP/stats.json" >/dev/null 2>"$TMP/err" || { cat "$TMP/err"; fail "perf record + spantrace record failed"; }

pid=$(jq -r 'select(.type == "session") | .pids[0]' "$TMP/trace.jsonl")
[ -n "$pid" ] && [ "$pid" != null ] || fail "no session record with the traced pid"
perf script -i "$TMP/perf.data" -F pid,event 2>/dev/null | awk -v p="$pid" '$1 == p' >"$TMP/hits"
hits() { grep -c "sdt_infer:$1" "$TMP/hits"; }
engine=$(jq .tokens "$TMP/stats.json")
assert_eq "engine tokens" $N "$engine"
assert_eq "perf token_begin hits" "$engine" "$(hits token_begin)"
assert_eq "spantrace token records" "$engine" "$(jq -c 'select(.type == "token")' "$TMP/trace.jsonl" | wc -l)"
# every span begin perf saw (structural and op) is a span spantrace matched
engine_spans=$(jq '[.spans[].count] | add' "$TMP/stats.json")
perf_spans=$(( $(hits span_begin) + $(hits op_begin) ))
traced_spans=$(jq -c 'select(.type == "span")' "$TMP/trace.jsonl" | wc -l)
echo "span_begin $(hits span_begin), op_begin $(hits op_begin)"
assert_le "some structural and some op spans" 1 "$(( $(hits span_begin) > 0 && $(hits op_begin) > 0 ))"
assert_eq "perf span_begin + op_begin hits" "$engine_spans" "$perf_spans"
assert_eq "spantrace span records" "$engine_spans" "$traced_spans"
