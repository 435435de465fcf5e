/* test_matmul.c - products over panel-packed weights (matmul.h) against a
 * plain reference, on shapes that are and are not multiples of the 16-row
 * panel and of the 8-token group: each output is the serial fused
 * multiply-add chain over its row (bit for bit where the CPU has FMA), a
 * token's outputs do not depend on the batch, and nothing outside the
 * asked rows is written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_kernel.h"

#define SENTINEL -12345.0f

static float frand(unsigned *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* A byte from the same generator: every value 0..255. */
static unsigned char rand_byte(unsigned *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return (unsigned char)(*seed >> 16);
}

/* The chain matmul.h promises: acc = w[r][0] * x[0] + ..., one FMA a step
 * in column order (fmaf), or in double for the tolerance check. */
static float chain(const float *w, const float *x, int n)
{
	float acc = 0.0f;

	for (int j = 0; j < n; j++)
		acc = fmaf(w[j], x[j], acc);
	return acc;
}

static double exact(const float *w, const float *x, int n, double *mag)
{
	double acc = 0.0;

	*mag = 0.0;
	for (int j = 0; j < n; j++) {
		acc += (double)w[j] * x[j];
		*mag += fabs((double)w[j] * x[j]);
	}
	return acc;
}

/* Rows r0..r1-1 of a (d, n) matrix against `batch` tokens; checks every
 * output and that nothing else in out changed. */
static void check_shape(int d, int n, int batch, int r0, int r1, int fma_exact)
{
	unsigned seed = (unsigned)(d * 7919 + n * 104729 + batch);
	float *w = malloc((size_t)d * n * sizeof(float));
	float *x = malloc((size_t)batch * n * sizeof(float));
	float *packed = malloc(packed_floats(d, n) * sizeof(float));
	float *out = malloc((size_t)batch * d * sizeof(float));

	for (size_t i = 0; i < (size_t)d * n; i++)
		w[i] = frand(&seed);
	for (size_t i = 0; i < (size_t)batch * n; i++)
		x[i] = frand(&seed);
	for (size_t i = 0; i < (size_t)batch * d; i++)
		out[i] = SENTINEL;
	pack_matrix(packed, w, d, n);
	matmul_rows(packed, n, r0, r1, x, batch, out, (size_t)d);
	for (int t = 0; t < batch; t++)
		for (int r = 0; r < d; r++) {
			float got = out[(size_t)t * d + r];
			double mag, want = exact(w + (size_t)r * n, x + (size_t)t * n, n, &mag);

			if (r < r0 || r >= r1) {
				CHECK(got == SENTINEL, "d=%d n=%d batch=%d rows %d..%d: row %d token %d written",
				      d, n, batch, r0, r1, r, t);
				continue;
			}
			CHECK(fabs(got - want) <= 1e-6 * mag + 1e-6,
			      "d=%d n=%d batch=%d: row %d token %d = %g, want %g", d, n, batch, r, t,
			      got, want);
			if (fma_exact)
				CHECK(got == chain(w + (size_t)r * n, x + (size_t)t * n, n),
				      "d=%d n=%d batch=%d: row %d token %d is not the FMA chain", d, n,
				      batch, r, t);
		}
	free(w);
	free(x);
	free(packed);
	free(out);
}

/* Token t's outputs alone and in batches of every size up to 19 (two token
 * groups and a part) are the same bits. */
static void check_invariance(int d, int n)
{
	unsigned seed = 99;
	int most = 19;
	float *w = malloc((size_t)d * n * sizeof(float));
	float *x = malloc((size_t)most * n * sizeof(float));
	float *packed = malloc(packed_floats(d, n) * sizeof(float));
	float *alone = malloc((size_t)d * sizeof(float));
	float *out = malloc((size_t)most * d * sizeof(float));

	for (size_t i = 0; i < (size_t)d * n; i++)
		w[i] = frand(&seed);
	for (size_t i = 0; i < (size_t)most * n; i++)
		x[i] = frand(&seed);
	pack_matrix(packed, w, d, n);
	for (int batch = 1; batch <= most; batch++) {
		int t = batch - 1; /* the last token: it moves through every group position */

		matmul_rows(packed, n, 0, d, x + (size_t)t * n, 1, alone, (size_t)d);
		matmul_rows(packed, n, 0, d, x, batch, out, (size_t)d);
		CHECK(!memcmp(alone, out + (size_t)t * d, (size_t)d * sizeof(float)),
		      "d=%d n=%d: token %d differs in a batch of %d", d, n, t, batch);
	}
	free(w);
	free(x);
	free(packed);
	free(alone);
	free(out);
}

/* ---- F16, Q8_0, Q4_0, Q4_K and Q6_K: the stored values; F16 converted in
 * registers, the others multiplying their input quantized ---- */

/* Bytes of a row of n values of type as a GGUF file stores it. */
static size_t stored_row_bytes(WeightType type, int n)
{
	switch (type) {
	case WEIGHT_F32: return (size_t)n * 4;
	case WEIGHT_F16: return (size_t)n * 2;
	case WEIGHT_Q4_0: return (size_t)n / Q8_0_BLOCK * Q4_0_BLOCK_BYTES;
	case WEIGHT_Q6_K: return (size_t)n / Q6_K_BLOCK * Q6_K_BLOCK_BYTES;
	case WEIGHT_Q4_K: return (size_t)n / Q6_K_BLOCK * Q4_K_BLOCK_BYTES;
	default: return (size_t)n / Q8_0_BLOCK * Q8_0_BLOCK_BYTES;
	}
}

/* The value of one stored weight as a float: F16 is exact; Q8_0 is int8
 * and Q4_0 a nibble less 8 (value j low in byte j, j + 16 high), times the
 * block's f16 scale. Rows are in GGUF's layout. */
static void stored_row(WeightType type, const void *w, int n, int r, float *out, float *scale)
{
	if (type == WEIGHT_F16) {
		const _Float16 *row = (const _Float16 *)w + (size_t)r * n;

		for (int j = 0; j < n; j++)
			out[j] = (float)row[j];
		return;
	}
	const unsigned char *row = (const unsigned char *)w + (size_t)r * stored_row_bytes(type, n);

	if (type == WEIGHT_Q4_K) { /* the codes, 0..15; the chain reads the scales from row */
		for (int j = 0; j < n; j++) {
			const unsigned char *blk = row + (size_t)(j / Q6_K_BLOCK) * Q4_K_BLOCK_BYTES;
			int v = j % Q6_K_BLOCK;

			out[j] = (float)((blk[16 + v / 64 * 32 + v % 32] >> (v % 64 / 32 * 4)) & 15);
		}
		return;
	}
	if (type == WEIGHT_Q6_K) { /* scale: per 16 values d x the int8 scale, ggml's order */
		for (int j = 0; j < n; j++) {
			const unsigned char *blk = row + (size_t)(j / Q6_K_BLOCK) * Q6_K_BLOCK_BYTES;
			int v = j % Q6_K_BLOCK, h = v / 128, g = v % 128 / 32, l = v % 32;
			int low = (blk[h * 64 + l + 32 * (g & 1)] >> (g / 2 * 4)) & 15;
			int high = (blk[128 + h * 32 + l] >> (2 * g)) & 3;
			_Float16 d;

			memcpy(&d, blk + 208, 2);
			out[j] = (float)((low | high << 4) - 32);
			if (j % 16 == 0)
				scale[j / 16] = (float)d * (float)(signed char)blk[192 + v / 16];
		}
		return;
	}
	size_t block_bytes = type == WEIGHT_Q4_0 ? Q4_0_BLOCK_BYTES : Q8_0_BLOCK_BYTES;

	for (int b = 0; b < n / Q8_0_BLOCK; b++, row += block_bytes) {
		_Float16 d;

		memcpy(&d, row, 2);
		scale[b] = (float)d;
		for (int j = 0; j < Q8_0_BLOCK; j++)
			out[b * Q8_0_BLOCK + j] = type == WEIGHT_Q4_0
							  ? (float)(((row[2 + j % 16] >> (j / 16 * 4)) & 15) - 8)
							  : (float)(signed char)row[2 + j];
	}
}

/* The chains matmul.h promises for a stored type: F16 as F32. */
static float typed_chain(const float *v, const float *x, int n)
{
	return chain(v, x, n);
}

/* Q8_0 and Q4_0: x quantized per block of 32 as llama.cpp does, but d a float and
 * ties to even (q is an integer below 2^22 in magnitude); then per block
 * the exact integer dot product, added in one fmaf by scale * d. Checks
 * quantize_rows' values on the way. */
static float q8_chain(const float *v, const float *scale, const float *x, int n, const QuantRows *xq, int t)
{
	float acc = 0.0f;

	for (int b = 0; b < n / Q8_0_BLOCK; b++) {
		const float *xb = x + b * Q8_0_BLOCK;
		float amax = 0.0f, d, id;
		int32_t isum = 0, sum = 0;

		for (int j = 0; j < Q8_0_BLOCK; j++)
			amax = fmaxf(amax, fabsf(xb[j]));
		d = amax / 127.0f;
		id = d != 0.0f ? 1.0f / d : 0.0f;
		for (int j = 0; j < Q8_0_BLOCK; j++) {
			int q = (int)nearbyintf(xb[j] * id);

			CHECK(q == xq->q[(size_t)t * n + b * Q8_0_BLOCK + j] || fabsf(xb[j] * id - nearbyintf(xb[j] * id)) > 0.49f,
			      "quantize_rows: block %d value %d: %d, want %d", b, j, xq->q[(size_t)t * n + b * Q8_0_BLOCK + j], q);
			q = xq->q[(size_t)t * n + b * Q8_0_BLOCK + j]; /* a tie's side is fmaf's */
			isum += q * (int32_t)v[b * Q8_0_BLOCK + j];
			sum += q;
		}
		CHECK(xq->d[(size_t)t * (n / Q8_0_BLOCK) + b] == d && xq->s[(size_t)t * (n / Q8_0_BLOCK) + b] == 128 * sum,
		      "quantize_rows: block %d scale or sum", b);
		acc = fmaf((float)isum, scale[b] * d, acc);
	}
	return acc;
}

/* Block kb of token t's x quantized as llama.cpp's quantize_row_q8_K_ref
 * (the k-quants' input): the signed value of largest magnitude codes -127;
 * each product rounded, then to an integer, ties to even; at most 127.
 * Checks quantize_rows' k form and returns its scale, q the 256 values. */
static float q8k_block(const float *xb, const QuantRows *xq, int n, int t, int kb, int q[Q6_K_BLOCK])
{
	float amax = 0.0f, max = 0.0f, iscale, kd;

	for (int j = 0; j < Q6_K_BLOCK; j++)
		if (fabsf(xb[j]) > amax)
			amax = fabsf(xb[j]), max = xb[j];
	iscale = amax != 0.0f ? -127.0f / max : 0.0f;
	kd = amax != 0.0f ? 1.0f / iscale : 0.0f;
	CHECK(xq->kd[(size_t)t * (n / Q6_K_BLOCK) + kb] == kd, "quantize_rows: Q8_K block %d scale", kb);
	for (int sb = 0; sb < Q6_K_BLOCK / 16; sb++) {
		int32_t sum = 0;

		for (int j = sb * 16; j < sb * 16 + 16; j++) {
			volatile float p = iscale * xb[j]; /* rounded, as llama.cpp's */

			q[j] = (int)nearbyintf(p);
			q[j] = q[j] < 127 ? q[j] : 127;
			CHECK(q[j] == xq->kq[(size_t)t * n + kb * Q6_K_BLOCK + j], "quantize_rows: Q8_K value %d: %d, want %d",
			      j, xq->kq[(size_t)t * n + kb * Q6_K_BLOCK + j], q[j]);
			sum += q[j];
		}
		CHECK(xq->ks[(size_t)t * (n / 16) + kb * 16 + sb] == 128 * sum, "quantize_rows: Q8_K sum %d", sb);
	}
	return kd;
}

/* Q6_K: x as q8k_block, then per sub-block of 16 the exact integer dot
 * product times its int8 scale, added in one fmaf by d times the block's
 * scale. v holds the values (code - 32), row the file's bytes. */
static float q6k_chain(const float *v, const unsigned char *row, const float *x, int n, const QuantRows *xq, int t)
{
	float acc = 0.0f;

	for (int kb = 0; kb < n / Q6_K_BLOCK; kb++) {
		const unsigned char *blk = row + (size_t)kb * Q6_K_BLOCK_BYTES;
		int q[Q6_K_BLOCK];
		float kd = q8k_block(x + kb * Q6_K_BLOCK, xq, n, t, kb, q);
		_Float16 dh;

		memcpy(&dh, blk + 208, 2);
		for (int sb = 0; sb < Q6_K_BLOCK / 16; sb++) {
			int32_t isum = 0;

			for (int j = sb * 16; j < sb * 16 + 16; j++)
				isum += q[j] * (int32_t)v[kb * Q6_K_BLOCK + j];
			acc = fmaf((float)(isum * (signed char)blk[192 + sb]), (float)dh * kd, acc);
		}
	}
	return acc;
}

/* Q4_K sub-block j's 6-bit scale and min, unpacked from a superblock's 12
 * bytes as ggml's get_scale_min_k4 does. */
static void q4k_scale_min_ref(const unsigned char *blk, int j, int *sc, int *m)
{
	const unsigned char *q = blk + 4;

	*sc = j < 4 ? q[j] & 63 : (q[j + 4] & 15) | (q[j - 4] >> 6) << 4;
	*m = j < 4 ? q[j + 4] & 63 : (q[j + 4] >> 4) | (q[j] >> 6) << 4;
}

/* Q4_K: x as q8k_block, then per sub-block of 32 the exact integer dot
 * product with the codes times the 6-bit scale, added in one fmaf by d
 * times the block's scale, then the 6-bit min times the input's sum in one
 * by -dmin times it. v holds the codes, row the file's bytes. */
static float q4k_chain(const float *v, const unsigned char *row, const float *x, int n, const QuantRows *xq, int t)
{
	float acc = 0.0f;

	for (int kb = 0; kb < n / Q6_K_BLOCK; kb++) {
		const unsigned char *blk = row + (size_t)kb * Q4_K_BLOCK_BYTES;
		int q[Q6_K_BLOCK];
		float kd = q8k_block(x + kb * Q6_K_BLOCK, xq, n, t, kb, q);
		_Float16 dh, mh;

		memcpy(&dh, blk, 2);
		memcpy(&mh, blk + 2, 2);
		for (int sb = 0; sb < 8; sb++) {
			int32_t isum = 0, sum = 0;
			int sc, m;

			q4k_scale_min_ref(blk, sb, &sc, &m);
			for (int j = sb * 32; j < sb * 32 + 32; j++) {
				isum += q[j] * (int32_t)v[kb * Q6_K_BLOCK + j];
				sum += q[j];
			}
			acc = fmaf((float)(isum * sc), (float)dh * kd, acc);
			acc = fmaf((float)m * (float)sum, (float)mh * -kd, acc);
		}
	}
	return acc;
}

/* A (d, n) matrix as a file stores type, random: F32 and F16 values, or
 * Q8_0 and Q4_0 blocks of random bytes with finite, distinct scales. */
static void fill_stored(WeightType type, unsigned char *w, int d, int n, size_t row_bytes, unsigned *seed)
{
	for (size_t i = 0; i < (size_t)d * row_bytes; i++)
		w[i] = rand_byte(seed);
	if (type == WEIGHT_F32)
		for (size_t i = 0; i < (size_t)d * n; i++)
			((float *)(void *)w)[i] = frand(seed);
	else if (type == WEIGHT_F16)
		for (size_t i = 0; i < (size_t)d * n; i++) {
			_Float16 h = (_Float16)frand(seed);
			memcpy(w + 2 * i, &h, 2);
		}
	else if (type == WEIGHT_Q4_K) /* random 6-bit scales and mins; finite d and dmin */
		for (int r = 0; r < d; r++)
			for (int kb = 0; kb < n / Q6_K_BLOCK; kb++) {
				unsigned char *blk = w + r * row_bytes + kb * Q4_K_BLOCK_BYTES;
				_Float16 h = (_Float16)(0.01f + 0.001f * (float)(r + kb)), m = (_Float16)(0.02f + 0.001f * (float)kb);

				for (int j = 4; j < 16; j++)
					blk[j] = rand_byte(seed);
				memcpy(blk, &h, 2);
				memcpy(blk + 2, &m, 2);
			}
	else if (type == WEIGHT_Q6_K) /* int8 scales of both signs, -128 too; a finite d */
		for (int r = 0; r < d; r++)
			for (int kb = 0; kb < n / Q6_K_BLOCK; kb++) {
				unsigned char *blk = w + r * row_bytes + kb * Q6_K_BLOCK_BYTES;
				_Float16 h = (_Float16)(0.01f + 0.001f * (float)(r + kb));

				for (int j = 0; j < 16; j++)
					blk[192 + j] = rand_byte(seed);
				blk[192 + r % 16] = 0x80;
				memcpy(blk + 208, &h, 2);
			}
	else
		for (int r = 0; r < d; r++)
			for (int b = 0; b < n / Q8_0_BLOCK; b++) {
				_Float16 h = (_Float16)(0.01f + 0.001f * (float)(r + b));
				memcpy(w + r * row_bytes + b * (row_bytes / (n / Q8_0_BLOCK)), &h, 2);
			}
}

static void check_typed(WeightType type, int d, int n, int batch, int fma_exact)
{
	unsigned seed = (unsigned)(d * 31 + n * 7 + batch + type);
	size_t row_bytes = stored_row_bytes(type, n);
	unsigned char *w = malloc((size_t)d * row_bytes);
	void *packed = malloc(packed_bytes(type, d, n));
	float *x = malloc((size_t)batch * n * sizeof(float)), *out = malloc((size_t)batch * d * sizeof(float));
	float *v = malloc((size_t)n * sizeof(float)), *scale = malloc((size_t)(n / 16 + 1) * sizeof(float));
	float *alone = malloc((size_t)d * sizeof(float));

	fill_stored(type, w, d, n, row_bytes, &seed);
	for (int i = 0; i < batch * n; i++)
		x[i] = frand(&seed);
	void *qmem = aligned_alloc(64, (quant_rows_bytes(batch, n, 1) + 63) / 64 * 64);
	QuantRows xq = quant_rows_at(qmem, batch, n, 1);
	MatInput in = { x, weight_type_quantized(type) ? &xq : NULL };

	if (weight_type_quantized(type))
		quantize_rows(x, batch, n, &xq, QUANT_Q8_0 | QUANT_Q8_K);
	pack_matrix_typed(packed, type, w, d, n);
	matmul_rows_typed(packed, type, n, 0, d, &in, batch, out, (size_t)d);
	for (int r = 0; r < d; r++) {
		stored_row(type, w, n, r, v, scale);
		for (int t = 0; t < batch; t++) {
			float want = type == WEIGHT_F16    ? typed_chain(v, x + (size_t)t * n, n)
				     : type == WEIGHT_Q6_K ? q6k_chain(v, w + (size_t)r * row_bytes, x + (size_t)t * n, n,
								       &xq, t)
				     : type == WEIGHT_Q4_K ? q4k_chain(v, w + (size_t)r * row_bytes, x + (size_t)t * n, n,
								       &xq, t)
							   : q8_chain(v, scale, x + (size_t)t * n, n, &xq, t);
			float got = out[(size_t)t * d + r];

			if (fma_exact)
				CHECK(got == want, "%s d=%d n=%d batch=%d row %d token %d: %.9g, chain %.9g",
				      weight_type_name(type), d, n, batch, r, t, got, want);
			else
				CHECK(fabsf(got - want) <= 1e-4f * (1.0f + fabsf(want)), "%s tolerance", "typed");
		}
	}
	/* batch invariance: each token alone gives its batch result */
	for (int t = 0; t < batch; t++) {
		QuantRows one = { xq.q + (size_t)t * n,		 xq.d + (size_t)t * (n / Q8_0_BLOCK),
				  xq.s + (size_t)t * (n / Q8_0_BLOCK), xq.kq + (size_t)t * n,
				  xq.kd + (size_t)t * (n / Q6_K_BLOCK), xq.ks + (size_t)t * (n / 16) };
		MatInput alone_in = { x + (size_t)t * n, weight_type_quantized(type) ? &one : NULL };

		matmul_rows_typed(packed, type, n, 0, d, &alone_in, 1, alone, (size_t)d);
		CHECK(!memcmp(alone, out + (size_t)t * d, (size_t)d * sizeof(float)),
		      "%s d=%d n=%d: token %d alone differs from its batch of %d", weight_type_name(type),
		      d, n, t, batch);
	}
	free(w), free(packed), free(x), free(out), free(v), free(scale), free(alone), free(qmem);
}

/* Every build of the products this CPU can run (matmul_kernel.c), not
 * only the one the ifunc picks: the same values from each. Q8_0's integer
 * sums are exact on every build, so with FMA (v4vnni, v4, v3) each output
 * equals the picked build's bit for bit; the base build multiplies and
 * adds apart, so it is held to a tolerance. */
#if defined(__x86_64__)
MATMUL_KERNEL(v4vnni);
MATMUL_KERNEL(v4);
MATMUL_KERNEL(v3);
MATMUL_KERNEL(base);

static void check_levels(WeightType type, int d, int n, int batch, int picked_fused)
{
	const struct {
		const char *name;
		int runs; /* this CPU has what the build needs */
		matmul_kernel_fn *mm;
		quantize_fn *quant;
		int fused;
	} levels[] = {
		{ "v4vnni", __builtin_cpu_supports("x86-64-v4") && __builtin_cpu_supports("avx512vnni"),
		  matmul_rows_typed_v4vnni, quantize_rows_v4vnni, 1 },
		{ "v4", __builtin_cpu_supports("x86-64-v4"), matmul_rows_typed_v4, quantize_rows_v4, 1 },
		{ "v3", __builtin_cpu_supports("x86-64-v3"), matmul_rows_typed_v3, quantize_rows_v3, 1 },
		{ "base", 1, matmul_rows_typed_base, quantize_rows_base, 0 },
	};
	unsigned seed = (unsigned)(d * 13 + n + batch * 5 + type);
	size_t row_bytes = stored_row_bytes(type, n);
	unsigned char *w = malloc((size_t)d * row_bytes);
	void *packed = malloc(packed_bytes(type, d, n));
	float *x = malloc((size_t)batch * n * sizeof(float));
	float *want = malloc((size_t)batch * d * sizeof(float)), *got = malloc((size_t)batch * d * sizeof(float));
	size_t qbytes = (quant_rows_bytes(batch, n, 1) + 63) / 64 * 64;
	void *qmem = aligned_alloc(64, qbytes), *qmem2 = aligned_alloc(64, qbytes);
	QuantRows xq = quant_rows_at(qmem, batch, n, 1), xq2 = quant_rows_at(qmem2, batch, n, 1);
	int quantized = weight_type_quantized(type);
	MatInput in = { x, quantized ? &xq : NULL }, in2 = { x, quantized ? &xq2 : NULL };

	fill_stored(type, w, d, n, row_bytes, &seed);
	for (int i = 0; i < batch * n; i++)
		x[i] = frand(&seed);
	pack_matrix_typed(packed, type, w, d, n);
	if (quantized)
		quantize_rows(x, batch, n, &xq, QUANT_Q8_0 | QUANT_Q8_K);
	matmul_rows_typed(packed, type, n, 0, d, &in, batch, want, (size_t)d);
	for (size_t l = 0; l < sizeof(levels) / sizeof(levels[0]); l++) {
		if (!levels[l].runs)
			continue;
		if (quantized) {
			levels[l].quant(x, batch, n, &xq2, QUANT_Q8_0 | QUANT_Q8_K);
			size_t nb = (size_t)batch * (n / Q8_0_BLOCK);

			CHECK(!memcmp(xq.q, xq2.q, (size_t)batch * n) && !memcmp(xq.d, xq2.d, nb * sizeof(float)) &&
				      !memcmp(xq.s, xq2.s, nb * sizeof(int32_t)) &&
				      (n % Q6_K_BLOCK || (!memcmp(xq.kq, xq2.kq, (size_t)batch * n) &&
							  !memcmp(xq.kd, xq2.kd, (size_t)batch * (n / Q6_K_BLOCK) * 4) &&
							  !memcmp(xq.ks, xq2.ks, (size_t)batch * (n / 16) * 4))),
			      "%s: quantize_rows differs from the picked build's", levels[l].name);
		}
		levels[l].mm(packed, type, n, 0, d, &in2, batch, got, (size_t)d);
		for (int i = 0; i < batch * d; i++)
			if (levels[l].fused && picked_fused) {
				CHECK(got[i] == want[i], "%s type %d d=%d n=%d batch=%d: [%d] %.9g, picked %.9g",
				      levels[l].name, (int)type, d, n, batch, i, got[i], want[i]);
			} else {
				CHECK(fabsf(got[i] - want[i]) <= 1e-4f * (1.0f + fabsf(want[i])),
				      "%s type %d: [%d] %.9g, picked %.9g", levels[l].name, (int)type, i, got[i],
				      want[i]);
			}
	}
	free(w), free(packed), free(x), free(want), free(got), free(qmem), free(qmem2);
}
#endif

int main(void)
{
	static const int ds[] = { 1, 15, 16, 17, 40, 100 };
	static const int ns[] = { 1, 3, 16, 37 };
	static const int batches[] = { 1, 3, 4, 5, 8, 9, 17 };
	/* matmul_rows' AVX2 and AVX-512 clones fuse each step; the baseline
	 * clone multiplies and adds, so only the tolerance holds there */
	int fma_exact = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");

	matmul_want_amx(); /* Q4_K batches of 16 through AMX where the CPU has it */

	for (size_t i = 0; i < sizeof(ds) / sizeof(ds[0]); i++)
		for (size_t j = 0; j < sizeof(ns) / sizeof(ns[0]); j++) {
			for (size_t k = 0; k < sizeof(batches) / sizeof(batches[0]); k++)
				check_shape(ds[i], ns[j], batches[k], 0, ds[i], fma_exact);
			/* a tile from a panel boundary to a row inside a later panel */
			if (ds[i] > 17)
				check_shape(ds[i], ns[j], 5, 16, ds[i] - 1, fma_exact);
			check_invariance(ds[i], ns[j]);
		}
	static const WeightType stored[] = { WEIGHT_F16, WEIGHT_Q8_0, WEIGHT_Q4_0, WEIGHT_Q4_K, WEIGHT_Q6_K };

	for (size_t i = 0; i < sizeof(stored) / sizeof(stored[0]); i++)
		for (int d = 1; d <= 100; d += 33)
			for (int batch = 1; batch <= 41; batch += batch < 9 ? 4 : 16) {
				/* 25 and 41: AMX's groups of 16 tokens and a rest */
				int k = weight_type_kquant(stored[i]); /* whole superblocks of 256 */

				check_typed(stored[i], d, k ? 256 : 64, batch, fma_exact);
				check_typed(stored[i], d, k ? 512 : 96, batch, fma_exact);
			}
#if defined(__x86_64__)
	for (size_t i = 0; i < sizeof(stored) / sizeof(stored[0]); i++)
		for (int batch = 1; batch <= 9; batch += 4) {
			check_levels(stored[i], 40, weight_type_kquant(stored[i]) ? 512 : 96, batch, fma_exact);
			if (i == 0)
				check_levels(WEIGHT_F32, 40, 96, batch, fma_exact);
		}
#endif
	printf("matmul: %s; F16, Q8_0, Q4_0, Q4_K and Q6_K too; every x86-64 build this CPU runs\n",
	       fma_exact ? "FMA chains checked bit for bit" : "tolerance only (no FMA)");
	return check_report();
}
