/* matmul_kernel.c - the CPU backend's products over panel-packed weights
 * (matmul.h), built once per x86-64 level: MATMUL_LEVEL v4 (-march=x86-64-v4,
 * AVX-512), v3 (x86-64-v3: AVX2, FMA, F16C) or base, as
 * matmul_rows_typed_<level>; matmul.c picks one for the CPU at load.
 *
 * Why builds and not GCC's target_clones: a clone cannot use a level's
 * intrinsics (the default clone of the same body would not compile), and
 * GCC 12 turns a vector conversion of halves or of int8 values into one
 * scalar conversion per lane: F16 and Q8_0 ran 2-3x slower than F32 here.
 * The conversions below are exact, so every level computes the same sums. */
#include <string.h>
#include "matmul_panels.h"

#ifndef MATMUL_LEVEL
#error "build with -DMATMUL_LEVEL=v4, v3 or base"
#endif

#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

/* 16 halves at p as floats: one vcvtph2ps (two on AVX2). */
static inline __attribute__((always_inline)) void halves_to_floats(v16f *v, const void *p)
{
#if defined(__AVX512F__)
	__m512 f = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));

	memcpy(v, &f, sizeof(*v));
#elif defined(__F16C__) && defined(__AVX__)
	__m256 lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
	__m256 hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p + 1));

	memcpy(v, &lo, sizeof(lo));
	memcpy((char *)v + sizeof(lo), &hi, sizeof(hi));
#else
	_Float16 h[PANEL_ROWS];
	float f[PANEL_ROWS];

	memcpy(h, p, sizeof(h));
	for (int i = 0; i < PANEL_ROWS; i++)
		f[i] = (float)h[i];
	memcpy(v, f, sizeof(f));
#endif
}

/* 16 int8 values at p as floats: widened to int first, which GCC does in
 * vector registers (vpmovsxbd, vcvtdq2ps), where char to float it does not. */
static inline __attribute__((always_inline)) void int8s_to_floats(v16f *v, const void *p)
{
#if defined(__AVX512F__)
	__m512 f = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));

	memcpy(v, &f, sizeof(*v));
#elif defined(__AVX2__)
	__m128i q = _mm_loadu_si128((const __m128i *)p);
	__m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
	__m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)));

	memcpy(v, &lo, sizeof(lo));
	memcpy((char *)v + sizeof(lo), &hi, sizeof(hi));
#else
	typedef int32_t v16i __attribute__((vector_size(PANEL_ROWS * sizeof(int32_t))));
	v16b q;

	memcpy(&q, p, sizeof(q));
	*v = __builtin_convertvector(__builtin_convertvector(q, v16i), v16f);
#endif
}

/* Column j of a panel as 16 floats, for each packed type: type is a
 * constant wherever this is inlined, so the branches fold away. (Through a
 * pointer: a returned vector would be an ABI question in the plain clone.) */
static inline __attribute__((always_inline)) void load_column(v16f *v, const char *panel, WeightType type,
							      int j)
{
	if (type == WEIGHT_F16) {
		halves_to_floats(v, panel + (size_t)j * sizeof(v16h));
	} else if (type == WEIGHT_Q8_0) {
		const char *blk = panel + (size_t)(j / Q8_0_BLOCK) * Q8_PANEL_BLOCK;
		v16f scale;

		memcpy(&scale, blk, sizeof(scale));
		int8s_to_floats(v, blk + sizeof(scale) + (size_t)(j % Q8_0_BLOCK) * sizeof(v16b));
		*v *= scale;
	} else {
		memcpy(v, panel + (size_t)j * sizeof(*v), sizeof(*v));
	}
}

/* Where column j's bytes are, to prefetch ahead. */
static inline __attribute__((always_inline)) const char *column_at(const char *panel, WeightType type, int j)
{
	if (type == WEIGHT_F16)
		return panel + (size_t)j * PANEL_ROWS * 2;
	if (type == WEIGHT_Q8_0)
		return panel + (size_t)(j / Q8_0_BLOCK) * Q8_PANEL_BLOCK + PANEL_ROWS * sizeof(float) +
		       (size_t)(j % Q8_0_BLOCK) * PANEL_ROWS;
	return panel + (size_t)j * PANEL_ROWS * sizeof(float);
}

/* The G x T accumulators of a block of panels: zeroed, and stored to out
 * (a last, partial panel: only its `rows` lanes). Inlined with G and T
 * constant, so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void zero_sums(v16f acc[][TOKEN_GROUP], int G, int T)
{
#pragma GCC unroll 4
	for (int g = 0; g < G; g++)
#pragma GCC unroll 8
		for (int t = 0; t < T; t++)
			acc[g][t] = (v16f){ 0 };
}

static inline __attribute__((always_inline)) void
store_sums(v16f acc[][TOKEN_GROUP], int G, int T, float *out, size_t ldo, int rows)
{
#pragma GCC unroll 4
	for (int g = 0; g < G; g++)
#pragma GCC unroll 8
		for (int t = 0; t < T; t++) {
			float lanes[PANEL_ROWS];

			if (rows == PANEL_ROWS) { /* a fixed size keeps acc in registers */
				memcpy(out + t * ldo + g * PANEL_ROWS, &acc[g][t], sizeof(lanes));
				continue;
			}
			memcpy(lanes, &acc[g][t], sizeof(lanes));
			memcpy(out + t * ldo, lanes, (size_t)rows * sizeof(float));
		}
}

/* G panels (ldp bytes apart) against T tokens (stride ldx): one
 * accumulator per panel and token, each a chain over j in order. rows <
 * PANEL_ROWS only for a last, partial panel (then G is 1): its other lanes
 * are not stored. */
static inline __attribute__((always_inline)) void
panel_block(const char *w, WeightType type, size_t ldp, int G, const float *x, size_t ldx, int T, int n,
	    float *out, size_t ldo, int rows)
{
	v16f acc[MAX_PANELS][TOKEN_GROUP];

	zero_sums(acc, G, T);
	for (int j = 0; j < n; j++)
#pragma GCC unroll 4
		for (int g = 0; g < G; g++) {
			v16f wv;

			load_column(&wv, w + g * ldp, type, j);

			__builtin_prefetch(column_at(w + g * ldp, type, j + PREFETCH_COLUMNS), 0, 3);
			/* scalar times vector: a broadcast load the FMA takes as is */
#pragma GCC unroll 8
			for (int t = 0; t < T; t++)
				acc[g][t] += wv * x[t * ldx + j];
		}
	store_sums(acc, G, T, out, ldo, rows);
}

/* Q8_0 panels: each block's 32 columns summed unscaled (an FMA chain from
 * zero, in column order), then added to the row's sum scaled by the block's
 * scale in one more FMA: the scales' load and multiply leave the
 * per-column work. The OpenCL kernels (00_common.cl) sum the same way, so
 * the backends agree. G x T is at most 8: two accumulators each. */
static inline __attribute__((always_inline)) void
q8_panel_block(const char *w, size_t ldp, int G, const float *x, size_t ldx, int T, int n, float *out,
	       size_t ldo, int rows)
{
	v16f acc[MAX_PANELS][TOKEN_GROUP];

	zero_sums(acc, G, T);
	for (int j0 = 0; j0 < n; j0 += Q8_0_BLOCK) {
		const char *blk = w + (size_t)(j0 / Q8_0_BLOCK) * Q8_PANEL_BLOCK;
		v16f bacc[MAX_PANELS][TOKEN_GROUP];

		zero_sums(bacc, G, T);
		for (int jj = 0; jj < Q8_0_BLOCK; jj++)
#pragma GCC unroll 4
			for (int g = 0; g < G; g++) {
				const char *col = blk + g * ldp + PANEL_ROWS * sizeof(float) + (size_t)jj * PANEL_ROWS;
				v16f wv;

				int8s_to_floats(&wv, col);
				__builtin_prefetch(col + 2 * Q8_PANEL_BLOCK, 0, 3);
#pragma GCC unroll 8
				for (int t = 0; t < T; t++)
					bacc[g][t] += wv * x[t * ldx + j0 + jj];
			}
#pragma GCC unroll 4
		for (int g = 0; g < G; g++) {
			v16f scale;

			memcpy(&scale, blk + g * ldp, sizeof(scale));
#pragma GCC unroll 8
			for (int t = 0; t < T; t++)
				acc[g][t] += bacc[g][t] * scale;
		}
	}
	store_sums(acc, G, T, out, ldo, rows);
}

/* G panels against T tokens of a packed type; G, T and type are constants
 * wherever this is inlined. Combinations the walk below never makes are
 * dropped here, so they are not compiled: Q8_0 keeps a block sum beside
 * each accumulator (G x T at most 8), the others at most 16. */
static inline __attribute__((always_inline)) void
block_of_type(const char *w, WeightType type, size_t ldp, int G, const float *x, int T, int n, float *out,
	      size_t ldo, int rows)
{
	if (type == WEIGHT_Q8_0) {
		if (G * T <= 8)
			q8_panel_block(w, ldp, G, x, n, T, n, out, ldo, rows);
	} else if (G * T <= 16) {
		panel_block(w, type, ldp, G, x, n, T, n, out, ldo, rows);
	}
}

/* block_of_type with T a constant, so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void
blocks_of_type(const char *w, WeightType type, size_t ldp, int G, const float *x, int T, int n, float *out,
	       size_t ldo, int rows)
{
	switch (T) {
	case 8: block_of_type(w, type, ldp, G, x, 8, n, out, ldo, rows); break;
	case 7: block_of_type(w, type, ldp, G, x, 7, n, out, ldo, rows); break;
	case 6: block_of_type(w, type, ldp, G, x, 6, n, out, ldo, rows); break;
	case 5: block_of_type(w, type, ldp, G, x, 5, n, out, ldo, rows); break;
	case 4: block_of_type(w, type, ldp, G, x, 4, n, out, ldo, rows); break;
	case 3: block_of_type(w, type, ldp, G, x, 3, n, out, ldo, rows); break;
	case 2: block_of_type(w, type, ldp, G, x, 2, n, out, ldo, rows); break;
	default: block_of_type(w, type, ldp, G, x, 1, n, out, ldo, rows); break;
	}
}

/* Panels a block takes for T tokens: as many as the registers hold. */
static inline __attribute__((always_inline)) int panel_group(WeightType type, int T)
{
	if (type == WEIGHT_Q8_0)
		return T <= 2 ? 4 : T <= 4 ? 2 : 1;
	return T <= 4 ? 4 : 2;
}

/* matmul_rows for one packed type (a constant once inlined): tokens in
 * groups of TOKEN_GROUP, rows in blocks of G panels (fewer at the end). */
static inline __attribute__((always_inline)) void
rows_of_type(const char *w, WeightType type, int n, int r0, int r1, const float *x, int batch, float *out,
	     size_t ldo)
{
	size_t ldp = panel_bytes(type, n);

	for (int b = 0; b < batch; b += TOKEN_GROUP) {
		int T = batch - b < TOKEN_GROUP ? batch - b : TOKEN_GROUP;
		const float *xt = x + (size_t)b * n;
		float *ot = out + (size_t)b * ldo;

		for (int r = r0; r < r1;) {
			const char *wp = w + (size_t)(r / PANEL_ROWS) * ldp;
			int left = r1 - r, G = panel_group(type, T);

			while (G > 1 && left < G * PANEL_ROWS)
				G /= 2;
			int rows = G == 1 && left < PANEL_ROWS ? left : PANEL_ROWS;

			switch (G) {   /* a constant, as T is */
			case 4: blocks_of_type(wp, type, ldp, 4, xt, T, n, ot + r, ldo, rows); break;
			case 2: blocks_of_type(wp, type, ldp, 2, xt, T, n, ot + r, ldo, rows); break;
			default: blocks_of_type(wp, type, ldp, 1, xt, T, n, ot + r, ldo, rows); break;
			}
			r += G * rows;
		}
	}
}

#define KERNEL_NAME(level) KERNEL_NAME_(level)
#define KERNEL_NAME_(level) matmul_rows_typed_##level

void KERNEL_NAME(MATMUL_LEVEL)(const void *w, WeightType type, int n, int r0, int r1, const float *x, int batch,
			       float *out, size_t ldo)
{
	switch (type) {
	case WEIGHT_F16: rows_of_type(w, WEIGHT_F16, n, r0, r1, x, batch, out, ldo); break;
	case WEIGHT_Q8_0: rows_of_type(w, WEIGHT_Q8_0, n, r0, r1, x, batch, out, ldo); break;
	default: rows_of_type(w, WEIGHT_F32, n, r0, r1, x, batch, out, ldo); break;
	}
}

