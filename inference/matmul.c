/* matmul.c - products over panel-packed weights; see matmul.h. */
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

size_t packed_floats(int d, int n)
{
	return (size_t)(d + PANEL_ROWS - 1) / PANEL_ROWS * PANEL_ROWS * n;
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

/* G panels (stride ldp) against T tokens (stride ldx): one accumulator per
 * panel and token, each a chain over j in order. rows < PANEL_ROWS only for
 * a last, partial panel (then G is 1): its other lanes are not stored. */
static inline __attribute__((always_inline)) void
panel_block(const float *w, size_t ldp, int G, const float *x, size_t ldx, int T, int n,
	    float *out, size_t ldo, int rows)
{
	v16f acc[MAX_PANELS][TOKEN_GROUP];

#pragma GCC unroll 4
	for (int g = 0; g < G; g++)
#pragma GCC unroll 8
		for (int t = 0; t < T; t++)
			acc[g][t] = (v16f){ 0 };
	for (int j = 0; j < n; j++)
#pragma GCC unroll 4
		for (int g = 0; g < G; g++) {
			v16f wv;

			memcpy(&wv, w + g * ldp + (size_t)j * PANEL_ROWS, sizeof(wv));
			__builtin_prefetch(w + g * ldp + (size_t)(j + PREFETCH_COLUMNS) * PANEL_ROWS, 0, 3);
			/* scalar times vector: a broadcast load the FMA takes as is */
#pragma GCC unroll 8
			for (int t = 0; t < T; t++)
				acc[g][t] += wv * x[t * ldx + j];
		}
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

/* panel_block with G and T known at compile time, so the accumulators stay
 * in registers. */
static inline __attribute__((always_inline)) void
panel_blocks(const float *w, size_t ldp, int G, const float *x, int T, int n, float *out,
	     size_t ldo, int rows)
{
	switch (T) {
	case 8: panel_block(w, ldp, G, x, n, 8, n, out, ldo, rows); break;
	case 7: panel_block(w, ldp, G, x, n, 7, n, out, ldo, rows); break;
	case 6: panel_block(w, ldp, G, x, n, 6, n, out, ldo, rows); break;
	case 5: panel_block(w, ldp, G, x, n, 5, n, out, ldo, rows); break;
	case 4: panel_block(w, ldp, G, x, n, 4, n, out, ldo, rows); break;
	case 3: panel_block(w, ldp, G, x, n, 3, n, out, ldo, rows); break;
	case 2: panel_block(w, ldp, G, x, n, 2, n, out, ldo, rows); break;
	default: panel_block(w, ldp, G, x, n, 1, n, out, ldo, rows); break;
	}
}

/* Cloned for x86-64-v4 (AVX-512) and v3 (AVX2, FMA) where the CPU has
 * them; one machine always takes one clone, so sums never mix clones. */
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void matmul_rows(const float *w, int n, int r0, int r1, const float *x, int batch, float *out,
		 size_t ldo)
{
	size_t ldp = (size_t)n * PANEL_ROWS;

	/* GCC drops -fno-omit-frame-pointer in target clones; asking for the
	 * frame address keeps the frame, so `spantrace profile` unwinds here. */
	__asm__ volatile("" : : "r"(__builtin_frame_address(0)));
	for (int b = 0; b < batch; b += TOKEN_GROUP) {
		int T = batch - b < TOKEN_GROUP ? batch - b : TOKEN_GROUP;
		const float *xt = x + (size_t)b * n;
		float *ot = out + (size_t)b * ldo;

		for (int r = r0; r < r1;) {
			const float *wp = w + (size_t)(r / PANEL_ROWS) * ldp;
			int left = r1 - r;

			if (T <= 4 && left >= 4 * PANEL_ROWS) {
				panel_blocks(wp, ldp, 4, xt, T, n, ot + r, ldo, PANEL_ROWS);
				r += 4 * PANEL_ROWS;
			} else if (left >= 2 * PANEL_ROWS) {
				panel_blocks(wp, ldp, 2, xt, T, n, ot + r, ldo, PANEL_ROWS);
				r += 2 * PANEL_ROWS;
			} else {
				int rows = left < PANEL_ROWS ? left : PANEL_ROWS;

				panel_blocks(wp, ldp, 1, xt, T, n, ot + r, ldo, rows);
				r += rows;
			}
		}
	}
}
