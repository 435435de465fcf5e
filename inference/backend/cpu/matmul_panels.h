/* matmul_panels.h - the panel layout and vector types that matmul.c (the
 * packing) and matmul_kernel.c (the products) share; internal to them. */
#ifndef INFER_MATMUL_PANELS_H
#define INFER_MATMUL_PANELS_H

#include <stddef.h>
#include <stdint.h>
#include "backend/cpu/matmul.h"

#define TOKEN_GROUP 8 /* tokens per pass over the weights */
/* Bytes ahead in a panel to prefetch F32 and F16 columns: 32 columns of
 * F32. F16 at 32 columns (1 KB) ran 11% slower out of cache. */
#define PREFETCH_BYTES 2048
/* Panels per block: at most 16 accumulators (panels x tokens), so they,
 * the tokens' broadcasts and a load fit the 32 vector registers, and at
 * least 4 chains are in flight for the multiply-add latency. */
#define MAX_PANELS 4

typedef float v16f __attribute__((vector_size(PANEL_ROWS * sizeof(float))));
typedef _Float16 v16h __attribute__((vector_size(PANEL_ROWS * sizeof(_Float16))));

/* Bytes of one panel of n columns: F32 and F16 hold a column of 16 rows
 * per 64 or 32 bytes. Q8_0 and Q4_0 keep their scales as stored, in halves:
 * first every block's 16 (block b's at 32b), padded to 64 bytes, then per
 * block of 32 columns its values. Q8_0's are 8 quads of 4 columns, 64
 * bytes each: row i's 4 values at 4i, plus 128, as unsigned bytes. So one
 * 64-byte load is 16 rows by 4 columns, the operand of a 4-way integer dot
 * product (VNNI's vpdpbusd: unsigned bytes times signed ones), and a panel
 * takes the bytes its rows take in the file. */
#define Q8_QUAD_BYTES (PANEL_ROWS * 4)
#define Q8_QUADS (Q8_0_BLOCK / 4)
/* Q4_0's values are 4 pairs of quads in 64 bytes each: row i's byte c of
 * pair m (at 64m + 4i + c) holds column 8m + c in its low nibble and
 * column 8m + 4 + c in its high one, as stored (value + 8). So a mask or a
 * shift of one load is a quad, as Q8_0's load is.
 * Q6_K's values are Q8_0's quads, each 6-bit code q as q + 96 (its value q
 * - 32, plus 128): a byte for 6.56 bits, so its products are Q8_0's. Its
 * scales: per block of 32 columns 32 bytes, the 16 rows' int8 scales of
 * the block's first sub-block of 16 columns, then of its second; after all
 * blocks, per superblock of 256 columns the 16 rows' f16 scales d.
 * Q4_K's values are Q4_0's pairs of quads, each nibble its code (0..15,
 * no offset). Its scales: per block of 32 columns (a sub-block) the 16
 * rows' 6-bit scales, then their 6-bit mins, a byte each; after all
 * blocks, per superblock the 16 rows' f16 d, then their f16 dmin. */
static inline int nibble_type(WeightType type)
{
	return type == WEIGHT_Q4_0 || type == WEIGHT_Q4_K;
}

static inline size_t quant_block_bytes(WeightType type)
{
	return nibble_type(type) ? Q8_0_BLOCK * PANEL_ROWS / 2 : Q8_0_BLOCK * PANEL_ROWS;
}

/* Where a k-quant panel's superblock scales start. */
static inline size_t kquant_d_offset(int n)
{
	return (size_t)n / Q8_0_BLOCK * 2 * PANEL_ROWS;
}

/* Bytes of a quantized panel's scales, where its blocks' values start. */
static inline size_t quant_scale_bytes(WeightType type, int n)
{
	size_t per_superblock = type == WEIGHT_Q4_K ? 2 : 1; /* d, and Q4_K's dmin */
	size_t b = weight_type_kquant(type)
			   ? kquant_d_offset(n) + (size_t)n / Q6_K_BLOCK * per_superblock * PANEL_ROWS * 2
			   : (size_t)n / Q8_0_BLOCK * PANEL_ROWS * 2;
	return (b + 63) / 64 * 64;
}

static inline size_t panel_bytes(WeightType type, int n)
{
	switch (type) {
	case WEIGHT_F16: return (size_t)n * PANEL_ROWS * 2;
	case WEIGHT_Q8_0:
	case WEIGHT_Q4_0:
	case WEIGHT_Q4_K:
	case WEIGHT_Q6_K:
		return quant_scale_bytes(type, n) + (size_t)n / Q8_0_BLOCK * quant_block_bytes(type);
	default: return (size_t)n * PANEL_ROWS * sizeof(float);
	}
}

/* One kernel build (matmul_kernel.c): matmul_rows_typed and quantize_rows
 * for one x86-64 level, named <function>_<level>. */
typedef void matmul_kernel_fn(const void *w, WeightType type, int n, int r0, int r1, const MatInput *in,
			      int batch, float *out, size_t ldo);
typedef void quantize_fn(const float *x, int batch, int n, QuantRows *out, int forms);
#define MATMUL_KERNEL(level) matmul_kernel_fn matmul_rows_typed_##level; quantize_fn quantize_rows_##level

#endif
