/* 00_common.cl - helpers shared by the forward-pass kernels.
 *
 * The kernels are written for PoCL's CPU device: one work-item computes a
 * panel of 16 weight rows against a group of tokens with explicit vector
 * loads, so each weight is streamed from memory once per 8 tokens and the
 * compiler gets plain vector FMAs (it does not have to vectorize across
 * work-items). Token vectors are first staged (and rmsnorm'ed) into local
 * memory once per work-group. */

/* On a CPU device (the host defines CPU_DEVICE) a panel's columns ahead
 * are prefetched while this one computes, as on the CPU backend: PoCL's
 * own prefetch() is a no-op. clang's builtin wants a plain pointer; a CPU
 * device has one flat address space. */
#ifdef CPU_DEVICE
#define PREFETCH(p) __builtin_prefetch((const void *)(ulong)(p))
#else
#define PREFETCH(p) ((void)0)
#endif

static inline float hsum8(float8 v)
{
	float4 s = v.lo + v.hi;
	return (s.x + s.y) + (s.z + s.w);
}

static inline float hsum16(float16 v)
{
	return hsum8(v.lo + v.hi);
}

/* Staging: n token vectors of width k copied from x to xs, token t being
 * row idx[t] of x, or row t when idx is NULL. With g non-NULL each is
 * rmsnorm'ed as llama2.c does: g[j] * (x[j] / sqrt(mean(x^2) + 1e-5)). xs
 * holds n*k floats followed by n per-token scales. Work-item lid of lsz
 * does every lsz-th token's scale, then every lsz-th column. */
static void stage_scales(const __global float *x, const __global int *idx, int n, int k,
			 const __global float *g, __local float *xs, int lid, int lsz)
{
	__local float *scale = xs + n * k;

	for (int t = lid; t < n; t += lsz) {
		const __global float *xt = x + (size_t)(idx ? idx[t] : t) * k;
		float s = 1.0f;
		if (g) {
			/* 16 lanes, as the dots: a serial sum here cost every
			 * work-group ~1 us while its other items waited */
			float16 acc = 0;
			int j = 0;
			for (; j + 16 <= k; j += 16) {
				float16 v = vload16(0, xt + j);
				acc = fma(v, v, acc);
			}
			float ss = hsum16(acc);
			for (; j < k; j++)
				ss = fma(xt[j], xt[j], ss);
			ss = ss / k + 1e-5f;
			s = 1.0f / sqrt(ss);
		}
		scale[t] = s;
	}
}

static void stage_copy(const __global float *x, const __global int *idx, int n, int k,
		       const __global float *g, __local float *xs, int lid, int lsz)
{
	const __local float *scale = xs + n * k;

	for (int t = 0; t < n; t++) {
		const __global float *xt = x + (size_t)(idx ? idx[t] : t) * k;
		float s = scale[t];
		for (int j = lid; j < k; j += lsz)
			xs[t * k + j] = g ? g[j] * (s * xt[j]) : xt[j];
	}
}

/* Staging by every work-item of the group (it has barriers). */
static void stage_tokens(const __global float *x, const __global int *idx, int n, int k,
			 const __global float *g, __local float *xs)
{
	int lid = get_local_id(0), lsz = get_local_size(0);

	stage_scales(x, idx, n, k, g, xs, lid, lsz);
	barrier(CLK_LOCAL_MEM_FENCE);
	stage_copy(x, idx, n, k, g, xs, lid, lsz);
	barrier(CLK_LOCAL_MEM_FENCE);
}

/* Staging by a work-item alone in its group, where a barrier could sit
 * in code the group takes or not as a whole. */
static void stage_alone(const __global float *x, const __global int *idx, int n, int k,
			const __global float *g, __local float *xs)
{
	stage_scales(x, idx, n, k, g, xs, 0, 1);
	stage_copy(x, idx, n, k, g, xs, 0, 1);
}

/* Matrices come packed as on the CPU backend (matmul.h): a (rows, k)
 * matrix is ceil(rows / 16) panels, panel p holding rows 16p..16p+15
 * column by column, so one 64-byte load is 16 rows' weights for one input.
 * A work-item takes a panel (or two) and multiplies each load by staged
 * input values broadcast, with no sums across lanes. */
#define PANEL_ROWS 16
#define TOK_GROUP 8 /* tokens per pass over a panel */
#define PREFETCH_COLUMNS 32 /* as matmul.c: ~2 KB ahead in each panel */

/* The matrices' stored type, one per model, set by the host at build
 * (ggml's numbers: 0 F32, 1 F16, 8 Q8_0), packed as matmul.c packs it: an
 * F16 panel holds 16 halves a column; a Q8_0 panel a block of 32 columns
 * per Q8_PANEL_BLOCK bytes, the 16 rows' scales as floats and then 32
 * columns of 16 chars. Values are converted in registers, never stored
 * as floats. */
#ifndef WTYPE
#define WTYPE 0
#endif
#define Q8_BLOCK 32
#define Q8_PANEL_BLOCK (PANEL_ROWS * 4 + Q8_BLOCK * PANEL_ROWS)
#if WTYPE == 1
#define PANEL_BYTES(k) ((size_t)(k) * PANEL_ROWS * 2)
#elif WTYPE == 8
#define PANEL_BYTES(k) ((size_t)(k) / Q8_BLOCK * Q8_PANEL_BLOCK)
#else
#define PANEL_BYTES(k) ((size_t)(k) * PANEL_ROWS * 4)
#endif

/* Pointers stay `float *` (the weights are one float-aligned buffer); the
 * panel's own type is read through the functions below. */
static inline const __global float *panel_ptr(const __global float *w, int p, int k)
{
	return (const __global float *)((const __global char *)w + (size_t)p * PANEL_BYTES(k));
}

#if WTYPE == 8
static inline const __global char *q8_block(const __global float *panel, int j)
{
	return (const __global char *)panel + (size_t)(j / Q8_BLOCK) * Q8_PANEL_BLOCK;
}
#endif

/* Column j of a panel: its 16 rows as floats. */
static inline float16 load_column(const __global float *panel, int j)
{
#if WTYPE == 1
	return vload_half16(j, (const __global half *)panel);
#elif WTYPE == 8
	const __global char *blk = q8_block(panel, j);

	return convert_float16(vload16(j % Q8_BLOCK, blk + PANEL_ROWS * 4)) *
	       vload16(0, (const __global float *)blk);
#else
	return vload16(j, panel);
#endif
}

/* Where column j starts, to prefetch. */
static inline const __global char *column_at(const __global float *panel, int j)
{
#if WTYPE == 8
	return q8_block(panel, j) + PANEL_ROWS * 4 + (j % Q8_BLOCK) * PANEL_ROWS;
#else
	return (const __global char *)panel + (size_t)j * (PANEL_BYTES(1) / PANEL_ROWS) * PANEL_ROWS;
#endif
}

/* Row i of the panel at column j. */
static inline float panel_elem(const __global float *panel, int i, int j)
{
#if WTYPE == 1
	return vload_half(j * PANEL_ROWS + i, (const __global half *)panel);
#elif WTYPE == 8
	const __global char *blk = q8_block(panel, j);

	return (float)blk[PANEL_ROWS * 4 + (j % Q8_BLOCK) * PANEL_ROWS + i] * ((const __global float *)blk)[i];
#else
	return panel[j * PANEL_ROWS + i];
#endif
}

/* Panel a (and b when two) against NT staged tokens from x: acc[t] (and
 * acc[TOK_GROUP + t]) lane i is the panel's row i times token t. Every lane
 * is one fma chain over the columns in order, whatever NT, so a token's
 * result does not depend on its batch (the serving engine's batch
 * invariance), and the order is the CPU backend's. */
static inline __attribute__((always_inline)) void
panels_dot(const __global float *a, const __global float *b, int two,
	   const __local float *x, int k, int NT, float16 *acc)
{
	/* Sums in variables of their own, copied out at the end: on a CPU
	 * device acc could alias x, so sums kept in acc went back to memory
	 * at every column. */
	float16 ra[TOK_GROUP], rb[TOK_GROUP];

#pragma unroll
	for (int t = 0; t < TOK_GROUP; t++) {
		ra[t] = 0;
		rb[t] = 0;
	}
#if WTYPE == 8
	/* Q8_0: a block's 32 columns summed unscaled, then scaled once: the
	 * scales' load and multiply leave the per-column work */
	for (int j0 = 0; j0 < k; j0 += Q8_BLOCK) {
		const __global char *qa = q8_block(a, j0), *qb = two ? q8_block(b, j0) : qa;
		float16 ba[TOK_GROUP], bb[TOK_GROUP];

#pragma unroll
		for (int t = 0; t < TOK_GROUP; t++) {
			ba[t] = 0;
			bb[t] = 0;
		}
		PREFETCH(qa + 2 * Q8_PANEL_BLOCK);
		if (two)
			PREFETCH(qb + 2 * Q8_PANEL_BLOCK);
		for (int jj = 0; jj < Q8_BLOCK; jj++) {
			float16 wa = convert_float16(vload16(jj, qa + PANEL_ROWS * 4));
			float16 wb = two ? convert_float16(vload16(jj, qb + PANEL_ROWS * 4)) : 0;
#pragma unroll
			for (int t = 0; t < NT; t++) {
				float16 xv = (float16)(x[t * k + j0 + jj]);

				ba[t] = fma(wa, xv, ba[t]);
				if (two)
					bb[t] = fma(wb, xv, bb[t]);
			}
		}
		float16 sa = vload16(0, (const __global float *)qa), sb = two ? vload16(0, (const __global float *)qb) : 0;
#pragma unroll
		for (int t = 0; t < NT; t++) {
			ra[t] = fma(ba[t], sa, ra[t]);
			if (two)
				rb[t] = fma(bb[t], sb, rb[t]);
		}
	}
#else
	for (int j = 0; j < k; j++) {
		float16 wa = load_column(a, j), wb = two ? load_column(b, j) : 0;

		PREFETCH(column_at(a, j + PREFETCH_COLUMNS));
		if (two)
			PREFETCH(column_at(b, j + PREFETCH_COLUMNS));
#pragma unroll
		for (int t = 0; t < NT; t++) {
			float16 xv = (float16)(x[t * k + j]);

			ra[t] = fma(wa, xv, ra[t]);
			if (two)
				rb[t] = fma(wb, xv, rb[t]);
		}
	}
#endif
#pragma unroll
	for (int t = 0; t < NT; t++) {
		acc[t] = ra[t];
		acc[TOK_GROUP + t] = rb[t];
	}
}

/* panels_dot with `two` known at each call, so both shapes unroll. Q8_0
 * keeps a block sum beside each accumulator: two panels of 8 tokens would
 * need 32 vector sums plus the column and the token (AVX-512 has 32
 * registers) and spill, so it runs one panel at a time there; each lane's
 * fma chain is the same either way. */
static inline __attribute__((always_inline)) void
panels_dot_any(const __global float *a, const __global float *b, int two,
	       const __local float *x, int k, int NT, float16 *acc)
{
#if WTYPE == 8
	if (two && NT > 4) {
		float16 accb[2 * TOK_GROUP];

		panels_dot(a, a, 0, x, k, NT, acc);
		panels_dot(b, b, 0, x, k, NT, accb);
#pragma unroll
		for (int t = 0; t < NT; t++)
			acc[TOK_GROUP + t] = accb[t];
		return;
	}
#endif
	if (two)
		panels_dot(a, b, 1, x, k, NT, acc);
	else
		panels_dot(a, a, 0, x, k, NT, acc);
}

/* panels_dot on tokens t0.. of the staged block xs: 8 when at least 8
 * remain, else 4, else 1 (shapes the compiler unrolls). Returns how many. */
static inline __attribute__((always_inline)) int
panel_block(const __global float *a, const __global float *b, int two,
			      const __local float *xs, int k, int n, int t0, float16 *acc)
{
	const __local float *x = xs + t0 * k;

	if (n - t0 >= 8) {
		panels_dot_any(a, b, two, x, k, 8, acc);
		return 8;
	}
	if (n - t0 >= 4) {
		panels_dot_any(a, b, two, x, k, 4, acc);
		return 4;
	}
	panels_dot_any(a, b, two, x, k, 1, acc);
	return 1;
}

/* Lanes of a panel starting at row r0 that hold rows below `rows`. */
static inline int panel_lanes(int r0, int rows)
{
	return min(PANEL_ROWS, rows - r0);
}
