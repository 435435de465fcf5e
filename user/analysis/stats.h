/* stats.h - the one statistics module: histograms, percentiles, rolling
 * windows. The record summary, the top view and the Prometheus endpoint all
 * use it, so a p95 means the same thing everywhere.
 *
 * Percentiles are nearest-rank: the value at sorted index ceil(q*n)-1, the
 * same definition the engine's --stats uses. */
#ifndef SPANTRACE_STATS_H
#define SPANTRACE_STATS_H

#include <stddef.h>
#include <stdint.h>

/* ---- log-linear histogram of u64 values (ns) ----
 * Values below 2^HIST_SUB_BITS are exact; above, each power of two is split
 * into 2^HIST_SUB_BITS sub-buckets, so a quantile read back is within
 * 2^-HIST_SUB_BITS relative of a value in that bucket. Fixed size, no malloc. */
#define HIST_SUB_BITS 7
#define HIST_BUCKETS ((64 - HIST_SUB_BITS + 1) << HIST_SUB_BITS)

struct hist {
	uint64_t count, sum, min, max;
	uint32_t buckets[HIST_BUCKETS];
};

void hist_reset(struct hist *h);
void hist_add(struct hist *h, uint64_t v);
void hist_merge(struct hist *into, const struct hist *from);
/* Nearest-rank quantile (q in [0,1]); 0 when empty. Exact for the min and max. */
uint64_t hist_quantile(const struct hist *h, double q);
double hist_mean(const struct hist *h);
/* Count of values <= bound (for Prometheus `le` buckets). */
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
	struct hist *slots;         /* [nslots] */
	uint64_t *slot_start; /* interval index each slot holds */
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
