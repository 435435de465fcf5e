/* attention.c - the CPU backend's attention: per (query group, head) tile,
 * each query's scores against its sequence's cached keys, their softmax,
 * and the weighted sum of the values, read through the sequence's block
 * table (kvcache.h). Everything the target clones inline is in this file,
 * so each clone builds the loops for its level (arch.h).
 *
 * Batch invariance: a query sums over its own positions in order, its dot
 * products in 16 vector lanes and then the lanes in a fixed tree, so its
 * result is the same alone, in a group or in any batch. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "backend/cpu/arch.h"
#include "backend/cpu/attention.h"

/* 16 and 8 floats; loaded through memcpy, so no alignment is assumed. */
typedef float v16f __attribute__((vector_size(64)));

#define LOAD16(v, p) memcpy(&(v), (p), sizeof(v))

/* The end of every dot product: its 16 lanes in a fixed tree, then the
 * tail (widths not a multiple of 16) in order. */
static inline __attribute__((always_inline)) float
dot_finish(const v16f *acc, const float *w, const float *x, int j, int n)
{
	float t[8], s;

	for (int i = 0; i < 8; i++)
		t[i] = (*acc)[i] + (*acc)[i + 8];
	for (int i = 0; i < 4; i++)
		t[i] += t[i + 4];
	s = (t[0] + t[2]) + (t[1] + t[3]);
	for (; j < n; j++)
		s += w[j] * x[j];
	return s;
}

/* A dot product: lane j mod 16 accumulates w[j] * x[j] in order of j, then
 * dot_finish. Attention's scores; the matrices go through matmul.h. */
static inline __attribute__((always_inline)) float dot(const float *w, const float *x, int n)
{
	v16f acc = { 0 };
	int j = 0;

	for (; j + 16 <= n; j += 16) {
		v16f wv, xv;

		LOAD16(wv, w + j);
		LOAD16(xv, x + j);
		acc += wv * xv;
	}
	return dot_finish(&acc, w, x, j, n);
}

/* Where attention finds one kv head's rows in a layer: position t's row
 * starts at element blocks[t / bs] * block_stride + (t % bs) * head_size
 * of keys and of values. Either the cache's own rows, or their floats
 * converted once into a thread's scratch as one block (convert_rows). */
typedef struct {
	const void *keys, *values;
	const int *blocks;
	size_t block_stride; /* elements from a block's rows to the next block's */
	int bs;              /* positions a block */
} KvView;

/* A view's block table where its rows are one block (seq_len positions). */
static const int zero_block[1] = { 0 };

/* The cache's rows of kv head h in layer l, for token b's sequence. */
static KvView cache_view(const CpuState *s, int l, int b, int h)
{
	size_t first = head_rows(s, l, 0, h);

	return (KvView){ s->kv_half ? (const void *)((const _Float16 *)s->key_cache + first)
				    : (const void *)((const float *)s->key_cache + first),
			 s->kv_half ? (const void *)((const _Float16 *)s->value_cache + first)
				    : (const void *)((const float *)s->value_cache + first),
			 s->tblocks[b], head_rows(s, l, 1, h) - first, s->block_size };
}

/* Element offset of position t's row in a view. */
static inline __attribute__((always_inline)) size_t view_row(const KvView *v, int t, int hs)
{
	return (size_t)v->blocks[t / v->bs] * v->block_stride + (size_t)(t % v->bs) * hs;
}

/* The cache's element, as the OpenCL kernels' kv_t: a float, or with
 * --kv-type f16 an IEEE half stored round-to-nearest-even (their
 * vstore_half_rte), which halves the bytes attention reads. Attention
 * takes an f16 row as floats converted into a buffer of its own (8 a
 * vcvtph2ps from x86-64-v3 on), then runs the f32 loops: on 16-lane
 * vectors of halves GCC kept the conversions on the stack. The callers
 * take half as a constant, so each type's loop is built apart. */
static inline __attribute__((always_inline)) const float *
kv_row(const CpuState *s, const void *cache, size_t i, int n, int half, float *buf)
{
	if (!half)
		return (const float *)cache + i;
	s->halves_to_floats((const _Float16 *)cache + i, n, buf);
	return buf;
}

/* Element i of the cache as a float. */
static inline __attribute__((always_inline)) float kv_value(const void *cache, size_t i, int half)
{
	return half ? (float)((const _Float16 *)cache)[i] : ((const float *)cache)[i];
}

static inline __attribute__((always_inline)) const char *kv_at(const void *cache, size_t i, int half)
{
	return (const char *)cache + i * (half ? sizeof(_Float16) : sizeof(float));
}

/* Positions ahead whose key and value rows score_keys prefetches. Serving
 * 8 streams of the stories110M shape as Q8_0: 1,326-1,411 tok/s against
 * 1,253-1,355 without (3 interleaved rounds, faster in each). */
#define ATT_AHEAD 4

/* Asks for position t's key and value rows of head h in layer l: a head's
 * rows are a few KB in blocks of their own, from memory that the weights'
 * stream flushed, too short a stream for the hardware prefetcher. */
static inline __attribute__((always_inline)) void
prefetch_rows(const CpuState *s, const KvView *v, int t, int half)
{
	size_t off = view_row(v, t, s->head_size);

	for (int c = 0; c < s->head_size; c += half ? 32 : 16) { /* a line each */
		__builtin_prefetch(kv_at(v->keys, off + c, half));
		__builtin_prefetch(kv_at(v->values, off + c, half));
	}
}

/* Positions scored at once by score16 (prefill's long rows of keys). */
#define SCORE_GROUP 16

/* Two vectors' lanes picked as __builtin_shuffle numbers them (0..15 a,
 * 16..31 b). */
typedef int32_t v16idx __attribute__((vector_size(64)));
#define PICK(a, b, ...) __builtin_shuffle((a), (b), (v16idx){ __VA_ARGS__ })

/* The scores of 16 positions, att[p] = q . key[p] / scale, each exactly as
 * dot() and dot_finish() make one (hs a multiple of 16): position p's
 * 16-lane chain, then the same tree of adds, done for 16 positions at once
 * by moving lanes, not by changing a sum. A position's score is the same
 * whether it is scored alone or in a group, so prefill stays equal to
 * token-by-token decode. */
static inline __attribute__((always_inline)) void
score16(const float *q, const float *const key[SCORE_GROUP], int hs, float scale, float *att)
{
	v16f acc[SCORE_GROUP], u[8], w[4], z[2];

	/* a position at a time, each chain in one register: with the 16 chains
	 * advanced together, their 16 row pointers did not fit the registers,
	 * and GCC zeroed the chains in memory with a rep stos (a third of an
	 * F16 prompt's attention) */
#pragma GCC unroll 16
	for (int p = 0; p < SCORE_GROUP; p++) {
		const float *k = key[p];
		v16f a = { 0 };

		for (int j = 0; j < hs; j += 16) {
			v16f qv, kv;

			LOAD16(qv, q + j);
			LOAD16(kv, k + j);
			a += qv * kv;
		}
		acc[p] = a;
	}
	/* t[i] = acc[i] + acc[i + 8]: two positions a vector */
	for (int p = 0; p < 8; p++)
		u[p] = PICK(acc[2 * p], acc[2 * p + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
		       PICK(acc[2 * p], acc[2 * p + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
	/* t[i] += t[i + 4]: four positions a vector */
	for (int p = 0; p < 4; p++)
		w[p] = PICK(u[2 * p], u[2 * p + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
		       PICK(u[2 * p], u[2 * p + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
	/* t[0] + t[2] and t[1] + t[3] of eight positions */
	for (int p = 0; p < 2; p++)
		z[p] = PICK(w[2 * p], w[2 * p + 1], 0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29) +
		       PICK(w[2 * p], w[2 * p + 1], 2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
	v16f sum = PICK(z[0], z[1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
		   PICK(z[0], z[1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);

	sum /= scale;
	memcpy(att, &sum, sizeof(sum));
}

/* Scores of positions t..t+15 (score16), their key rows found through the
 * view; f16 rows converted into rows. */
static inline __attribute__((always_inline)) void
score_group(const CpuState *s, const KvView *v, const float *q, int t, float *att, int half,
	    float *rows)
{
	int hs = s->head_size;
	const float *key[SCORE_GROUP];

	if (t / v->bs == (t + SCORE_GROUP - 1) / v->bs) {
		/* the 16 rows lie in one block, one after another: one conversion */
		const float *all = kv_row(s, v->keys, view_row(v, t, hs), SCORE_GROUP * hs, half, rows);

		for (int p = 0; p < SCORE_GROUP; p++)
			key[p] = all + (size_t)p * hs;
	} else {
		for (int p = 0; p < SCORE_GROUP; p++)
			key[p] = kv_row(s, v->keys, view_row(v, t + p, hs), hs, half, rows + (size_t)p * hs);
	}
	score16(q, key, hs, sqrtf(hs), att + t);
}

/* att[t] = q . key(t) / sqrt(head_size) for positions 0..n-1: whole
 * groups of SCORE_GROUP first where head_size is whole vectors, then
 * block by block, asking for the rows ATT_AHEAD positions on. */
static inline __attribute__((always_inline)) void
score_keys(const CpuState *s, const KvView *v, const float *q, int n, float *att, int half)
{
	int hs = s->head_size, bs = v->bs, first = 0;
	float scale = sqrtf(hs), row[KV_ROW_MAX];

	if (hs % 16 == 0 && hs <= KV_ROW_MAX && n >= SCORE_GROUP) {
		float rows[half ? SCORE_GROUP * KV_ROW_MAX : 1];

		for (; first + SCORE_GROUP <= n; first += SCORE_GROUP)
			score_group(s, v, q, first, att, half, rows);
	}
	for (int t = first; t < first + ATT_AHEAD && t < n; t++)
		prefetch_rows(s, v, t, half);
	for (int t0 = first / bs * bs; t0 < n; t0 += bs) {
		size_t k = view_row(v, t0, hs);

		for (int i = t0 < first ? first - t0 : 0; i < bs && t0 + i < n; i++) {
			if (t0 + i + ATT_AHEAD < n)
				prefetch_rows(s, v, t0 + i + ATT_AHEAD, half);
			att[t0 + i] = dot(q, kv_row(s, v->keys, k + (size_t)i * hs, hs, half, row),
					  hs) / scale;
		}
	}
}

#define VALUE_CHUNK 16 /* value rows weigh_chunks converts at once (even) */

/* cm rows (hs apart) weighed by a[0..cm) into NC 16-lane chunks of two
 * chains: even rows into even, odd rows into odd, in order. */
static inline __attribute__((always_inline)) void
weigh_rows(const float *rows, const float *a, int cm, int hs, int NC, v16f *even, v16f *odd)
{
	int j = 0;

	for (; j + 2 <= cm; j += 2) {
		const float *r0 = rows + (size_t)j * hs, *r1 = r0 + hs;
#pragma GCC unroll 4
		for (int c = 0; c < NC; c++) {
			v16f v0, v1;

			LOAD16(v0, r0 + 16 * c);
			LOAD16(v1, r1 + 16 * c);
			even[c] += v0 * a[j];
			odd[c] += v1 * a[j + 1];
		}
	}
	if (j < cm) { /* an odd count: the last position of the block */
		const float *r0 = rows + (size_t)j * hs;
#pragma GCC unroll 4
		for (int c = 0; c < NC; c++) {
			v16f v0;

			LOAD16(v0, r0 + 16 * c);
			even[c] += v0 * a[j];
		}
	}
}

/* NC 16-lane chunks of out from lane i: out[i..] = sum over positions t of
 * att[t] * value(t)[i..]. Each lane keeps two chains, even and odd t, then
 * adds them: a fixed order whatever the batch, with 2 * NC chains in flight
 * instead of one latency-bound chain per lane. */
static inline __attribute__((always_inline)) void
weigh_chunks(const CpuState *s, const KvView *v, const float *att, int n, int i, int NC,
	     float *out, int half)
{
	int hs = s->head_size, bs = v->bs;
	v16f even[4] = { 0 }, odd[4] = { 0 };
	float buf[half ? VALUE_CHUNK * KV_ROW_MAX : 1];

	for (int t0 = 0; t0 < n; t0 += bs) {
		size_t row0 = view_row(v, t0, hs);
		int m = n - t0 < bs ? n - t0 : bs;

		/* an f16 cache's rows a chunk at a time (one conversion; an even
		 * count, so a position keeps its chain) */
		for (int c0 = 0; c0 < m; c0 += VALUE_CHUNK) {
			int cm = m - c0 < VALUE_CHUNK ? m - c0 : VALUE_CHUNK;
			const float *rows = kv_row(s, v->values, row0 + (size_t)c0 * hs, cm * hs, half, buf) + i;

			weigh_rows(rows, att + t0 + c0, cm, hs, NC, even, odd);
		}
	}
#pragma GCC unroll 4
	for (int c = 0; c < NC; c++) {
		v16f sum = even[c] + odd[c];

		memcpy(out + i + 16 * c, &sum, sizeof(sum));
	}
}

/* out = the att-weighted sum of the value rows of positions 0..n-1. */
static inline __attribute__((always_inline)) void
weigh_values(const CpuState *s, const KvView *v, const float *att, int n, float *out, int half)
{
	int hs = s->head_size, bs = v->bs, i = 0;

	for (; i + 64 <= hs; i += 64)
		weigh_chunks(s, v, att, n, i, 4, out, half);
	switch ((hs - i) / 16) {
	case 3: weigh_chunks(s, v, att, n, i, 3, out, half); i += 48; break;
	case 2: weigh_chunks(s, v, att, n, i, 2, out, half); i += 32; break;
	case 1: weigh_chunks(s, v, att, n, i, 1, out, half); i += 16; break;
	default: break;
	}
	for (; i < hs; i++) { /* lanes past the last 16: the same two chains */
		float even = 0.0f, odd = 0.0f;

		for (int t0 = 0; t0 < n; t0 += bs) {
			size_t e = view_row(v, t0, hs) + i;
			int m = n - t0 < bs ? n - t0 : bs;

			for (int j = 0; j < m; j++, e += hs) {
				if (j % 2)
					odd += kv_value(v->values, e, half) * att[t0 + j];
				else
					even += kv_value(v->values, e, half) * att[t0 + j];
			}
		}
		out[i] = even + odd;
	}
}

/* glibc's vector expf, declared as simd, as for SwiGLU (phases.c). */
#pragma omp declare simd notinbranch
float expf(float x);

/* softmax over one head's scores, the exps and their sum vectorised (the
 * sampler keeps softmax() for its logits). The sum's order depends on n
 * alone, never on the batch. */
static inline __attribute__((always_inline)) void attn_softmax(float *x, int n)
{
	float max_val = x[0], sum = 0.0f;

#pragma omp simd reduction(max : max_val) /* a max is the same in any order */
	for (int i = 1; i < n; i++)
		max_val = x[i] > max_val ? x[i] : max_val;
#pragma omp simd reduction(+ : sum)
	for (int i = 0; i < n; i++) {
		x[i] = expf(x[i] - max_val);
		sum += x[i];
	}
#pragma omp simd
	for (int i = 0; i < n; i++)
		x[i] /= sum;
}

/* Token b's query of head h, and its scores of head h. */
static float *query_of(const CpuState *s, int b, int h)
{
	return s->q + (size_t)b * s->c.dim + (size_t)h * s->head_size;
}

static float *scores_of(const CpuState *s, int b, int h)
{
	return s->att + ((size_t)b * s->c.n_heads + h) * s->c.seq_len;
}

/* Token b's head h: scores against its sequence's positions 0..pos in the
 * view (f16 rows where half), softmax, then the weighted sum of values.
 * Cloned per x86-64 level, as the products are built per level
 * (matmul_kernel.c). */
CPU_CLONES
static void attend_head(const CpuState *s, const KvView *v, int half, int b, int h,
			const float *q, float *out)
{
	int hs = s->head_size, pos = s->tpos[b];
	float *att = scores_of(s, b, h);

	/* GCC drops -fno-omit-frame-pointer in target clones; asking for the
	 * frame address keeps the frame, so `spantrace profile` unwinds here. */
	__asm__ volatile("" : : "r"(__builtin_frame_address(0)));
	q += (size_t)b * s->c.dim + h * hs;
	out += (size_t)b * s->c.dim + h * hs;
	if (half) { /* each type's loops built apart */
		score_keys(s, v, q, pos + 1, att, 1);
		attn_softmax(att, pos + 1);
		weigh_values(s, v, att, pos + 1, out, 1);
	} else {
		score_keys(s, v, q, pos + 1, att, 0);
		attn_softmax(att, pos + 1);
		weigh_values(s, v, att, pos + 1, out, 0);
	}
}

/* ---- a group's queries at once ----
 * A query streams its sequence's key and value rows from L2 (512 bytes a
 * position at head size 64, more than the arithmetic on them takes), so a
 * group of one sequence's queries reads each stretch of rows once for all
 * of them. Each score and each sum is made exactly as attend_head makes it
 * for one query: the same chains in the same order. The rows are floats:
 * an f16 cache's are converted first (convert_rows). */

/* Scores of queries b0..b1-1 (of one sequence) of head h: each 16 key rows
 * scored against every query reaching past them (score16), then each
 * query's last positions one by one, as score_keys does. */
static inline __attribute__((always_inline)) void
score_queries(const CpuState *s, const KvView *v, int b0, int b1, int h)
{
	int hs = s->head_size, n_max = s->tpos[b1 - 1] + 1;
	float scale = sqrtf(hs);

	for (int t = 0; t + SCORE_GROUP <= n_max; t += SCORE_GROUP) {
		const float *key[SCORE_GROUP];

		for (int p = 0; p < SCORE_GROUP; p++)
			key[p] = (const float *)v->keys + view_row(v, t + p, hs);
		for (int b = b0; b < b1; b++)
			if (s->tpos[b] + 1 >= t + SCORE_GROUP)
				score16(query_of(s, b, h), key, hs, scale, scores_of(s, b, h) + t);
	}
	for (int b = b0; b < b1; b++) {
		int n = s->tpos[b] + 1;
		float *att = scores_of(s, b, h);

		for (int t = n / SCORE_GROUP * SCORE_GROUP; t < n; t++)
			att[t] = dot(query_of(s, b, h), (const float *)v->keys + view_row(v, t, hs), hs) / scale;
	}
}

/* weigh_rows on NC lane chunks whose chains wait in memory between calls. */
static inline __attribute__((always_inline)) void
weigh_rows_kept(const float *rows, const float *a, int cm, int hs, int NC, float *even_at,
		float *odd_at)
{
	v16f even[4], odd[4];

#pragma GCC unroll 4
	for (int c = 0; c < NC; c++) {
		LOAD16(even[c], even_at + 16 * c);
		LOAD16(odd[c], odd_at + 16 * c);
	}
	weigh_rows(rows, a, cm, hs, NC, even, odd);
#pragma GCC unroll 4
	for (int c = 0; c < NC; c++) {
		memcpy(even_at + 16 * c, &even[c], sizeof(v16f));
		memcpy(odd_at + 16 * c, &odd[c], sizeof(v16f));
	}
}

/* Chunk rows (cm of them at most) weighed into query b's chains e and o,
 * as many rows as b reaches: left. */
static inline __attribute__((always_inline)) void
weigh_chunk_into(const float *rows, const float *a, int cm, int left, int hs, float *e, float *o)
{
	if (left < cm)
		cm = left;
	if (cm <= 0)
		return;
	for (int i = 0; i < hs; i += 64) {
		switch (hs - i >= 64 ? 4 : (hs - i) / 16) {
		case 4: weigh_rows_kept(rows + i, a, cm, hs, 4, e + i, o + i); break;
		case 3: weigh_rows_kept(rows + i, a, cm, hs, 3, e + i, o + i); break;
		case 2: weigh_rows_kept(rows + i, a, cm, hs, 2, e + i, o + i); break;
		default: weigh_rows_kept(rows + i, a, cm, hs, 1, e + i, o + i); break;
		}
	}
}

/* The weighted sums of queries b0..b1-1 of head h: each chunk of value rows
 * weighed into every query reaching it, in weigh_values' chunks, each
 * query's even and odd chains kept in chains (b1 - b0, 2, hs). */
static inline __attribute__((always_inline)) void
weigh_queries(const CpuState *s, const KvView *v, int b0, int b1, int h, float *chains)
{
	int hs = s->head_size, bs = v->bs, n_max = s->tpos[b1 - 1] + 1;

	memset(chains, 0, (size_t)(b1 - b0) * 2 * hs * sizeof(float));
	for (int t0 = 0; t0 < n_max; t0 += bs) {
		const float *block = (const float *)v->values + view_row(v, t0, hs);
		int m = n_max - t0 < bs ? n_max - t0 : bs;

		for (int c0 = 0; c0 < m; c0 += VALUE_CHUNK) {
			int cm = m - c0 < VALUE_CHUNK ? m - c0 : VALUE_CHUNK;

			for (int b = b0; b < b1; b++) {
				float *e = chains + (size_t)(b - b0) * 2 * hs;

				weigh_chunk_into(block + (size_t)c0 * hs, scores_of(s, b, h) + t0 + c0, cm,
						 s->tpos[b] + 1 - t0 - c0, hs, e, e + hs);
			}
		}
	}
	for (int b = b0; b < b1; b++) {
		const float *e = chains + (size_t)(b - b0) * 2 * hs;
		float *out = s->xb + (size_t)b * s->c.dim + (size_t)h * hs;

		for (int i = 0; i < hs; i++)
			out[i] = e[i] + e[hs + i];
	}
}

/* Head h of queries b0..b1-1 of one sequence, against an f32 view (head
 * size a multiple of 16, even blocks or one). Cloned as attend_head. */
CPU_CLONES
static void attend_queries(const CpuState *s, const KvView *v, int b0, int b1, int h, float *chains)
{
	__asm__ volatile("" : : "r"(__builtin_frame_address(0))); /* as in attend_head */
	score_queries(s, v, b0, b1, h);
	for (int b = b0; b < b1; b++)
		attn_softmax(scores_of(s, b, h), s->tpos[b] + 1);
	weigh_queries(s, v, b0, b1, h, chains);
}

/* Thread thread's scratch: a group's chains, then (f16 cache) its rows. */
static float *thread_scratch(const CpuState *s, int thread)
{
	return s->att_scratch + (size_t)thread * s->scratch_floats;
}

/* Positions 0..n-1 of an f16 view as floats in the thread's scratch, one
 * block's rows a conversion: exact, so scores and sums are those of the
 * cache's own rows. */
static KvView convert_rows(const CpuState *s, const KvView *v, int n, int thread)
{
	int hs = s->head_size;
	float *keys = thread_scratch(s, thread) + (size_t)ATT_QUERY_GROUP * 2 * hs;
	float *values = keys + (size_t)s->scratch_rows * hs;

	for (int t0 = 0; t0 < n; t0 += v->bs) {
		size_t from = view_row(v, t0, hs);
		int m = n - t0 < v->bs ? n - t0 : v->bs;

		s->halves_to_floats((const _Float16 *)v->keys + from, m * hs, keys + (size_t)t0 * hs);
		s->halves_to_floats((const _Float16 *)v->values + from, m * hs, values + (size_t)t0 * hs);
	}
	return (KvView){ keys, values, zero_block, 0, s->c.seq_len };
}

void attention_tile(const CpuState *s, int l, int t, int thread)
{
	int g = t / s->c.n_heads, h = t % s->c.n_heads;
	int b0 = s->qgroup[g], b1 = s->qgroup[g + 1], last = s->tpos[b1 - 1];
	KvView v = cache_view(s, l, b0, h / s->kv_mul);
	/* a position's value chain is its parity within its block: the same
	 * in a one-block copy only when blocks are even */
	int grouped = b1 - b0 > 1 && s->head_size % 16 == 0 && (v.bs % 2 == 0 || last < v.bs);

	if (grouped && s->kv_half && last >= s->scratch_rows)
		grouped = 0;
	if (!grouped) {
		for (int b = b0; b < b1; b++)
			attend_head(s, &v, s->kv_half, b, h, s->q, s->xb);
		return;
	}
	if (s->kv_half)
		v = convert_rows(s, &v, last + 1, thread);
	attend_queries(s, &v, b0, b1, h, thread_scratch(s, thread));
}
