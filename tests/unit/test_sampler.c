/* test_sampler.c - sampling picks what run.c picks.
 *
 * Greedy: run.c's serial argmax, the first index of the largest logit,
 * NaNs never winning unless first, -0 equal to +0, on widths that are and
 * are not multiples of the vector width the fast path uses.
 * At a temperature: run.c's scalar loops, softmax and qsort'ed top-p, with
 * the same seed, draw the same tokens and leave the same probabilities,
 * though the sampler vectorizes its passes and sorts only the nucleus.
 * top-k and min-p draw only the tokens they keep, all of them, ties at the
 * k-th kept; llama.cpp's penalties change exactly the window's tokens. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "engine/sampler.h"

/* run.c's argmax, the reference. */
static int reference_argmax(const float *p, int n)
{
	int max_i = 0;
	float max_p = p[0];

	for (int i = 1; i < n; i++)
		if (p[i] > max_p) {
			max_i = i;
			max_p = p[i];
		}
	return max_i;
}

/* Greedy sampling of a copy of p (sampler_sample may modify its input). */
static int greedy(const float *p, int n)
{
	Sampler s;
	InferError err;
	float *copy = malloc((size_t)n * sizeof(float));
	int id = -1;

	if (!copy || sampler_init(&s, n, 0.0f, 0.9f, 1, &err) != 0) {
		free(copy);
		return -2;
	}
	memcpy(copy, p, (size_t)n * sizeof(float));
	id = sampler_sample(&s, copy);
	sampler_free(&s);
	free(copy);
	return id;
}

static void expect_same(const float *p, int n, const char *what)
{
	int want = reference_argmax(p, n), got = greedy(p, n);

	CHECK(got == want, "%s (n=%d): argmax %d, run.c's %d", what, n, got, want);
}

/* Logits from few distinct values, so ties are common. */
static void fill_coarse(float *p, int n, unsigned *seed)
{
	for (int i = 0; i < n; i++)
		p[i] = (float)(rand_r(seed) % 64) - 32.0f;
}

/* run.c's sampling at a temperature, the reference. */
typedef struct {
	float prob;
	int index;
} RefProb;

static int ref_compare(const void *a, const void *b)
{
	const RefProb *x = a, *y = b;

	return x->prob > y->prob ? -1 : x->prob < y->prob ? 1 : 0;
}

static int reference_sample(float *x, int n, float temperature, float topp, float coin,
			    RefProb *pi)
{
	float max_val, sum = 0.0f, cdf = 0.0f, cumulative = 0.0f, r;
	int n0 = 0, last;

	for (int i = 0; i < n; i++)
		x[i] /= temperature;
	max_val = x[0];
	for (int i = 1; i < n; i++)
		if (x[i] > max_val)
			max_val = x[i];
	for (int i = 0; i < n; i++) {
		x[i] = expf(x[i] - max_val);
		sum += x[i];
	}
	for (int i = 0; i < n; i++)
		x[i] /= sum;
	if (topp <= 0 || topp >= 1) {
		for (int i = 0; i < n; i++) {
			cdf += x[i];
			if (coin < cdf)
				return i;
		}
		return n - 1;
	}
	for (int i = 0; i < n; i++)
		if (x[i] >= (1.0f - topp) / (n - 1))
			pi[n0++] = (RefProb){ x[i], i };
	if (n0 == 0)
		return reference_argmax(x, n);
	qsort(pi, (size_t)n0, sizeof(*pi), ref_compare);
	last = n0 - 1;
	for (int i = 0; i < n0; i++) {
		cumulative += pi[i].prob;
		if (cumulative > topp) {
			last = i;
			break;
		}
	}
	r = coin * cumulative;
	for (int i = 0; i <= last; i++) {
		cdf += pi[i].prob;
		if (r < cdf)
			return pi[i].index;
	}
	return pi[last].index;
}

/* Three draws from one seed by both, each from a fresh copy of p. */
static void expect_same_draws(const float *p, int n, float temperature, float topp,
			      const char *what)
{
	Sampler s;
	InferError err;
	uint64_t rng = 42;
	float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
	RefProb *pi = malloc((size_t)n * sizeof(RefProb));

	if (!a || !b || !pi || sampler_init(&s, n, temperature, topp, 42, &err) != 0) {
		CHECK(0, "%s: out of memory", what);
		goto out;
	}
	for (int draw = 0; draw < 3; draw++) {
		int want, got;

		memcpy(a, p, (size_t)n * sizeof(float));
		memcpy(b, p, (size_t)n * sizeof(float));
		want = reference_sample(a, n, temperature, topp, sampler_random_f32(&rng), pi);
		got = sampler_sample(&s, b);
		CHECK(got == want, "%s (n=%d, t=%g, top-p %g): drew %d, run.c %d", what, n,
		      temperature, topp, got, want);
		CHECK(memcmp(a, b, (size_t)n * sizeof(float)) == 0,
		      "%s (n=%d, t=%g, top-p %g): probabilities differ from run.c's", what, n,
		      temperature, topp);
	}
	sampler_free(&s);
out:
	free(a);
	free(b);
	free(pi);
}

static void check_draws(float *p, int n, unsigned *seed)
{
	static const float temps[] = { 1.0f, 0.8f, 0.05f, 1.7f };
	static const float topps[] = { 1.0f, 0.9f, 0.5f, 0.99f, 0.0f, 1e-6f };

	for (size_t t = 0; t < sizeof(temps) / sizeof(temps[0]); t++)
		for (size_t k = 0; k < sizeof(topps) / sizeof(topps[0]); k++) {
			float temp = temps[t], topp = topps[k];

			fill_coarse(p, n, seed);
			expect_same_draws(p, n, temp, topp, "ties");
			for (int i = 0; i < n; i++)
				p[i] = (float)rand_r(seed) / RAND_MAX * 20.0f - 10.0f;
			expect_same_draws(p, n, temp, topp, "spread");
			for (int i = 0; i < n; i += 3)
				p[i] = -INFINITY;
			expect_same_draws(p, n, temp, topp, "-inf");
			for (int i = 0; i < n; i++)
				p[i] = (i % 2) ? -0.0f : 0.0f;
			p[n - 1] = -1.0f; /* the largest is a zero, of either sign */
			expect_same_draws(p, n, temp, topp, "signed zeros");
			fill_coarse(p, n, seed);
			p[n / 2] = NAN;
			expect_same_draws(p, n, temp, topp, "a NaN");
			p[0] = NAN;
			expect_same_draws(p, n, temp, topp, "NaN first");
		}
}

/* Which of 6 tokens 4000 draws at temperature 1 give, as a bit set. */
static unsigned drawn(int top_k, float min_p, const float *logits)
{
	InferError err;
	Sampler s;
	unsigned seen = 0;

	if (sampler_init(&s, 6, 1.0f, 1.0f, 12345, &err) || sampler_set_filters(&s, top_k, min_p, &err)) {
		CHECK(0, "sampler: %s", err.msg);
		return 0;
	}
	for (int i = 0; i < 4000; i++) {
		float x[6];

		memcpy(x, logits, sizeof(x));
		seen |= 1u << sampler_sample(&s, x);
	}
	sampler_free(&s);
	return seen;
}

static void check_filters(void)
{
	const float l[6] = { 1.0f, 5.0f, 3.0f, 4.0f, 3.0f, 0.0f };

	CHECK(drawn(0, 0, l) == 0x3f, "no filter: all 6 drawn (%#x)", drawn(0, 0, l));
	CHECK(drawn(2, 0, l) == 0x0a, "top_k 2: tokens 1 and 3 (%#x)", drawn(2, 0, l));
	CHECK(drawn(3, 0, l) == 0x1e, "top_k 3: 1, 3 and both tied at 3.0 (%#x)", drawn(3, 0, l));
	CHECK(drawn(1, 0, l) == 0x02, "top_k 1: the largest (%#x)", drawn(1, 0, l));
	/* p >= 0.3 p_max: logit >= 5 + ln 0.3 = 3.80 */
	CHECK(drawn(0, 0.3f, l) == 0x0a, "min_p 0.3: tokens 1 and 3 (%#x)", drawn(0, 0.3f, l));
	CHECK(drawn(0, 0.1f, l) == 0x1e, "min_p 0.1: logits >= 2.70 (%#x)", drawn(0, 0.1f, l));
	CHECK(drawn(3, 0.3f, l) == 0x0a, "top_k 3 then min_p 0.3 (%#x)", drawn(3, 0.3f, l));
}

static void check_penalties(void)
{
	float l[4] = { 2.0f, -1.0f, 0.5f, 3.0f };
	const int window[5] = { 0, 0, 1, 7, -1 }; /* 7 and -1: outside the vocabulary */
	int scratch[5];
	Penalties off = { .repeat = 1.0f }, p = { .repeat = 2.0f, .frequency = 0.5f, .presence = 0.25f };

	CHECK(!penalties_active(&off) && penalties_active(&p), "active");
	penalties_apply(&off, window, 5, scratch, l, 4);
	CHECK(l[0] == 2.0f && l[1] == -1.0f, "off changes nothing");
	penalties_apply(&p, window, 5, scratch, l, 4);
	/* 2 seen twice: 2 / 2 - 2 * 0.5 - 0.25; -1 once: -1 * 2 - 0.5 - 0.25 */
	CHECK(l[0] == -0.25f, "positive logit seen twice: %g", l[0]);
	CHECK(l[1] == -2.75f, "negative logit seen once: %g", l[1]);
	CHECK(l[2] == 0.5f && l[3] == 3.0f, "unseen tokens untouched: %g %g", l[2], l[3]);
}

int main(void)
{
	static const int widths[] = { 1, 2, 15, 16, 17, 31, 32, 33, 512, 1000, 32000 };
	float *p = malloc(32000 * sizeof(float));
	unsigned seed = 7;

	if (!p)
		return 1;
	for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
		int n = widths[w];

		for (int round = 0; round < 200; round++) {
			fill_coarse(p, n, &seed);
			expect_same(p, n, "ties");
		}
		fill_coarse(p, n, &seed);
		p[n - 1] = 1000.0f;
		expect_same(p, n, "maximum last");
		p[0] = 1000.0f;
		expect_same(p, n, "maximum first and last");
		for (int i = 0; i < n; i++)
			p[i] = (i % 3) ? -0.0f : 0.0f;
		expect_same(p, n, "signed zeros");
		fill_coarse(p, n, &seed);
		p[n / 2] = NAN;
		expect_same(p, n, "NaN in the middle");
		p[0] = NAN;
		expect_same(p, n, "NaN first");
		for (int i = 0; i < n; i++)
			p[i] = -INFINITY;
		expect_same(p, n, "all -inf");
	}
	for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++)
		check_draws(p, widths[w], &seed);
	check_filters();
	check_penalties();
	free(p);
	return check_report();
}
