/* matmul.h - the CPU backend's matrix products, over panel-packed weights.
 *
 * A row-major (d, n) matrix is packed as ceil(d / PANEL_ROWS) panels; panel
 * p holds rows PANEL_ROWS * p.. column by column, so one 64-byte load is
 * 16 rows' weights for one input column. A product then multiplies that
 * load by one input value broadcast, and needs no sum across vector lanes:
 * with 8 tokens the step stays bound by the multiply-adds, not by the
 * shuffles of 128 horizontal sums. Rows past d are zero.
 *
 * Batch invariance (backend.h): every output element is one fused
 * multiply-add chain over its row, in column order, starting from zero,
 * whichever block of rows and tokens computes it. */
#ifndef INFER_MATMUL_H
#define INFER_MATMUL_H

#include <stddef.h>

#define PANEL_ROWS 16

/* Floats of a packed (d, n) matrix. */
size_t packed_floats(int d, int n);

/* Packs the row-major (d, n) matrix w into dst (packed_floats(d, n)). */
void pack_matrix(float *dst, const float *w, int d, int n);

/* out[t * ldo + r] = sum over j of w[r][j] * x[t * n + j], for rows r0..r1-1
 * of the packed (d, n) matrix w (r0 a multiple of PANEL_ROWS, r1 <= d) and
 * tokens t = 0..batch-1. Each weight is read once per 8 tokens. */
void matmul_rows(const float *w, int n, int r0, int r1, const float *x, int batch, float *out,
		 size_t ldo);

#endif
