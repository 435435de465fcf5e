#!/usr/bin/env bash
# t_prom_format.sh - the daemon's /metrics text passes `promtool check metrics`
# (exposition format 0.0.4 and naming lint), using test_prom's rendered sample.
# fast
source "$(dirname "$0")/lib.sh"

need_cmd promtool prometheus
[ -x "$BUILD/tests/test_prom" ] || fail "$BUILD/tests/test_prom not built"
PROM_SAMPLE_OUT=$TMP/sample.prom "$BUILD/tests/test_prom" || fail "test_prom failed"
[ -s "$TMP/sample.prom" ] || fail "test_prom wrote no sample"
out=$(promtool check metrics < "$TMP/sample.prom" 2>&1) || fail "promtool check metrics: $out"
assert_empty "promtool complaints" "$out"
# A deliberately broken copy must be rejected, or this test proves nothing.
sed 's/^# TYPE spantrace_span_duration_seconds histogram$/# TYPE spantrace_span_duration_seconds bogus/' \
	"$TMP/sample.prom" > "$TMP/broken.prom"
promtool check metrics < "$TMP/broken.prom" >/dev/null 2>&1 && fail "promtool accepted a broken sample"
ok "promtool rejects a broken TYPE line"
