/* sampler.c - greedy, multinomial and top-p sampling, as llama2.c run.c,
 * and llama.cpp's top-k, min-p and penalties.
 *
 * Matches run.c bit for bit (the same float operations, and the nucleus in
 * the order run.c's qsort leaves it) so that a given seed picks the same
 * tokens; top-k and min-p only mask logits, and only when asked. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "base/pool.h"
#include "engine/sampler.h"

int sampler_init(Sampler *s, int vocab_size, float temperature, float topp,
		 uint64_t seed, InferError *err)
{
	*s = (Sampler){ .vocab_size = vocab_size, .temperature = temperature, .topp = topp,
			.rng_state = seed };  /* no top-k or min-p until sampler_set_filters */
	s->probindex = pool_alloc(POOL_ACTIVATIONS, (size_t)vocab_size * sizeof(ProbIndex));
	if (!s->probindex)
		return infer_fail(err, "sampler: out of memory for %d entries", vocab_size);
	return 0;
}

int sampler_set_filters(Sampler *s, int top_k, float min_p, InferError *err)
{
	s->top_k = top_k > 0 && top_k < s->vocab_size ? top_k : 0;
	s->min_p = min_p > 0 ? min_p : 0;
	if (!s->top_k || s->kscratch)
		return 0;
	s->kscratch = pool_alloc(POOL_ACTIVATIONS, (size_t)s->vocab_size * sizeof(float));
	if (!s->kscratch)
		return infer_fail(err, "sampler: out of memory for top-k over %d entries", s->vocab_size);
	return 0;
}

void sampler_free(Sampler *s)
{
	pool_free(POOL_ACTIVATIONS, s->probindex, (size_t)s->vocab_size * sizeof(ProbIndex));
	pool_free(POOL_ACTIVATIONS, s->kscratch, (size_t)s->vocab_size * sizeof(float));
	s->probindex = NULL;
	s->kscratch = NULL;
}

int penalties_active(const Penalties *p)
{
	return p->repeat != 1.0f || p->frequency != 0.0f || p->presence != 0.0f;
}

static int int_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

void penalties_apply(const Penalties *p, const int *window, int n, int *scratch,
		     float *logits, int vocab)
{
	if (n <= 0 || !penalties_active(p))
		return;
	memcpy(scratch, window, (size_t)n * sizeof(int));
	qsort(scratch, (size_t)n, sizeof(int), int_cmp);
	for (int i = 0; i < n;) {
		int id = scratch[i], c = 0;

		while (i < n && scratch[i] == id) {
			i++;
			c++;
		}
		if (id < 0 || id >= vocab)
			continue;
		if (logits[id] <= 0)
			logits[id] *= p->repeat;
		else
			logits[id] /= p->repeat;
		logits[id] -= (float)c * p->frequency + p->presence;
	}
}

uint32_t sampler_random_u32(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

float sampler_random_f32(uint64_t *state)
{
	return (sampler_random_u32(state) >> 8) / 16777216.0f;
}

static int argmax_serial(const float *p, int n)
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

typedef float v8f __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));

/* Lanes l and 8 + l of a 16-lane scan, as two 8-lane vectors: GCC turns
 * a 16-lane compare on AVX2 into a compare and a move per lane, through
 * the stack, which made the scan a tenth of a 15M-shape Q8_0 serving
 * step; 8 lanes are one instruction on every level. */
typedef struct {
	v8f m;
	v8i at;
} ArgmaxLanes;

static inline __attribute__((always_inline)) void
argmax_lanes_step(ArgmaxLanes *a, const float *p, const v8i *idx)
{
	v8f v;
	v8i gt;

	memcpy(&v, p, sizeof(v));
	gt = v > a->m;
	a->m = (v8f)(((v8i)v & gt) | ((v8i)a->m & ~gt));
	a->at = (*idx & gt) | (a->at & ~gt);
}

/* argmax_serial's answer, 16 lanes at a time: each lane keeps its largest
 * value and where it first saw it, then the first of the lanes' maxima wins.
 * ~13x faster on the 32000-entry vocabulary (37 us a token, serial), which
 * the serving engine pays once per sequence per step. A NaN never wins, as
 * in the serial scan, unless it is first: then the serial scan answers. */
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
static int sample_argmax(const float *p, int n)
{
	v8i idx = { 0, 1, 2, 3, 4, 5, 6, 7 };
	ArgmaxLanes lo = { .at = idx }, hi = { .at = idx + 8 };
	float mv[16];
	int at[16], i, best = 0;

	if (n < 16)
		return argmax_serial(p, n);
	memcpy(&lo.m, p, sizeof(lo.m));
	memcpy(&hi.m, p + 8, sizeof(hi.m));
	for (int l = 0; l < 16; l++)
		if (p[l] != p[l]) /* a NaN lane would never be replaced */
			return argmax_serial(p, n);
	for (i = 16; i + 16 <= n; i += 16) {
		v8i idx_hi;

		idx += 16;
		idx_hi = idx + 8;
		argmax_lanes_step(&lo, p + i, &idx);
		argmax_lanes_step(&hi, p + i + 8, &idx_hi);
	}
	memcpy(mv, &lo.m, sizeof(lo.m));
	memcpy(mv + 8, &hi.m, sizeof(hi.m));
	memcpy(at, &lo.at, sizeof(lo.at));
	memcpy(at + 8, &hi.at, sizeof(hi.at));
	for (int l = 1; l < 16; l++)
		if (mv[l] > mv[best] || (mv[l] == mv[best] && at[l] < at[best]))
			best = l;
	best = at[best];
	for (; i < n; i++)
		if (p[i] > p[best])
			best = i;
	return best;
}

/* The largest of x, 8 lanes at a time: the same value as run.c's scan,
 * which skips NaNs unless x[0] is one (then NaN). Lanes start at -inf,
 * which a NaN never replaces. (+0 and -0 may come out either way: x - max
 * is the same for every x but -0, and exp of either zero is 1.) */
__attribute__((target_clones("arch=x86-64-v3", "default")))
static float max_of(const float *x, int n)
{
	v8f m = { -INFINITY, -INFINITY, -INFINITY, -INFINITY,
		  -INFINITY, -INFINITY, -INFINITY, -INFINITY };
	float lanes[8], best = x[0];
	int i = 0;

	if (best != best)
		return best;
	for (; i + 8 <= n; i += 8) {
		v8f v;
		v8i gt;

		memcpy(&v, x + i, sizeof(v));
		gt = v > m;
		m = (v8f)(((v8i)v & gt) | ((v8i)m & ~gt));
	}
	memcpy(lanes, &m, sizeof(lanes));
	for (int l = 0; l < 8; l++)
		if (lanes[l] > best)
			best = lanes[l];
	for (; i < n; i++)
		if (x[i] > best)
			best = x[i];
	return best;
}

/* x[i] /= d for every i, 8 lanes at a time: a division is exact lane by
 * lane, so every quotient is the scalar loop's. */
__attribute__((target_clones("arch=x86-64-v3", "default")))
static void divide_all(float *x, int n, float d)
{
	int i = 0;

	for (; i + 8 <= n; i += 8) {
		v8f v;

		memcpy(&v, x + i, sizeof(v));
		v = v / d;
		memcpy(x + i, &v, sizeof(v));
	}
	for (; i < n; i++)
		x[i] /= d;
}

/* softmax with its maximum already known. The sum stays one serial chain
 * in run.c's order and expf stays glibc's, so a seed draws run.c's tokens;
 * the passes around it are vectorized (max_of, divide_all). */
static void softmax_from(float *x, int size, float max_val)
{
	float sum = 0.0f;

	for (int i = 0; i < size; i++) {
		x[i] = expf(x[i] - max_val);
		sum += x[i];
	}
	divide_all(x, size, sum);
}

void softmax(float *x, int size)
{
	softmax_from(x, size, max_of(x, size));
}

static int sample_mult(const float *p, int n, float coin)
{
	float cdf = 0.0f;

	for (int i = 0; i < n; i++) {
		cdf += p[i];
		if (coin < cdf)
			return i;
	}
	return n - 1; /* rounding */
}

/* Whether a comes before b in the nucleus: higher probability first, and
 * among equals the lower index, the order run.c's qsort leaves them in
 * (glibc's is a stable merge sort, and the candidates arrive by index). A
 * total order: every sort gives the same sequence. */
static inline int ranks_before(const ProbIndex *a, const ProbIndex *b)
{
	return a->prob > b->prob || (a->prob == b->prob && a->index < b->index);
}

static void sift_down(ProbIndex *h, int n, int i)
{
	for (;;) {
		int c = 2 * i + 1;
		ProbIndex t;

		if (c >= n)
			return;
		if (c + 1 < n && ranks_before(&h[c + 1], &h[c]))
			c++;
		if (!ranks_before(&h[c], &h[i]))
			return;
		t = h[i];
		h[i] = h[c];
		h[c] = t;
		i = c;
	}
}

/* Takes the first of the n candidates left in heap h out, into h[n - 1]. */
static void heap_pop(ProbIndex *h, int n)
{
	ProbIndex t = h[0];

	h[0] = h[n - 1];
	h[n - 1] = t;
	sift_down(h, n - 1, 0);
}

/* run.c's top-p: sort the candidates, keep the shortest prefix whose
 * probabilities sum past topp, draw in it. Only that prefix needs its
 * order, so the candidates are a heap popped until the sum passes: the
 * same prefix and sums as the full sort (ranks_before), without sorting
 * the thousands a flat distribution leaves above the cutoff. Popped
 * candidates collect at the heap's end, the first at pi[n0 - 1]. */
static int sample_topp(const float *p, int n, float topp, ProbIndex *pi, float coin)
{
	/* tokens below cutoff cannot be in the nucleus: skip sorting them */
	const float cutoff = (1.0f - topp) / (n - 1);
	float cumulative = 0.0f, r, cdf = 0.0f;
	int n0 = 0, kept = 0;

	for (int i = 0; i < n; i++)
		if (p[i] >= cutoff) {
			pi[n0].index = i;
			pi[n0].prob = p[i];
			n0++;
		}
	/* No candidate: n == 1 (the cutoff divides by zero), a top-p below
	 * ~1/n on a flat distribution, or NaN probabilities. run.c then reads
	 * before its array; the most likely token is the sane answer. */
	if (n0 == 0)
		return argmax_serial(p, n);
	for (int i = n0 / 2 - 1; i >= 0; i--)
		sift_down(pi, n0, i);
	while (kept < n0) {
		heap_pop(pi, n0 - kept);
		cumulative += pi[n0 - 1 - kept].prob;
		kept++;
		if (cumulative > topp)
			break;
	}
	r = coin * cumulative;
	for (int i = 0; i < kept; i++) {
		cdf += pi[n0 - 1 - i].prob;
		if (r < cdf)
			return pi[n0 - 1 - i].index;
	}
	return pi[n0 - kept].index;
}

float log_sum_exp(const float *x, int n)
{
	float m = max_of(x, n), sum = 0.0f;

	if (!isfinite(m))
		return m;
	for (int i = 0; i < n; i++)
		sum += expf(x[i] - m);
	return m + logf(sum);
}

/* An insertion into the k best so far: a scan of 32000 logits for 20
 * alternatives moves few, as most fall below the k-th at once. */
int top_ids(const float *x, int n, int k, int *ids)
{
	int have = 0;

	if (k > n)
		k = n;
	for (int i = 0; i < n && k > 0; i++) {
		int at;

		if (have == k && !(x[i] > x[ids[k - 1]]))
			continue;
		at = have < k ? have++ : k - 1;
		while (at > 0 && x[i] > x[ids[at - 1]]) {
			ids[at] = ids[at - 1];
			at--;
		}
		ids[at] = i;
	}
	return k > 0 ? have : 0;
}

/* The k-th largest of x[0..n), 0 < k < n, by quickselect on a copy. */
static float kth_largest(const float *x, int n, int k, float *a)
{
	int lo = 0, hi = n - 1, want = k - 1;

	memcpy(a, x, (size_t)n * sizeof(float));
	while (lo < hi) {
		float pivot = a[lo + (hi - lo) / 2];
		int i = lo, j = hi;

		while (i <= j) {
			while (a[i] > pivot)
				i++;
			while (a[j] < pivot)
				j--;
			if (i <= j) {
				float t = a[i];

				a[i++] = a[j];
				a[j--] = t;
			}
		}
		if (want <= j)
			hi = j;
		else if (want >= i)
			lo = i;
		else
			break;
	}
	return a[want];
}

/* top-k, then min-p (in logits: p_i >= min_p * p_max is l_i >= l_max +
 * log min_p): the tokens left out get -inf, which softmax makes 0. */
static void mask_filters(Sampler *s, float *logits)
{
	float floor = -INFINITY;
	int n = s->vocab_size;

	if (s->top_k)
		floor = kth_largest(logits, n, s->top_k, s->kscratch);
	if (s->min_p > 0) {
		float m = max_of(logits, n) + logf(s->min_p);

		if (m > floor)
			floor = m;
	}
	for (int i = 0; i < n; i++)
		if (logits[i] < floor)
			logits[i] = -INFINITY;
}

int sampler_sample(Sampler *s, float *logits)
{
	float coin;

	if (s->temperature == 0.0f)
		return sample_argmax(logits, s->vocab_size);
	if (s->top_k || s->min_p > 0)
		mask_filters(s, logits);
	divide_all(logits, s->vocab_size, s->temperature);
	softmax(logits, s->vocab_size);
	coin = sampler_random_f32(&s->rng_state);
	if (s->topp <= 0 || s->topp >= 1)
		return sample_mult(logits, s->vocab_size, coin);
	return sample_topp(logits, s->vocab_size, s->topp, s->probindex, coin);
}
