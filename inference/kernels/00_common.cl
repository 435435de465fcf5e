/* 00_common.cl - helpers shared by the forward-pass kernels.
 *
 * The kernels are written for PoCL's CPU device: one work-item computes a
 * block of 4 weight rows against a block of tokens with explicit vector
 * loads, so each weight row is streamed from memory once per 4-token block
 * and the compiler gets plain vector FMAs (it does not have to vectorize
 * across work-items). Token vectors are first staged (and rmsnorm'ed) into
 * local memory once per work-group. */

#define ROWS_PER_ITEM 4 /* rows of the 4-row dot block */

/* On a CPU device (the host defines CPU_DEVICE) a work-item's next rows are
 * the next item's, run right after it by the same thread: prefetching them
 * while this block computes made the decode matvecs ~10-30% faster on
 * PoCL, whose own prefetch() is a no-op. clang's builtin wants a plain
 * pointer; a CPU device has one flat address space. */
#ifdef CPU_DEVICE
#define PREFETCH_ROW(p) __builtin_prefetch((const void *)(ulong)(p))
#else
#define PREFETCH_ROW(p) ((void)0)
#endif
#define PREFETCH_NEXT_ROWS(w0, w1, w2, w3, off) \
	do { \
		PREFETCH_ROW((w0) + (off)); PREFETCH_ROW((w1) + (off)); \
		PREFETCH_ROW((w2) + (off)); PREFETCH_ROW((w3) + (off)); \
	} while (0)
#define TOK_BLOCK 4     /* tokens of the 4x4 dot block */

static inline float hsum8(float8 v)
{
	float4 s = v.lo + v.hi;
	return (s.x + s.y) + (s.z + s.w);
}

static inline float hsum16(float16 v)
{
	return hsum8(v.lo + v.hi);
}

/* Copies n token vectors of width k from x to xs: token t is row idx[t] of
 * x, or row t when idx is NULL. With g non-NULL each is rmsnorm'ed as
 * llama2.c does: g[j] * (x[j] / sqrt(mean(x^2) + 1e-5)). xs holds n*k
 * floats followed by n per-token scales. Called by every work-item of the
 * group (it has barriers). */
static void stage_tokens(const __global float *x, const __global int *idx, int n, int k,
			 const __global float *g, __local float *xs)
{
	int lid = get_local_id(0), lsz = get_local_size(0);
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
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int t = 0; t < n; t++) {
		const __global float *xt = x + (size_t)(idx ? idx[t] : t) * k;
		float s = scale[t];
		for (int j = lid; j < k; j += lsz)
			xs[t * k + j] = g ? g[j] * (s * xt[j]) : xt[j];
	}
	barrier(CLK_LOCAL_MEM_FENCE);
}

/* Four weight rows against four staged tokens (x, x+k, x+2k, x+3k).
 * Lane r*4+t of the result is row r times token t. Each lane is summed in
 * exactly dot_4x1's order (16 lanes of fma, hsum16, then the tail with
 * fma), so a token's result does not depend on whether it came in a block
 * of four or alone: the batch invariance the serving engine promises. */
static float16 dot_4x4(const __global float *w0, const __global float *w1,
		       const __global float *w2, const __global float *w3,
		       const __local float *x, int k)
{
	const __local float *x1 = x + k, *x2 = x + 2 * k, *x3 = x + 3 * k;
	float16 a00 = 0, a01 = 0, a02 = 0, a03 = 0, a10 = 0, a11 = 0, a12 = 0, a13 = 0;
	float16 a20 = 0, a21 = 0, a22 = 0, a23 = 0, a30 = 0, a31 = 0, a32 = 0, a33 = 0;
	int j = 0;

	for (; j + 16 <= k; j += 16) {
		float16 t0 = vload16(0, x + j), t1 = vload16(0, x1 + j);
		float16 t2 = vload16(0, x2 + j), t3 = vload16(0, x3 + j);
		float16 r = vload16(0, w0 + j);
		PREFETCH_NEXT_ROWS(w0, w1, w2, w3, 4 * k + j);
		a00 = fma(r, t0, a00); a01 = fma(r, t1, a01);
		a02 = fma(r, t2, a02); a03 = fma(r, t3, a03);
		r = vload16(0, w1 + j);
		a10 = fma(r, t0, a10); a11 = fma(r, t1, a11);
		a12 = fma(r, t2, a12); a13 = fma(r, t3, a13);
		r = vload16(0, w2 + j);
		a20 = fma(r, t0, a20); a21 = fma(r, t1, a21);
		a22 = fma(r, t2, a22); a23 = fma(r, t3, a23);
		r = vload16(0, w3 + j);
		a30 = fma(r, t0, a30); a31 = fma(r, t1, a31);
		a32 = fma(r, t2, a32); a33 = fma(r, t3, a33);
	}
	float16 out = (float16)(hsum16(a00), hsum16(a01), hsum16(a02), hsum16(a03),
				hsum16(a10), hsum16(a11), hsum16(a12), hsum16(a13),
				hsum16(a20), hsum16(a21), hsum16(a22), hsum16(a23),
				hsum16(a30), hsum16(a31), hsum16(a32), hsum16(a33));
	for (; j < k; j++) { /* widths that are not a multiple of 16 */
		float4 xv = (float4)(x[j], x1[j], x2[j], x3[j]);
		out.s0123 = fma((float4)w0[j], xv, out.s0123);
		out.s4567 = fma((float4)w1[j], xv, out.s4567);
		out.s89ab = fma((float4)w2[j], xv, out.s89ab);
		out.scdef = fma((float4)w3[j], xv, out.scdef);
	}
	return out;
}

/* Four weight rows against one staged token: the decode (matvec) case.
 * The rows' four accumulator chains are interleaved so that their FMAs
 * overlap: one row at a time, each FMA waited on the last (the classifier
 * was latency-bound, with the weights in cache). Each row is
 * summed the one way every kernel sums: lane j mod 16 accumulates
 * w[j] * x[j] in order of j, then hsum16, then the tail in order. */
static float4 dot_4x1(const __global float *w0, const __global float *w1,
		      const __global float *w2, const __global float *w3,
		      const __local float *x, int k)
{
	float16 a0 = 0, a1 = 0, a2 = 0, a3 = 0;
	int j = 0;

	for (; j + 16 <= k; j += 16) {
		float16 t = vload16(0, x + j);
		PREFETCH_NEXT_ROWS(w0, w1, w2, w3, 4 * k + j);
		a0 = fma(vload16(0, w0 + j), t, a0);
		a1 = fma(vload16(0, w1 + j), t, a1);
		a2 = fma(vload16(0, w2 + j), t, a2);
		a3 = fma(vload16(0, w3 + j), t, a3);
	}
	float4 out = (float4)(hsum16(a0), hsum16(a1), hsum16(a2), hsum16(a3));
	for (; j < k; j++) /* widths that are not a multiple of 16 */
		out = fma((float4)(w0[j], w1[j], w2[j], w3[j]), (float4)x[j], out);
	return out;
}

/* Dots four weight rows with tokens t0.. of the staged block: four tokens
 * when at least four remain, else one. res[r * TOK_BLOCK + t] gets row r,
 * token t0 + t. Returns the number of tokens done. */
static int dot_block(const __global float *w0, const __global float *w1,
		     const __global float *w2, const __global float *w3,
		     const __local float *xs, int k, int n, int t0,
		     float res[ROWS_PER_ITEM * TOK_BLOCK])
{
	const __local float *x = xs + t0 * k;

	if (n - t0 >= TOK_BLOCK) {
		float16 a = dot_4x4(w0, w1, w2, w3, x, k);
		vstore16(a, 0, res);
		return TOK_BLOCK;
	}
	float4 a = dot_4x1(w0, w1, w2, w3, x, k);
	res[0] = a.x;
	res[TOK_BLOCK] = a.y;
	res[2 * TOK_BLOCK] = a.z;
	res[3 * TOK_BLOCK] = a.w;
	return 1;
}

/* Row r of a (rows, k) matrix, clamped so out-of-range work-items read
 * valid memory (their results are never stored). */
static inline const __global float *row_ptr(const __global float *w, int r,
					    int rows, int k)
{
	return w + (size_t)min(r, rows - 1) * k;
}
