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
#include <stdint.h>
#include "model/model.h"
#include "backend/cpu/amx.h"   /* matmul_want_amx: Q4_K batches through tiles, the same bits */

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
 * panels (matmul_panels.h). F32 and F16 weights multiply the float input;
 * the quantized types multiply it quantized to int8 as llama.cpp quantizes
 * Q8_0's input (QuantRows), in exact integer dot products per block of 32
 * (Q8_0_BLOCK; Q6_K's per sub-block of 16). The k-quants (Q4_K, Q6_K) take
 * it as llama.cpp's Q8_K (QuantRows' k form). */
typedef struct {
	const void *data;
	WeightType type;
} PackedMatrix;
size_t packed_bytes(WeightType type, int d, int n);
void pack_matrix_typed(void *dst, WeightType type, const void *w, int d, int n);

/* Rows of n floats quantized in blocks of 32 (Q8_0_BLOCK): d = max|x| / 127,
 * q = x / d rounded to the nearest integer (ties to even) as int8, and s =
 * 128 x the block's sum of q (the packed weights are stored plus 128, as
 * unsigned bytes: s takes that back out). The k-quants' products take the
 * rows as llama.cpp quantizes their input (its Q8_K) instead: blocks of
 * 256, each with its own kd and kq, and ks = 128 x the sum of each 16
 * values; kq is NULL where no matrix is a k-quant, and not filled where n
 * is not whole blocks of 256 (no k-quant has such rows: gguf.c). */
typedef struct {
	int8_t *q;   /* (batch, n) */
	float *d;    /* (batch, n / Q8_0_BLOCK) */
	int32_t *s;  /* (batch, n / Q8_0_BLOCK) */
	int8_t *kq;  /* (batch, n) */
	float *kd;   /* (batch, n / Q6_K_BLOCK) */
	int32_t *ks; /* (batch, n / 16) */
} QuantRows;
/* Bytes and carving for (batch, n); kform: with the Q8_K form. */
size_t quant_rows_bytes(int batch, int n, int kform);
/* Carves a QuantRows for (batch, n) from mem (quant_rows_bytes, 64-aligned). */
QuantRows quant_rows_at(void *mem, int batch, int n, int kform);
/* Quantizes batch rows of n in the forms asked for: QUANT_Q8_0 (q, d, s),
 * QUANT_Q8_K (kq, kd, ks: where out has them and n is whole blocks of 256). */
enum { QUANT_Q8_0 = 1, QUANT_Q8_K = 2 };
void quantize_rows(const float *x, int batch, int n, QuantRows *out, int forms);

/* The form a type's products take (0 for F32 and F16). */
static inline int quant_form_of(WeightType type)
{
	return type == WEIGHT_Q4_K || type == WEIGHT_Q6_K ? QUANT_Q8_K
	       : type == WEIGHT_Q8_0 || type == WEIGHT_Q4_0 ? QUANT_Q8_0
							     : 0;
}

/* A product's input: x, and for quantized weights q (x quantized) too. */
typedef struct {
	const float *x;     /* (batch, n) */
	const QuantRows *q; /* NULL but for quantized weights */
} MatInput;

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
void matmul_rows_typed(const void *w, WeightType type, int n, int r0, int r1, const MatInput *in, int batch,
		       float *out, size_t ldo);

/* out[t * ldo + r] = sum over j of w[r][j] * x[t * n + j], for rows r0..r1-1
 * of the packed (d, n) matrix w (r0 a multiple of PANEL_ROWS, r1 <= d) and
 * tokens t = 0..batch-1. Each weight is read once per 8 tokens. */
void matmul_rows(const float *w, int n, int r0, int r1, const float *x, int batch, float *out,
		 size_t ldo);

#endif
