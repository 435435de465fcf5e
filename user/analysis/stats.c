/* stats.c - histograms, distributions and rolling windows (see stats.h). */
#include "analysis/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- struct hist ---- */

void hist_reset(struct hist *h)
{
	memset(h, 0, sizeof(*h));
}

void hist_add(struct hist *h, uint64_t v)
{
	/* min is 0 while empty, so an empty struct hist reads as all zeros. */
	if (h->count == 0 || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->count++;
	h->sum += v;
	h->buckets[hist_bucket(v)]++;
}

void hist_merge(struct hist *into, const struct hist *from)
{
	if (from->count == 0)
		return;
	if (into->count == 0 || from->min < into->min)
		into->min = from->min;
	if (from->max > into->max)
		into->max = from->max;
	into->count += from->count;
	into->sum += from->sum;
	/* Only the buckets between from's min and max can be non-zero. */
	unsigned lo = hist_bucket(from->min), hi = hist_bucket(from->max);
	for (unsigned b = lo; b <= hi; b++)
		into->buckets[b] += from->buckets[b];
}

void hist_load(struct hist *h, const __u64 buckets[HIST_BUCKETS], uint64_t sum, uint64_t max)
{
	int first = -1, last = -1;

	hist_reset(h);
	for (unsigned b = 0; b < HIST_BUCKETS; b++) {
		h->buckets[b] = buckets[b];
		h->count += buckets[b];
		if (buckets[b]) {
			first = first < 0 ? (int)b : first;
			last = (int)b;
		}
	}
	if (!h->count)
		return;
	h->sum = sum;
	h->min = hist_bucket_low((unsigned)first);
	/* A max that is not in the last bucket (unknown, or read while the
	 * kernel was between its adds) becomes that bucket's highest value. */
	h->max = hist_bucket((uint64_t)max) == (unsigned)last ? max : hist_bucket_high((unsigned)last);
}

/* 1-based nearest rank ceil(q*n), within [1, n]. The small slack keeps
 * products like 0.07*100 = 7.000000000000001 from rounding up a rank. */
static uint64_t nearest_rank(double q, uint64_t n)
{
	double r = ceil(q * (double)n - 1e-9);
	if (!(r >= 1.0)) /* also catches NaN */
		return 1;
	if (r >= (double)n)
		return n;
	return (uint64_t)r;
}

/* The first bucket whose cumulative count reaches rank (a real number, as
 * PromQL uses it); *before gets the count below that bucket. */
static unsigned bucket_at_rank(const struct hist *h, double rank, uint64_t *before)
{
	unsigned lo = hist_bucket(h->min), hi = hist_bucket(h->max);
	uint64_t cum = 0;

	for (unsigned b = lo; b < hi; b++) {
		if ((double)(cum + h->buckets[b]) >= rank && h->buckets[b]) {
			*before = cum;
			return b;
		}
		cum += h->buckets[b];
	}
	*before = cum;
	return hi;
}

/* histogram_quantile's interpolation, over the integers the bucket holds:
 * from its lowest value to its highest, in proportion to the rank's place
 * among its counts. PromQL starts at the previous bucket's `le` instead,
 * one nanosecond lower, which would make even the exact buckets inexact. */
uint64_t hist_quantile(const struct hist *h, double q)
{
	uint64_t before;
	double rank, lower, upper, v;
	unsigned b;

	if (h->count == 0)
		return 0;
	rank = (q > 0 ? (q < 1 ? q : 1) : 0) * (double)h->count;
	b = bucket_at_rank(h, rank, &before);
	lower = (double)hist_bucket_low(b);
	upper = (double)hist_bucket_high(b);
	v = h->buckets[b] ? lower + (upper - lower) * (rank - (double)before) / (double)h->buckets[b] : upper;
	if (v <= (double)h->min)
		return h->min;
	if (v >= (double)h->max)
		return h->max;
	return (uint64_t)v;
}

uint64_t hist_quantile_edge(const struct hist *h, double q)
{
	uint64_t before;
	unsigned b;

	if (h->count == 0)
		return UINT64_MAX;
	b = bucket_at_rank(h, (double)nearest_rank(q, h->count), &before);
	return b + 1 < HIST_BUCKETS ? hist_bucket_low(b + 1) : UINT64_MAX;
}

double hist_mean(const struct hist *h)
{
	return h->count ? (double)h->sum / (double)h->count : 0.0;
}

uint64_t hist_count_le(const struct hist *h, uint64_t bound)
{
	if (h->count == 0 || bound < h->min)
		return 0;
	if (bound >= h->max)
		return h->count;
	/* Whole buckets only: a bucket straddling bound is left out, so the
	 * result is exact at bucket edges and never over-counts. */
	uint64_t n = 0;
	unsigned lo = hist_bucket(h->min), last = hist_bucket(bound);
	for (unsigned b = lo; b < last; b++)
		n += h->buckets[b];
	if (hist_bucket_high(last) <= bound)
		n += h->buckets[last];
	return n;
}

/* ---- struct dist ---- */

int dist_init(struct dist *d, size_t cap)
{
	memset(d, 0, sizeof(*d));
	hist_reset(&d->hist);
	if (cap > 0) {
		d->samples = malloc(cap * sizeof(*d->samples));
		if (!d->samples)
			return -1;
	}
	d->cap = cap;
	d->sorted = 1;
	return 0;
}

void dist_free(struct dist *d)
{
	free(d->samples);
	d->samples = NULL;
	d->nsamples = d->cap = 0;
}

void dist_add(struct dist *d, uint64_t v)
{
	hist_add(&d->hist, v);
	if (d->nsamples < d->cap) {
		d->samples[d->nsamples++] = v;
		d->sorted = 0;
	}
}

int dist_is_exact(const struct dist *d)
{
	return d->hist.count <= d->cap;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

uint64_t dist_quantile(struct dist *d, double q)
{
	if (!dist_is_exact(d))
		return hist_quantile(&d->hist, q);
	if (!d->sorted) {
		qsort(d->samples, d->nsamples, sizeof(*d->samples), cmp_u64);
		d->sorted = 1;
	}
	return quantile_sorted(d->samples, d->nsamples, q);
}

/* ---- struct window ---- */

#define SLOT_EMPTY UINT64_MAX

int window_init(struct window *w, unsigned nslots, uint64_t slot_ns)
{
	memset(w, 0, sizeof(*w));
	if (nslots == 0 || slot_ns == 0)
		return -1;
	w->slots = malloc((size_t)nslots * sizeof(*w->slots));
	w->slot_start = malloc((size_t)nslots * sizeof(*w->slot_start));
	if (!w->slots || !w->slot_start) {
		window_free(w);
		return -1;
	}
	w->nslots = nslots;
	w->slot_ns = slot_ns;
	window_reset(w);
	return 0;
}

void window_free(struct window *w)
{
	free(w->slots);
	free(w->slot_start);
	w->slots = NULL;
	w->slot_start = NULL;
	w->nslots = 0;
}

void window_reset(struct window *w)
{
	for (unsigned i = 0; i < w->nslots; i++) {
		hist_reset(&w->slots[i]);
		w->slot_start[i] = SLOT_EMPTY;
	}
}

void window_add(struct window *w, uint64_t now_ns, uint64_t v)
{
	uint64_t interval = now_ns / w->slot_ns;
	unsigned s = (unsigned)(interval % w->nslots);
	if (w->slot_start[s] != interval) {
		/* A slot already holding a later interval means this value is
		 * older than the window: it no longer belongs in it. */
		if (w->slot_start[s] != SLOT_EMPTY && w->slot_start[s] > interval)
			return;
		hist_reset(&w->slots[s]);
		w->slot_start[s] = interval;
	}
	hist_add(&w->slots[s], v);
}

void window_snapshot(struct window *w, uint64_t now_ns, struct hist *out)
{
	uint64_t interval = now_ns / w->slot_ns;
	for (unsigned i = 0; i < w->nslots; i++) {
		uint64_t start = w->slot_start[i];
		if (start == SLOT_EMPTY)
			continue;
		if (start + w->nslots <= interval) { /* expired: clear it now */
			hist_reset(&w->slots[i]);
			w->slot_start[i] = SLOT_EMPTY;
			continue;
		}
		hist_merge(out, &w->slots[i]);
	}
}

uint64_t window_span_ns(const struct window *w, uint64_t now_ns)
{
	return (uint64_t)(w->nslots - 1) * w->slot_ns + now_ns % w->slot_ns;
}

/* ---- exact oracle ---- */

uint64_t quantile_sorted(const uint64_t *sorted, size_t n, double q)
{
	if (n == 0)
		return 0;
	return sorted[nearest_rank(q, n) - 1];
}
