/* test_sampler.c - greedy sampling picks what run.c's serial argmax picks:
 * the first index of the largest logit, NaNs never winning unless first,
 * -0 equal to +0, on widths that are and are not multiples of the vector
 * width the fast path uses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "sampler.h"

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
	free(p);
	return check_report();
}
