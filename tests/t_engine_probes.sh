#!/usr/bin/env bash
# fast
# The engine library carries every probe row of include/spantrace/probes.def
# (30: 12 single-stream, 10 of the serving engine, 8 of the state dump) as an
# `infer` USDT probe, each with a semaphore and one site, on 5-byte nops;
# NO_PROBES builds carry none.
source "$(dirname "$0")/lib.sh"
LIB=$BUILD/libinfer.so
[ -r "$LIB" ] || fail "no $LIB"
need_cmd readelf binutils
need_cmd objdump binutils
need_cmd gcc build-essential

readelf -n "$LIB" | awk '/Provider:/{p=$2} /Name:/{n=$2} /Semaphore:/{sub(/.*Semaphore: */, ""); print p, n, $1}' >"$TMP/probes"
cat "$TMP/probes"
names=$("$BUILD/probedoc" --names) || fail "probedoc --names"
assert_eq "probe rows" 30 "$(echo "$names" | wc -l)"
for n in $names; do
	lines=$(grep -c "^infer $n " "$TMP/probes")
	assert_eq "sites of infer:$n" 1 "$lines"
	sem=$(awk -v n="$n" '$2 == n {print $3}' "$TMP/probes")
	[ "$((sem))" -ne 0 ] || fail "infer:$n has no semaphore"
done
assert_eq "probes in total" "$(echo "$names" | wc -l)" "$(wc -l <"$TMP/probes")"

# Each probe address must hold the 5-byte nop 0f 1f 44 00 00.
readelf -n "$LIB" | awk '/Location:/{print $2}' | sed 's/,$//' >"$TMP/locs"
assert_eq "probe addresses to check" "$(echo "$names" | wc -l)" "$(wc -l <"$TMP/locs")"
while read -r loc; do
	bytes=$(objdump -d --start-address=$((loc)) --stop-address=$((loc + 5)) "$LIB" |
		awk -F'\t' '/^ *[0-9a-f]+:/{print $2}' | xargs)
	assert_eq "nop at $loc" "0f 1f 44 00 00" "$bytes"
done <"$TMP/locs"

# NO_PROBES: the objects holding probe sites must carry no stapsdt notes;
# the same compile without it carries some (so 0 is not readelf failing).
notes() { run_ok "readelf -n $1" readelf -n "$1" | grep -c stapsdt; }
for src in trace pool; do
	for def in "" -DINFER_NO_PROBES; do
		gcc -std=gnu11 -D_GNU_SOURCE -I"$ROOT/include" -O2 -fPIC -mno-red-zone $def \
			-c "$ROOT/inference/base/$src.c" -I"$ROOT/inference" -o "$TMP/$src$def.o" || fail "compile $src.c $def"
	done
	assert_pos "stapsdt notes in $src.o" "$(notes "$TMP/$src.o")"
	assert_eq "stapsdt notes in NO_PROBES $src.o" 0 "$(notes "$TMP/$src-DINFER_NO_PROBES.o")"
done
