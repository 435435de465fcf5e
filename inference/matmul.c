/* matmul.c - products over panel-packed weights; see matmul.h. */
#include <stdint.h>
#include <string.h>
#include "matmul.h"

#define TOKEN_GROUP 8 /* tokens per pass over the weights */
#ifndef PREFETCH_COLUMNS
#define PREFETCH_COLUMNS 32
#endif
/* Panels per block: at most 16 accumulators (panels x tokens), so they,
 * the tokens' broadcasts and a load fit the 32 vector registers, and at
 * least 4 chains are in flight for the multiply-add latency. */
#define MAX_PANELS 4

typedef float v16f __attribute__((vector_size(PANEL_ROWS * sizeof(float))));
typedef _Float16 v16h __attribute__((vector_size(PANEL_ROWS * sizeof(_Float16))));
typedef int8_t v16b __attribute__((vector_size(PANEL_ROWS)));

size_t packed_floats(int d, int n)
{
	return (size_t)(d + PANEL_ROWS - 1) / PANEL_ROWS * PANEL_ROWS * n;
}

/* Bytes of one panel of n columns: F32 and F16 hold a column of 16 rows
 * per 64 or 32 bytes; Q8_0 a block of 32 columns per Q8_PANEL_BLOCK bytes:
 * the 16 rows' scales as floats, then 32 columns of 16 int8 values. */
#define Q8_PANEL_BLOCK (PANEL_ROWS * sizeof(float) + Q8_0_BLOCK * PANEL_ROWS)

static size_t panel_bytes(WeightType type, int n)
{
	switch (type) {
	case WEIGHT_F16: return (size_t)n * PANEL_ROWS * 2;
	case WEIGHT_Q8_0: return (size_t)n / Q8_0_BLOCK * Q8_PANEL_BLOCK;
	default: return (size_t)n * PANEL_ROWS * sizeof(float);
	}
}

size_t packed_bytes(WeightType type, int d, int n)
{
	return (size_t)(d + PANEL_ROWS - 1) / PANEL_ROWS * panel_bytes(type, n);
}

static float f16_to_f32(uint16_t u)
{
	_Float16 h;

	memcpy(&h, &u, 2);
	return (float)h;
}

/* Panel p of a row-major F16 (d, n) matrix: the halves moved, not changed. */
static void pack_panel_f16(uint16_t *out, const uint16_t *w, int d, int n, int p)
{
	for (int i = 0; i < PANEL_ROWS; i++) {
		int r = p * PANEL_ROWS + i;

		for (int j = 0; j < n; j++)
			out[(size_t)j * PANEL_ROWS + i] = r < d ? w[(size_t)r * n + j] : 0;
	}
}

/* Panel p of a Q8_0 (d, n) matrix (rows of blocks: f16 scale, 32 int8):
 * the int8 values moved, the scales widened to float (exactly). */
static void pack_panel_q8_0(char *out, const uint8_t *w, int d, int n, int p)
{
	size_t row_bytes = (size_t)n / Q8_0_BLOCK * Q8_0_BLOCK_BYTES;

	for (int b = 0; b < n / Q8_0_BLOCK; b++) {
		char *blk = out + (size_t)b * Q8_PANEL_BLOCK;
		float *scale = (float *)blk;
		int8_t *q = (int8_t *)(blk + PANEL_ROWS * sizeof(float));

		for (int i = 0; i < PANEL_ROWS; i++) {
			int r = p * PANEL_ROWS + i;
			const uint8_t *src = w + (size_t)r * row_bytes + (size_t)b * Q8_0_BLOCK_BYTES;
			uint16_t dh;

			if (r >= d) {
				scale[i] = 0.0f;
				for (int j = 0; j < Q8_0_BLOCK; j++)
					q[j * PANEL_ROWS + i] = 0;
				continue;
			}
			memcpy(&dh, src, 2);
			scale[i] = f16_to_f32(dh);
			for (int j = 0; j < Q8_0_BLOCK; j++)
				q[j * PANEL_ROWS + i] = (int8_t)src[2 + j];
		}
	}
}

void pack_matrix_typed(void *dst, WeightType type, const void *w, int d, int n)
{
	int panels = (d + PANEL_ROWS - 1) / PANEL_ROWS;

	if (type == WEIGHT_F32) {
		pack_matrix(dst, w, d, n);
		return;
	}
#pragma omp parallel for schedule(static)
	for (int p = 0; p < panels; p++) {
		char *out = (char *)dst + (size_t)p * panel_bytes(type, n);

		if (type == WEIGHT_F16)
			pack_panel_f16((uint16_t *)out, w, d, n, p);
		else
			pack_panel_q8_0(out, w, d, n, p);
	}
}

void pack_matrix(float *dst, const float *w, int d, int n)
{
	int panels = (d + PANEL_ROWS - 1) / PANEL_ROWS;

#pragma omp parallel for schedule(static)
	for (int p = 0; p < panels; p++) {
		float *out = dst + (size_t)p * PANEL_ROWS * n;

		for (int i = 0; i < PANEL_ROWS; i++) {
			int r = p * PANEL_ROWS + i;

			for (int j = 0; j < n; j++)
				out[(size_t)j * PANEL_ROWS + i] = r < d ? w[(size_t)r * n + j] : 0.0f;
		}
	}
}

/* Column j of a panel as 16 floats, for each packed type: type is a
 * constant wherever this is inlined, so the branches fold away. (Through a
 * pointer: a returned vector would be an ABI question in the plain clone.) */
static inline __attribute__((always_inline)) void load_column(v16f *v, const char *panel, WeightType type,
							      int j)
{
	if (type == WEIGHT_F16) {
		v16h h;

		memcpy(&h, panel + (size_t)j * sizeof(h), sizeof(h));
		*v = __builtin_convertvector(h, v16f);
	} else if (type == WEIGHT_Q8_0) {
		const char *blk = panel + (size_t)(j / Q8_0_BLOCK) * Q8_PANEL_BLOCK;
		v16f scale;
		v16b q;

		memcpy(&scale, blk, sizeof(scale));
		memcpy(&q, blk + sizeof(scale) + (size_t)(j % Q8_0_BLOCK) * sizeof(q), sizeof(q));
		*v = __builtin_convertvector(q, v16f) * scale;
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

/* panel_block with G and T known at compile time, so the accumulators stay
 * in registers. */
static inline __attribute__((always_inline)) void
panel_blocks(const char *w, WeightType type, size_t ldp, int G, const float *x, int T, int n, float *out,
	     size_t ldo, int rows)
{
	switch (T) {
	case 8: panel_block(w, type, ldp, G, x, n, 8, n, out, ldo, rows); break;
	case 7: panel_block(w, type, ldp, G, x, n, 7, n, out, ldo, rows); break;
	case 6: panel_block(w, type, ldp, G, x, n, 6, n, out, ldo, rows); break;
	case 5: panel_block(w, type, ldp, G, x, n, 5, n, out, ldo, rows); break;
	case 4: panel_block(w, type, ldp, G, x, n, 4, n, out, ldo, rows); break;
	case 3: panel_block(w, type, ldp, G, x, n, 3, n, out, ldo, rows); break;
	case 2: panel_block(w, type, ldp, G, x, n, 2, n, out, ldo, rows); break;
	default: panel_block(w, type, ldp, G, x, n, 1, n, out, ldo, rows); break;
	}
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
				v16b q;
				v16f wv;

				memcpy(&q, col, sizeof(q));
				__builtin_prefetch(col + 2 * Q8_PANEL_BLOCK, 0, 3);
				wv = __builtin_convertvector(q, v16f);
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

/* Rows r0..r1 of a Q8_0 matrix: G x T at most 8 (q8_panel_block). */
static inline __attribute__((always_inline)) void
q8_rows(const char *w, int n, int r0, int r1, const float *x, int batch, float *out, size_t ldo)
{
	size_t ldp = panel_bytes(WEIGHT_Q8_0, n);

	for (int b = 0; b < batch; b += TOKEN_GROUP) {
		int T = batch - b < TOKEN_GROUP ? batch - b : TOKEN_GROUP;
		const float *xt = x + (size_t)b * n;
		float *ot = out + (size_t)b * ldo;

		for (int r = r0; r < r1;) {
			const char *wp = w + (size_t)(r / PANEL_ROWS) * ldp;
			int left = r1 - r, G = T <= 2 ? 4 : T <= 4 ? 2 : 1;

			while (G > 1 && left < G * PANEL_ROWS)
				G /= 2;
			int rows = G == 1 && left < PANEL_ROWS ? left : PANEL_ROWS;

			switch (G * 16 + T) {   /* G and T as constants, so acc stays in registers */
			case 4 * 16 + 1: q8_panel_block(wp, ldp, 4, xt, n, 1, n, ot + r, ldo, rows); break;
			case 4 * 16 + 2: q8_panel_block(wp, ldp, 4, xt, n, 2, n, ot + r, ldo, rows); break;
			case 2 * 16 + 1: q8_panel_block(wp, ldp, 2, xt, n, 1, n, ot + r, ldo, rows); break;
			case 2 * 16 + 2: q8_panel_block(wp, ldp, 2, xt, n, 2, n, ot + r, ldo, rows); break;
			case 2 * 16 + 3: q8_panel_block(wp, ldp, 2, xt, n, 3, n, ot + r, ldo, rows); break;
			case 2 * 16 + 4: q8_panel_block(wp, ldp, 2, xt, n, 4, n, ot + r, ldo, rows); break;
			case 1 * 16 + 1: q8_panel_block(wp, ldp, 1, xt, n, 1, n, ot + r, ldo, rows); break;
			case 1 * 16 + 2: q8_panel_block(wp, ldp, 1, xt, n, 2, n, ot + r, ldo, rows); break;
			case 1 * 16 + 3: q8_panel_block(wp, ldp, 1, xt, n, 3, n, ot + r, ldo, rows); break;
			case 1 * 16 + 4: q8_panel_block(wp, ldp, 1, xt, n, 4, n, ot + r, ldo, rows); break;
			case 1 * 16 + 5: q8_panel_block(wp, ldp, 1, xt, n, 5, n, ot + r, ldo, rows); break;
			case 1 * 16 + 6: q8_panel_block(wp, ldp, 1, xt, n, 6, n, ot + r, ldo, rows); break;
			case 1 * 16 + 7: q8_panel_block(wp, ldp, 1, xt, n, 7, n, ot + r, ldo, rows); break;
			default: q8_panel_block(wp, ldp, 1, xt, n, 8, n, ot + r, ldo, rows); break;
			}
			r += G * rows;
		}
	}
}

/* matmul_rows for one packed type (a constant once inlined). */
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
			int left = r1 - r;

			if (T <= 4 && left >= 4 * PANEL_ROWS) {
				panel_blocks(wp, type, ldp, 4, xt, T, n, ot + r, ldo, PANEL_ROWS);
				r += 4 * PANEL_ROWS;
			} else if (left >= 2 * PANEL_ROWS) {
				panel_blocks(wp, type, ldp, 2, xt, T, n, ot + r, ldo, PANEL_ROWS);
				r += 2 * PANEL_ROWS;
			} else {
				int rows = left < PANEL_ROWS ? left : PANEL_ROWS;

				panel_blocks(wp, type, ldp, 1, xt, T, n, ot + r, ldo, rows);
				r += rows;
			}
		}
	}
}

/* Cloned for x86-64-v4 (AVX-512) and v3 (AVX2, FMA, F16C) where the CPU
 * has them; one machine always takes one clone, so sums never mix clones. */
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void matmul_rows_typed(const void *w, WeightType type, int n, int r0, int r1, const float *x, int batch,
		       float *out, size_t ldo)
{
	/* GCC drops -fno-omit-frame-pointer in target clones; asking for the
	 * frame address keeps the frame, so `spantrace profile` unwinds here. */
	__asm__ volatile("" : : "r"(__builtin_frame_address(0)));
	switch (type) {
	case WEIGHT_F16: rows_of_type(w, WEIGHT_F16, n, r0, r1, x, batch, out, ldo); break;
	case WEIGHT_Q8_0: q8_rows(w, n, r0, r1, x, batch, out, ldo); break;
	default: rows_of_type(w, WEIGHT_F32, n, r0, r1, x, batch, out, ldo); break;
	}
}

void matmul_rows(const float *w, int n, int r0, int r1, const float *x, int batch, float *out, size_t ldo)
{
	matmul_rows_typed(w, WEIGHT_F32, n, r0, r1, x, batch, out, ldo);
}
