/* metrics.h - `record --metrics`: seed 002's metric records, one per series
 * per interval: {"ts_ms":…,"metric":…,"value":…,"labels":{…}}.
 *
 * Per process: latency_ms (the interval's mean) and latency_p50_ms,
 * latency_p95_ms, latency_p99_ms (from the one histogram, stats.h) and
 * span_count per span name and layer; tokens_per_s; kv_cache_bytes;
 * memory_live_bytes. Then events_per_s and dropped_events_total. Labels
 * are strings, as the seed's schema says. */
#ifndef SPANTRACE_METRICS_H
#define SPANTRACE_METRICS_H

#include <stdint.h>
#include "analysis/procs.h"
#include "core/events.h"
#include "output/outbuf.h"

struct metrics_stream;

/* procs gives each process's memory and KV (its sink runs before this one). */
struct metrics_stream *metrics_new(const struct proc_table *procs);
void metrics_free(struct metrics_stream *m);

/* Every record type registers its process; spans and tokens are counted.
 * ctx is the struct metrics_stream. */
extern const struct event_handlers metrics_handlers;

/* Writes the interval that ends now (secs long) and starts the next one.
 * events: records read in the interval. 0, or -1 on a write error. */
int metrics_write(struct metrics_stream *m, struct outbuf *ob, uint64_t ts_ms, double secs,
		  uint64_t events, uint64_t dropped_total);

#endif
