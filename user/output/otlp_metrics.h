/* otlp_metrics.h - the daemon's snapshot (prom.h) as an OTLP/HTTP JSON
 * ExportMetricsServiceRequest, for `daemon --otlp URL` (sent to
 * URL/v1/metrics through otlp.h each interval).
 *
 * Under /metrics' names: every duration and token-count histogram (explicit
 * bounds = the Prometheus `le` edges of its kind, in seconds); tokens,
 * requests, pool allocs/frees and events fired/delivered/dropped as
 * monotonic sums; pool, KV-cache and tok/s values as gauges. Not (yet) the
 * serving gauges, the error counters or the tail-capture series. The
 * kernel's maps only ever grow, so sums and histograms are CUMULATIVE, from
 * the daemon's start. */
#ifndef SPANTRACE_OTLP_METRICS_H
#define SPANTRACE_OTLP_METRICS_H

#include <stdint.h>
#include "output/prom.h"

/* A malloc'd JSON body, and its data points in *npoints; NULL when out of
 * memory. start_ns, now_ns: Unix ns of the daemon's start and of now. */
char *otlp_metrics_body(const struct prom_snapshot *s, uint64_t start_ns, uint64_t now_ns, const char *host,
			uint64_t *npoints);

#endif
