/* matmul.h - the CPU backend's matrix products, over panel-packed weights
 * (backend/panels.h).
 *
 * Batch invariance (backend.h): every output element is one fused
 * multiply-add chain over its row, in column order, starting from zero,
 * whichever block of rows and tokens computes it. */
#ifndef INFER_MATMUL_H
#define INFER_MATMUL_H

#include <stddef.h>
#include <stdint.h>
#include "backend/panels.h"
#include "backend/cpu/amx.h"   /* matmul_want_amx: Q4_K batches through tiles, the same bits */

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
void quantize_rows(const float *x, int batch, int n, QuantRows *out, int forms);

/* A product's input: x, and for quantized weights q (x quantized) too. */
typedef struct {
	const float *x;     /* (batch, n) */
	const QuantRows *q; /* NULL but for quantized weights */
} MatInput;
void matmul_rows_typed(const void *w, WeightType type, int n, int r0, int r1, const MatInput *in, int batch,
		       float *out, size_t ldo);

/* out[t * ldo + r] = sum over j of w[r][j] * x[t * n + j], for rows r0..r1-1
 * of the packed (d, n) matrix w (r0 a multiple of PANEL_ROWS, r1 <= d) and
 * tokens t = 0..batch-1. Each weight is read once per 8 tokens. */
void matmul_rows(const float *w, int n, int r0, int r1, const float *x, int batch, float *out,
		 size_t ldo);

#endif
