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
#include "model.h"

#define PANEL_ROWS 16
#define Q8_0_BLOCK 32        /* values per Q8_0 block (ggml's QK8_0) */
#define Q8_0_BLOCK_BYTES 34  /* its f16 scale and 32 int8 values */

/* Floats of a packed (d, n) matrix. */
size_t packed_floats(int d, int n);

/* Packs the row-major (d, n) matrix w into dst (packed_floats(d, n)). */
void pack_matrix(float *dst, const float *w, int d, int n);

/* The same for a matrix stored as type (F32, F16 or Q8_0, row-major as the
 * file holds it): its values keep their type in the panels (Q8_0's block
 * scales are widened to float, exactly); each is converted in registers. */
typedef struct {
	const void *data;
	WeightType type;
} PackedMatrix;
size_t packed_bytes(WeightType type, int d, int n);
void pack_matrix_typed(void *dst, WeightType type, const void *w, int d, int n);
void matmul_rows_typed(const void *w, WeightType type, int n, int r0, int r1, const float *x, int batch,
		       float *out, size_t ldo);

/* out[t * ldo + r] = sum over j of w[r][j] * x[t * n + j], for rows r0..r1-1
 * of the packed (d, n) matrix w (r0 a multiple of PANEL_ROWS, r1 <= d) and
 * tokens t = 0..batch-1. Each weight is read once per 8 tokens. */
void matmul_rows(const float *w, int n, int r0, int r1, const float *x, int batch, float *out,
		 size_t ldo);

#endif
