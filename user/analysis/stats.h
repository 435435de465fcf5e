/* stats.h - the one statistics module: histograms, percentiles, rolling
 * windows. The record summary and metrics stream, the top view, the daemon's
 * thresholds and the Prometheus buckets all use it, over the bucket
 * geometry of bpf/hist.h that the kernel's aggregation uses too, so a p95
 * means the same thing everywhere.
 *
 * Exact percentiles are nearest-rank: the value at sorted index ceil(q*n)-1,
 * the same definition the engine's --stats uses. Percentiles read from a
 * histogram are computed as PromQL's histogram_quantile() computes them
 * (rank q*n, linear inside the bucket that holds it; here over the bucket's
 * integers, so at most 1 ns apart), then kept within the exact min and max:
 * they lie in the bucket of the nearest-rank value, so within 12.5% of it
 * (hist.h). */
#ifndef SPANTRACE_STATS_H
#define SPANTRACE_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "hist.h"

/* ---- a histogram of u64 values (ns) in hist.h's buckets ----
 * Fixed size (4 KB), no malloc. */
struct hist {
	uint64_t count, sum, min, max;
	__u64 buckets[HIST_BUCKETS];   /* the kernel's type: loaded as is */
};

void hist_reset(struct hist *h);
void hist_add(struct hist *h, uint64_t v);
void hist_merge(struct hist *into, const struct hist *from);
/* Loads counts the kernel kept (struct agg_val): min becomes the lowest
 * value of the first non-empty bucket, and max, if it is not in the last
 * non-empty bucket (0 = unknown), that bucket's highest value. */
void hist_load(struct hist *h, const __u64 buckets[HIST_BUCKETS], uint64_t sum, uint64_t max);
/* The q-quantile (q in [0,1]) as above; 0 when empty. Exact at q = 0 and 1. */
uint64_t hist_quantile(const struct hist *h, double q);
/* The exclusive upper edge of the bucket holding the nearest-rank
 * q-quantile: at most a (1-q) share of the values is at or above it. */
uint64_t hist_quantile_edge(const struct hist *h, double q);
double hist_mean(const struct hist *h);
/* Count of values <= bound: exact when bound is a bucket's last value,
 * never more than the truth otherwise (for Prometheus `le` buckets). */
uint64_t hist_count_le(const struct hist *h, uint64_t bound);

/* ---- a distribution: exact samples up to a cap, a histogram always ----
 * Quantiles are exact while count <= cap; past the cap they come from the
 * histogram and dist_is_exact() says so. Memory is bounded by the cap. */
struct dist {
	struct hist hist;
	uint64_t *samples;   /* first `cap` values, unsorted */
	size_t nsamples, cap;
	int sorted;          /* samples[] is currently sorted */
};

/* 8192 samples (64 KiB) per series: exact for any run of a few thousand
 * spans per name (e.g. -n 256 on 6 layers), and a bound on what a long
 * record session can grow by (~30 series, ~2 MiB), so its RSS stays flat. */
#define DIST_DEFAULT_CAP (1u << 13)

int dist_init(struct dist *d, size_t cap);   /* -1 on allocation failure */
void dist_free(struct dist *d);
void dist_add(struct dist *d, uint64_t v);
uint64_t dist_quantile(struct dist *d, double q);
int dist_is_exact(const struct dist *d);

/* ---- a rolling window over the last `slots` intervals ----
 * Time is split into intervals of slot_ns; adding at time t goes into t's
 * slot, and slots older than the window are cleared as time moves on. */
struct window {
	struct hist *slots;       /* [nslots] */
	uint64_t *slot_start;     /* interval index each slot holds */
	unsigned nslots;
	uint64_t slot_ns;
};

int window_init(struct window *w, unsigned nslots, uint64_t slot_ns);
void window_free(struct window *w);
void window_add(struct window *w, uint64_t now_ns, uint64_t v);
/* Merges the slots still inside the window at now_ns into out. out is not
 * reset first, so several windows can be merged into one (hist_reset it for a
 * fresh snapshot). Expired slots are cleared on the way. A value added with a
 * time already older than the window is not kept. */
void window_snapshot(struct window *w, uint64_t now_ns, struct hist *out);
void window_reset(struct window *w);
/* How much time the window covers at now_ns: (nslots-1) whole slots plus the
 * elapsed part of the current one (for rates: count / span). */
uint64_t window_span_ns(const struct window *w, uint64_t now_ns);

/* Exact nearest-rank quantile of a sorted array (the oracle tests use). */
uint64_t quantile_sorted(const uint64_t *sorted, size_t n, double q);

#endif
