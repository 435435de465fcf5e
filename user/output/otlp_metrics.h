/* otlp_metrics.h - the daemon's metric set (output/metricset.h) as an
 * OTLP/HTTP JSON ExportMetricsServiceRequest, for `daemon --otlp URL` (sent
 * to URL/v1/metrics through otlp.h each interval).
 *
 * The same families as /metrics, with the same names, help strings, labels
 * (as attributes) and values: histograms with explicit bounds = the
 * Prometheus `le` edges of their kind; counters as monotonic sums; gauges.
 * A family with no points is left out. The kernel's maps only ever grow,
 * so sums and histograms are CUMULATIVE, from the daemon's start. */
#ifndef SPANTRACE_OTLP_METRICS_H
#define SPANTRACE_OTLP_METRICS_H

#include <stdint.h>
#include "output/metricset.h"

/* A malloc'd JSON body, and its data points in *npoints; NULL when out of
 * memory. start_ns, now_ns: Unix ns of the daemon's start and of now. */
char *otlp_metrics_body(const struct metrics_snapshot *s, uint64_t start_ns, uint64_t now_ns, const char *host,
			uint64_t *npoints);

#endif
