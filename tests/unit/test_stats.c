/* test_stats.c - the statistics module against a sorted-array oracle.
 * Prints each check; exits non-zero on the first failure. */
#include "analysis/stats.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
	/* xorshift64*: deterministic, good enough for test data */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static double rng_unit(void)
{
	return (double)(rng_next() >> 11) / 9007199254740992.0; /* [0,1) */
}

enum shape { UNIFORM_SMALL, UNIFORM_LARGE, EXPONENTIAL, LOGNORMAL, BIMODAL, CONSTANT, HUGE_VALUES, SHAPE_COUNT };
static const char *shape_names[] = {
	"uniform[0,100)", "uniform[0,1e9)", "exponential(mean 50us)", "lognormal",
	"bimodal(1us|1ms)", "constant 4242", "huge (near 2^64)",
};

static uint64_t draw(enum shape s)
{
	switch (s) {
	case UNIFORM_SMALL: return rng_next() % 100;
	case UNIFORM_LARGE: return rng_next() % 1000000000ull;
	case EXPONENTIAL: return (uint64_t)(-log(1.0 - rng_unit()) * 50000.0);
	case LOGNORMAL: {
		double u1 = rng_unit() + 1e-12, u2 = rng_unit();
		double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
		return (uint64_t)exp(10.0 + 2.0 * z);
	}
	case BIMODAL: return rng_next() & 1 ? 1000 + rng_next() % 100 : 1000000 + rng_next() % 10000;
	case CONSTANT: return 4242;
	case HUGE_VALUES: return UINT64_MAX - rng_next() % 1000000000000ull;
	default: return 0;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static const double qs[] = { 0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0 };
#define NQ (sizeof(qs) / sizeof(qs[0]))

/* |got - want| within 2^-HIST_SUB_BITS of want (exact below 2^HIST_SUB_BITS). */
static int within_bound(uint64_t got, uint64_t want)
{
	uint64_t diff = got > want ? got - want : want - got;
	if (want < (1u << HIST_SUB_BITS))
		return diff == 0;
	return (long double)diff <= (long double)want / (1u << HIST_SUB_BITS);
}

static void test_quantile_sorted(void)
{
	uint64_t a[] = { 10, 20, 30, 40, 50, 60, 70, 80, 90, 100 };
	printf("quantile_sorted: nearest rank on 10 values\n");
	CHECK(quantile_sorted(a, 10, 0.0) == 10, "q0");
	CHECK(quantile_sorted(a, 10, 0.1) == 10, "q0.1 -> index 0");
	CHECK(quantile_sorted(a, 10, 0.11) == 20, "q0.11 -> index 1");
	CHECK(quantile_sorted(a, 10, 0.5) == 50, "q0.5 -> index 4");
	CHECK(quantile_sorted(a, 10, 0.95) == 100, "q0.95 -> index 9");
	CHECK(quantile_sorted(a, 10, 1.0) == 100, "q1");
	CHECK(quantile_sorted(a, 0, 0.5) == 0, "empty");
	/* 0.07*100 is 7.000000000000001 in doubles: rank must stay 7 */
	uint64_t b[100];
	for (int i = 0; i < 100; i++)
		b[i] = (uint64_t)i + 1;
	CHECK(quantile_sorted(b, 100, 0.07) == 7, "q0.07 of 1..100 = %" PRIu64, quantile_sorted(b, 100, 0.07));
	CHECK(quantile_sorted(b, 100, 0.99) == 99, "q0.99 of 1..100");
}

/* Every shape: struct dist exact under its cap, struct hist (and struct dist past its cap) within
 * the relative error bound, min/max/mean exact. */
static void test_against_oracle(void)
{
	enum { N = 20000, CAP = 5000 };
	uint64_t *vals = malloc(N * sizeof(*vals));
	uint64_t *sorted = malloc(N * sizeof(*sorted));
	struct hist *h = malloc(sizeof(*h));
	if (!vals || !sorted || !h) {
		CHECK(0, "out of memory");
		return;
	}
	for (int s = 0; s < SHAPE_COUNT; s++) {
		struct dist exact, capped;
		CHECK(dist_init(&exact, N) == 0, "dist_init");
		CHECK(dist_init(&capped, CAP) == 0, "dist_init");
		hist_reset(h);
		long double sum = 0;
		for (int i = 0; i < N; i++) {
			vals[i] = draw((enum shape)s);
			hist_add(h, vals[i]);
			dist_add(&exact, vals[i]);
			dist_add(&capped, vals[i]);
			sum += vals[i];
		}
		memcpy(sorted, vals, N * sizeof(*vals));
		qsort(sorted, N, sizeof(*sorted), cmp_u64);
		printf("oracle %-24s n=%d: dist exact, hist within 2^-%d\n", shape_names[s], N, HIST_SUB_BITS);
		CHECK(dist_is_exact(&exact), "dist with cap N is exact");
		CHECK(!dist_is_exact(&capped), "dist past its cap is not exact");
		CHECK(h->count == N && h->min == sorted[0] && h->max == sorted[N - 1], "count/min/max");
		if (s != HUGE_VALUES) /* the u64 sum wraps there by design */
			CHECK(fabsl((long double)hist_mean(h) - sum / N) <= 1e-6L * (sum / N) + 1e-9L, "mean");
		for (size_t i = 0; i < NQ; i++) {
			uint64_t want = quantile_sorted(sorted, N, qs[i]);
			uint64_t d = dist_quantile(&exact, qs[i]);
			uint64_t hq = hist_quantile(h, qs[i]);
			uint64_t c = dist_quantile(&capped, qs[i]);
			CHECK(d == want, "%s q%.3f: dist %" PRIu64 " != oracle %" PRIu64, shape_names[s], qs[i], d, want);
			CHECK(within_bound(hq, want), "%s q%.3f: hist %" PRIu64 " vs oracle %" PRIu64, shape_names[s], qs[i], hq, want);
			CHECK(c == hq, "%s q%.3f: capped dist uses the histogram", shape_names[s], qs[i]);
		}
		CHECK(hist_quantile(h, 0.0) == sorted[0] && hist_quantile(h, 1.0) == sorted[N - 1], "hist exact at q0/q1");
		/* adding after a quantile read must re-sort */
		dist_add(&exact, 0);
		CHECK(dist_is_exact(&exact) == 0 || dist_quantile(&exact, 0.0) == 0, "add after read");
		dist_free(&exact);
		dist_free(&capped);
	}
	free(vals);
	free(sorted);
	free(h);
}

static void test_edges(void)
{
	struct hist h;
	printf("edges: empty, one value, zero, 2^64-1, bucket boundaries\n");
	hist_reset(&h);
	CHECK(hist_quantile(&h, 0.5) == 0 && hist_mean(&h) == 0 && hist_count_le(&h, 100) == 0, "empty hist");
	CHECK(h.min == 0 && h.max == 0, "empty hist min/max read 0");
	hist_add(&h, 0);
	CHECK(hist_quantile(&h, 0.0) == 0 && hist_quantile(&h, 0.5) == 0 && hist_quantile(&h, 1) == 0, "single 0");
	hist_reset(&h);
	hist_add(&h, UINT64_MAX);
	CHECK(hist_quantile(&h, 0.5) == UINT64_MAX && h.min == UINT64_MAX, "single 2^64-1");
	CHECK(hist_count_le(&h, UINT64_MAX - 1) == 0 && hist_count_le(&h, UINT64_MAX) == 1, "count_le at 2^64-1");
	hist_add(&h, 0);
	hist_add(&h, 1ull << 63);
	CHECK(within_bound(hist_quantile(&h, 0.5), 1ull << 63), "median of {0, 2^63, 2^64-1} = %" PRIu64, hist_quantile(&h, 0.5));
	/* every power of two and its neighbours land in a bucket whose read-back is in bound */
	for (int bit = 0; bit < 64; bit++) {
		uint64_t vs[3] = { (1ull << bit) - 1, 1ull << bit, (1ull << bit) + 1 };
		for (int k = 0; k < 3; k++) {
			hist_reset(&h);
			hist_add(&h, 0);
			hist_add(&h, vs[k]);
			hist_add(&h, vs[k]);
			hist_add(&h, UINT64_MAX);
			/* rank 2 of 4 is not min or max: read back from the bucket */
			uint64_t got = hist_quantile(&h, 0.5);
			CHECK(within_bound(got, vs[k]), "2^%d%+d: got %" PRIu64, bit, k - 1, got);
		}
	}
	struct dist d;
	CHECK(dist_init(&d, 0) == 0, "dist cap 0");
	CHECK(dist_quantile(&d, 0.5) == 0 && dist_is_exact(&d), "empty dist");
	dist_add(&d, 77);
	CHECK(!dist_is_exact(&d) && dist_quantile(&d, 0.5) == 77, "cap-0 dist falls back to hist");
	dist_free(&d);
	CHECK(dist_init(&d, 4) == 0, "dist cap 4");
	dist_add(&d, 5);
	CHECK(dist_quantile(&d, 0.99) == 5 && dist_is_exact(&d), "one value");
	dist_free(&d);
}

static void test_count_le(void)
{
	enum { N = 10000 };
	uint64_t *v = malloc(N * sizeof(*v));
	struct hist *h = malloc(sizeof(*h));
	if (!v || !h) {
		CHECK(0, "out of memory");
		return;
	}
	printf("count_le: exact below 2^%d and at bucket edges, never over, monotone\n", HIST_SUB_BITS);
	hist_reset(h);
	for (int i = 0; i < N; i++) {
		v[i] = draw(EXPONENTIAL);
		hist_add(h, v[i]);
	}
	qsort(v, N, sizeof(*v), cmp_u64);
	uint64_t prev = 0;
	for (uint64_t bound = 0; bound < 2000000; bound = bound < 200 ? bound + 1 : bound * 11 / 10) {
		uint64_t truth = 0;
		while (truth < N && v[truth] <= bound)
			truth++;
		uint64_t got = hist_count_le(h, bound);
		CHECK(got <= truth, "le %" PRIu64 ": %" PRIu64 " > truth %" PRIu64, bound, got, truth);
		CHECK(got >= prev, "le %" PRIu64 ": not monotone", bound);
		if (bound < (1u << HIST_SUB_BITS))
			CHECK(got == truth, "le %" PRIu64 " exact small: %" PRIu64 " vs %" PRIu64, bound, got, truth);
		prev = got;
	}
	/* at a bucket's last value (2^k - 1 for k > HIST_SUB_BITS) it is exact */
	for (int k = HIST_SUB_BITS + 1; k < 22; k++) {
		uint64_t bound = (1ull << k) - 1, truth = 0;
		while (truth < N && v[truth] <= bound)
			truth++;
		CHECK(hist_count_le(h, bound) == truth, "le 2^%d-1 exact", k);
	}
	CHECK(hist_count_le(h, v[N - 1]) == N, "le max = count");
	CHECK(hist_count_le(h, UINT64_MAX) == N, "le 2^64-1 = count");
	free(v);
	free(h);
}

static void test_merge(void)
{
	struct hist *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b)), *all = malloc(sizeof(*all));
	if (!a || !b || !all) {
		CHECK(0, "out of memory");
		return;
	}
	printf("merge: two halves merge to the histogram of the whole\n");
	hist_reset(a);
	hist_reset(b);
	hist_reset(all);
	for (int i = 0; i < 5000; i++) {
		uint64_t x = draw(LOGNORMAL), y = draw(BIMODAL);
		hist_add(a, x);
		hist_add(b, y);
		hist_add(all, x);
		hist_add(all, y);
	}
	struct hist *empty = malloc(sizeof(*empty));
	if (!empty) {
		CHECK(0, "out of memory");
		return;
	}
	hist_reset(empty);
	hist_merge(empty, a);
	hist_merge(empty, b);
	CHECK(memcmp(empty, all, sizeof(*all)) == 0, "merge(empty, a, b) == hist of all");
	hist_merge(a, b);
	CHECK(memcmp(a, all, sizeof(*all)) == 0, "merge(a, b) == hist of all");
	hist_reset(b);
	hist_merge(a, b);
	CHECK(memcmp(a, all, sizeof(*all)) == 0, "merging an empty hist changes nothing");
	free(a);
	free(b);
	free(all);
	free(empty);
}

static void test_window(void)
{
	const uint64_t S = 1000000000ull; /* 1 s slots */
	struct window w;
	struct hist *snap = malloc(sizeof(*snap));
	if (!snap) {
		CHECK(0, "out of memory");
		return;
	}
	printf("window: 5 slots of 1 s; values expire after the window; reset\n");
	CHECK(window_init(&w, 0, S) == -1, "0 slots rejected");
	CHECK(window_init(&w, 5, S) == 0, "window_init");
	/* t = 0.5 s .. 9.5 s: at second k add k+1 values of k*100 */
	for (uint64_t k = 0; k < 10; k++)
		for (uint64_t i = 0; i <= k; i++)
			window_add(&w, k * S + S / 2, k * 100);
	hist_reset(snap);
	window_snapshot(&w, 9 * S + S / 2, snap);
	/* window at 9.5 s holds seconds 5..9: 6+7+8+9+10 values */
	CHECK(snap->count == 40, "count in window %" PRIu64 " == 40", snap->count);
	CHECK(snap->min == 500 && snap->max == 900, "oldest kept is second 5");
	CHECK(window_span_ns(&w, 9 * S + S / 2) == 4 * S + S / 2, "span 4.5 s");
	/* a value older than the window is not kept */
	window_add(&w, 1 * S, 1);
	hist_reset(snap);
	window_snapshot(&w, 9 * S + S / 2, snap);
	CHECK(snap->count == 40 && snap->min == 500, "late value dropped");
	/* 2 s later seconds 5 and 6 have left */
	hist_reset(snap);
	window_snapshot(&w, 11 * S + 1, snap);
	CHECK(snap->count == 8 + 9 + 10, "after 2 s: %" PRIu64 " == 27", snap->count);
	CHECK(snap->min == 700, "min now second 7");
	/* long idle: everything expires */
	hist_reset(snap);
	window_snapshot(&w, 100 * S, snap);
	CHECK(snap->count == 0, "all expired after idle");
	/* snapshot merges into out without resetting it: two windows combine */
	struct window w2;
	CHECK(window_init(&w2, 5, S) == 0, "window_init 2");
	window_add(&w, 100 * S, 10);
	window_add(&w2, 100 * S, 20);
	hist_reset(snap);
	window_snapshot(&w, 100 * S, snap);
	window_snapshot(&w2, 100 * S, snap);
	CHECK(snap->count == 2 && snap->min == 10 && snap->max == 20, "two windows merged");
	window_reset(&w);
	hist_reset(snap);
	window_snapshot(&w, 100 * S, snap);
	CHECK(snap->count == 0, "reset empties the window");
	window_free(&w);
	window_free(&w2);
	free(snap);
}

/* Prometheus' bucketQuantile over (le, cumulative count) pairs, the last
 * one +Inf: what histogram_quantile() computes for one series. */
static double promql_quantile(const double *le, const double *cum, int n, double q)
{
	double rank = q * cum[n - 1], start = 0, count, r;
	int b = 0;

	while (b < n - 1 && cum[b] < rank)
		b++;
	if (b == n - 1)
		return le[n - 2];
	count = cum[b];
	r = rank;
	if (b > 0) {
		start = le[b - 1];
		count -= cum[b - 1];
		r -= cum[b - 1];
	}
	return start + (le[b] - start) * (r / count);
}

/* The buckets prom.c exposes for one series: from the edge below the first
 * non-empty bucket to the last one, then +Inf. */
static int exposed(const struct hist *h, double *le, double *cum)
{
	int first = -1, last = -1, n = 0;
	double c = 0;

	for (int b = 0; b < (int)HIST_BUCKETS; b++)
		if (h->buckets[b]) {
			first = first < 0 ? b : first;
			last = b;
		}
	for (int b = 0; b <= last; b++) {
		c += (double)h->buckets[b];
		if (b >= first - 1) {
			le[n] = (double)hist_bucket_high((unsigned)b);
			cum[n++] = c;
		}
	}
	le[n] = INFINITY;
	cum[n++] = c;
	return n;
}

/* hist_quantile reads what PromQL reads from the exposed buckets, within
 * 1 ns (it interpolates over the bucket's integers) once both are kept
 * within the exact min and max. */
static void test_promql_agreement(void)
{
	static double le[HIST_BUCKETS + 2], cum[HIST_BUCKETS + 2];
	struct hist *h = malloc(sizeof(*h));
	int worst_shape = -1;
	double worst = 0;

	if (!h) {
		CHECK(0, "out of memory");
		return;
	}
	printf("promql: hist_quantile = histogram_quantile over the exposed buckets, +-1 ns\n");
	for (int s = 0; s < SHAPE_COUNT; s++) {
		if (s == HUGE_VALUES)
			continue; /* doubles cannot tell 1 ns apart near 2^64 */
		for (int n = 1; n <= 4096; n *= 8) {
			hist_reset(h);
			for (int i = 0; i < n; i++)
				hist_add(h, draw((enum shape)s));
			int ne = exposed(h, le, cum);
			for (size_t i = 1; i < NQ; i++) { /* q = 0 has no rank for PromQL */
				double p = promql_quantile(le, cum, ne, qs[i]);
				p = p < (double)h->min ? (double)h->min : p > (double)h->max ? (double)h->max : p;
				double d = fabs((double)hist_quantile(h, qs[i]) - p);
				if (d > worst) {
					worst = d;
					worst_shape = s;
				}
				CHECK(d <= 1.0 + 1e-9 * p, "%s n=%d q%.3f: hist %" PRIu64 " vs promql %.1f",
				      shape_names[s], n, qs[i], hist_quantile(h, qs[i]), p);
			}
		}
	}
	printf("  largest difference %.3f ns (%s)\n", worst, worst_shape >= 0 ? shape_names[worst_shape] : "-");
	free(h);
}

/* hist_load keeps the kernel's counts; hist_quantile_edge bounds the tail. */
static void test_load_and_edge(void)
{
	struct hist *h = malloc(sizeof(*h)), *k = malloc(sizeof(*k));

	if (!h || !k) {
		CHECK(0, "out of memory");
		return;
	}
	printf("load/edge: kernel counts read back alike; at most (1-q) at or above the edge\n");
	hist_reset(h);
	for (int i = 0; i < 1000; i++)
		hist_add(h, draw(LOGNORMAL));
	hist_load(k, h->buckets, h->sum, h->max);
	CHECK(k->count == h->count && k->sum == h->sum && k->max == h->max, "count/sum/max kept");
	CHECK(k->min <= h->min && hist_bucket(k->min) == hist_bucket(h->min), "min: its bucket's lowest value");
	for (size_t i = 0; i < NQ; i++)
		CHECK(within_bound(hist_quantile(k, qs[i]), hist_quantile(h, qs[i])), "loaded q%.3f", qs[i]);
	hist_load(k, h->buckets, h->sum, 0);
	CHECK(hist_bucket(k->max) == hist_bucket(h->max), "unknown max: the last bucket's highest value");
	for (double q = 0.5; q < 1; q += 0.05) {
		uint64_t edge = hist_quantile_edge(h, q), at_or_above = h->count - hist_count_le(h, edge - 1);
		CHECK(at_or_above <= h->count - (uint64_t)ceil(q * h->count - 1e-9),
		      "q%.2f: %" PRIu64 " at or above edge %" PRIu64, q, at_or_above, edge);
		CHECK(hist_count_le(h, edge - 1) == h->count - at_or_above, "edge - 1 ends a bucket");
	}
	hist_reset(k);
	CHECK(hist_quantile_edge(k, 0.9) == UINT64_MAX, "empty: nothing is slow");
	free(h);
	free(k);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void bench_hist_add(void)
{
	enum { N = 1 << 16, ROUNDS = 300 };
	uint64_t *v = malloc(N * sizeof(*v));
	struct hist *h = malloc(sizeof(*h));
	if (!v || !h) {
		CHECK(0, "out of memory");
		return;
	}
	for (int i = 0; i < N; i++)
		v[i] = draw(LOGNORMAL);
	hist_reset(h);
	double t0 = now_s();
	for (int r = 0; r < ROUNDS; r++)
		for (int i = 0; i < N; i++)
			hist_add(h, v[i]);
	double dt = now_s() - t0;
	CHECK(h->count == (uint64_t)N * ROUNDS, "bench count");
	printf("bench: hist_add %.2f ns/op (%d ops, lognormal values)\n", dt * 1e9 / ((double)N * ROUNDS), N * ROUNDS);
	free(v);
	free(h);
}

int main(void)
{
	test_quantile_sorted();
	test_against_oracle();
	test_edges();
	test_count_le();
	test_merge();
	test_window();
	test_promql_agreement();
	test_load_and_edge();
	bench_hist_add();
	if (failures) {
		printf("%d check(s) failed\n", failures);
		return 1;
	}
	printf("all stats checks passed\n");
	return 0;
}
