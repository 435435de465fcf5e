#!/usr/bin/env bash
# tools/bench_probes.sh - what one USDT probe hit costs: the engine's 5-byte
# nop probe (inference/base/usdt.h) against sys/sdt.h's 1-byte nop, not attached
# and attached with a bpftrace count(). tools/probecost.c fires one site in a
# loop; rounds interleave the variants and the medians are printed.
#
#   tools/bench_probes.sh          (root for the attached part; needs bpftrace)
#   REPEAT=5 HITS_FREE=100000000 HITS_ATTACHED=200000 BUILD=build tools/bench_probes.sh
export BENCH_NAME=bench_probes
# shellcheck source=tools/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
HITS_FREE=${HITS_FREE:-100000000}
HITS_ATTACHED=${HITS_ATTACHED:-200000}
CC=${CC:-gcc}
VARIANTS="nop5 sdt none"

command -v "$CC" >/dev/null || skipped "no C compiler ($CC)"
if ! command -v readelf >/dev/null || ! command -v objdump >/dev/null; then
	skipped "binutils (readelf, objdump) not installed"
fi
for v in $VARIANTS; do
	# PROBECOST_SDT means nothing to probecost.c: sdt.h's own 1-byte nop
	def=PROBECOST_${v^^}
	$CC -O2 -std=gnu11 -mno-red-zone -D"$def" -o "$TMP/pc_$v" "$ROOT/tools/probecost.c" \
		|| die "cannot compile tools/probecost.c ($v)"
done

# The site must really be the instruction we claim: read the probe's address
# from its stapsdt note and disassemble the bytes there.
site_bytes() {
	local loc
	loc=$(readelf -n "$1" | sed -n 's/.*Location: \(0x[0-9a-f]*\),.*/\1/p' | head -n1)
	[ -n "$loc" ] || return 1
	objdump -d --start-address="$loc" --stop-address=$((loc + 5)) "$1" |
		awk -F'\t' '/^ *[0-9a-f]+:/ { gsub(/ +$/, "", $2); print $2; exit }'
}
nop5=$(site_bytes "$TMP/pc_nop5")
sdt=$(site_bytes "$TMP/pc_sdt")
[ "$nop5" = "0f 1f 44 00 00" ] || die "5-byte probe site holds '$nop5', not 0f 1f 44 00 00"
[ "$sdt" = "90" ] || die "sdt.h probe site holds '$sdt', not 90"
echo "probe sites: nop5 = $nop5, sdt.h = $sdt"

field() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'; }

attach=yes
why_no_attach=
if [ "$(id -u)" != 0 ]; then attach=no why_no_attach="not root"
elif ! command -v bpftrace >/dev/null; then attach=no why_no_attach="bpftrace not installed"
fi

# count_run VARIANT ROUND: one bpftrace count() run; its count must equal the hits.
count_run() {
	local bin=$TMP/pc_$1 out=$TMP/bt_$1_$2.txt
	timeout 120 bpftrace -e "usdt:$bin:pc:hit { @ = count(); }" -c "$bin $HITS_ATTACHED" \
		>"$out" 2>&1 || { echo "bench_probes: bpftrace failed: $(tail -n2 "$out")" >&2; return 1; }
	local counted
	counted=$(sed -n 's/^@: \([0-9]*\)$/\1/p' "$out")
	[ "$counted" = "$HITS_ATTACHED" ] ||
		{ echo "bench_probes: bpftrace counted '$counted' of $HITS_ATTACHED hits ($1)" >&2; return 1; }
	grep '^ns_per_hit' "$out" >>"$TMP/att_$1"
}

: >"$TMP/att_nop5"; : >"$TMP/att_sdt"
for r in $(seq "$REPEAT"); do
	for v in $VARIANTS; do
		timeout 60 "$TMP/pc_$v" "$HITS_FREE" >>"$TMP/free_$v" || die "probecost $v failed"
	done
	if [ $attach = yes ]; then
		for v in nop5 sdt; do count_run $v "$r" || { attach=no why_no_attach="bpftrace run failed"; break; }; done
	fi
done

free_nop5=$(field ns_per_hit <"$TMP/free_nop5" | median)
free_sdt=$(field ns_per_hit <"$TMP/free_sdt" | median)
free_none=$(field ns_per_hit <"$TMP/free_none" | median)
echo "per-hit cost, ns (median of $REPEAT rounds; not attached: $HITS_FREE hits, attached: $HITS_ATTACHED)"
printf '  not attached   bare loop %-8s nop5 site %-8s sdt.h site %s\n' "$free_none" "$free_nop5" "$free_sdt"
if [ $attach = yes ]; then
	att_nop5=$(field ns_per_hit <"$TMP/att_nop5" | median)
	att_sdt=$(field ns_per_hit <"$TMP/att_sdt" | median)
	tramp=$(field trampoline <"$TMP/att_nop5" | sort -u | tr '\n' ' ')
	printf '  bpftrace count() nop5 %-8s sdt.h %-8s (counts equal hits in every run)\n' "$att_nop5" "$att_sdt"
	echo "  [uprobes-trampoline] mapped in the nop5 runs: $tramp(1 = optimized uprobe path taken)"
	ratio probe_attached_nop5_over_sdt "$(div "$att_nop5" "$att_sdt")" "<1"
	ratio probe_attached_nop5_ns "$att_nop5" info
else
	echo "  attached: skipped: $why_no_attach"
fi
ratio probe_unattached_nop5_minus_loop_ns "$(awk -v a="$free_nop5" -v b="$free_none" 'BEGIN { printf "%.3f\n", a - b }')" info
