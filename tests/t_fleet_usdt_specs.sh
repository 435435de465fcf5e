#!/usr/bin/env bash
# t_fleet_usdt_specs.sh - the uprobe_multi shim writes the same USDT argument
# specs as libbpf: with every probe attached (--level detail), the set of
# specs in the __bpf_usdt_specs map of a uprobe_multi session equals the
# set libbpf's bpf_program__attach_usdt wrote in a per-probe session
# (SPANTRACE_NO_UPROBE_MULTI=1), read with bpftool.
source "$(dirname "$0")/lib.sh"
need_bpf
need_cmd bpftool bpftool
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
fifo_engine

# specs MODE: the distinct non-empty spec values of a session, one per line
specs() {
	local env=() id name
	[ "$1" = libbpf ] && env=(SPANTRACE_NO_UPROBE_MULTI=1)
	: >"$TMP/t.jsonl"
	env "${env[@]}" "$SPANTRACE" record -q -p $SRV --level detail -o "$TMP/t.jsonl" 2>"$TMP/rec.err" 3>&- &
	local rec=$!
	wait_for [ -s "$TMP/t.jsonl" ] || fail "$1: tracer did not attach: $(cat "$TMP/rec.err")"
	for id in $(cat /proc/$rec/fdinfo/* 2>/dev/null | awk '/^map_id:/ {print $2}' | sort -u); do
		name=$(bpftool map show id "$id" -j | jq -r .name)
		[ "$name" = __bpf_usdt_spec ] || continue
		bpftool map dump id "$id" -j | jq -r '.[] | .value | join("")' | grep -v '^\(0x00\)*$' | sort -u
	done >"$TMP/$1.specs"
	kill -INT $rec
	wait $rec || fail "$1: record exited $?"
	[ -s "$TMP/$1.specs" ] || fail "$1: no specs read"
}
specs uprobe_multi
specs libbpf
ok "$(wc -l <"$TMP/uprobe_multi.specs") distinct specs (uprobe_multi), $(wc -l <"$TMP/libbpf.specs") (libbpf)"
diff "$TMP/uprobe_multi.specs" "$TMP/libbpf.specs" >"$TMP/diff" || fail "the specs differ: $(head -c 600 "$TMP/diff")"
ok "the shim's specs equal libbpf's"
exec 3>&-
wait $SRV || fail "engine exited $?"
