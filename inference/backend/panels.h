/* panels.h - the packed layout of the weights, panels of 16 rows, and the
 * packing (panels.c): both backends' products read it, the CPU's
 * (backend/cpu/matmul.h) and the OpenCL kernels, so it is neither's own.
 *
 * A row-major (d, n) matrix is packed as ceil(d / PANEL_ROWS) panels; panel
 * p holds rows PANEL_ROWS * p.. column by column, so one 64-byte load is
 * 16 rows' weights for one input column. A product then multiplies that
 * load by one input value broadcast, and needs no sum across vector lanes:
 * with 8 tokens the step stays bound by the multiply-adds, not by the
 * shuffles of 128 horizontal sums. Rows past d are zero. */
#ifndef INFER_PANELS_H
#define INFER_PANELS_H

#include <stddef.h>
#include <stdint.h>
#include "model/model.h"

#define PANEL_ROWS 16
#define Q8_0_BLOCK 32        /* values per Q8_0 block (ggml's QK8_0) */
#define Q8_0_BLOCK_BYTES 34  /* its f16 scale and 32 int8 values */
#define Q4_0_BLOCK_BYTES 18  /* Q4_0's: an f16 scale, 32 4-bit values (ggml's block_q4_0) */
#define Q6_K_BLOCK 256       /* a k-quant's superblock (Q4_K: 8 sub-blocks of 32; Q6_K: 16 of 16) */
#define Q4_K_BLOCK_BYTES 144 /* two f16 scales, 6-bit scales and mins, 4 bits a value */
#define Q6_K_BLOCK_BYTES 210 /* 4 low and 2 high bits a value, 16 int8 scales, an f16 scale */

/* Floats of a packed (d, n) matrix. */
size_t packed_floats(int d, int n);

/* Packs the row-major (d, n) matrix w into dst (packed_floats(d, n)). */
void pack_matrix(float *dst, const float *w, int d, int n);

/* The same for a matrix stored as type (F32, F16, Q8_0, Q4_0, Q4_K or Q6_K,
 * row-major as the file holds it): its values keep their type in the
 * panels (panel_bytes, below). F32 and F16 weights multiply the float
 * input; the quantized types multiply it quantized to int8 as llama.cpp
 * quantizes Q8_0's input (QuantRows, backend/cpu/matmul.h), in exact
 * integer dot products per block of 32 (Q8_0_BLOCK; Q6_K's per sub-block
 * of 16). The k-quants (Q4_K, Q6_K) take it as llama.cpp's Q8_K
 * (QuantRows' k form). */
typedef struct {
	const void *data;
	WeightType type;
} PackedMatrix;
size_t packed_bytes(WeightType type, int d, int n);
void pack_matrix_typed(void *dst, WeightType type, const void *w, int d, int n);

/* The forms a product's input is quantized in (quantize_rows,
 * backend/cpu/matmul.h): Q8_0's, and the k-quants' Q8_K. */
enum { QUANT_Q8_0 = 1, QUANT_Q8_K = 2 };

/* The form a type's products take (0 for F32 and F16). */
static inline int quant_form_of(WeightType type)
{
	return type == WEIGHT_Q4_K || type == WEIGHT_Q6_K ? QUANT_Q8_K
	       : type == WEIGHT_Q8_0 || type == WEIGHT_Q4_0 ? QUANT_Q8_0
							     : 0;
}

/* out = the n values of one quantized row (n whole blocks). */
void dequantize_row(float *out, const void *row, WeightType type, int n);

/* Whether a type's products take the input quantized (MatInput's q). */
static inline int weight_type_quantized(WeightType type)
{
	return quant_form_of(type) != 0;
}

/* Whether a type is a k-quant: superblocks of 256, input as Q8_K. */
static inline int weight_type_kquant(WeightType type)
{
	return quant_form_of(type) == QUANT_Q8_K;
}

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

#endif
