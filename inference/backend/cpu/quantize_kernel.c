/* quantize_kernel.c - a product's input quantized (quantize_rows,
 * matmul.h) as llama.cpp quantizes it, built once per x86-64 level as the
 * products are (matmul_kernel.c), as quantize_rows_<level>: AVX-512 finds
 * a block's largest value and rounds 16 lanes at a time, the other levels
 * a lane at a time, to the same bits. */
#include <string.h>
#include "backend/cpu/matmul_kernel.h"

#ifndef MATMUL_LEVEL
#error "build with -DMATMUL_LEVEL=v4vnni, v4, v3 or base"
#endif

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#define QUANT_NAME(level) QUANT_NAME_(level)
#define QUANT_NAME_(level) quantize_rows_##level

/* v rounded to the nearest integer, ties to even, for |v| < 2^22: adding
 * and taking back 1.5 x 2^23 leaves no fraction bits. One fused multiply-
 * add and a subtraction (block_round does them 16 lanes at a time on
 * AVX-512), where roundf is a libm call (quantizing a batch with it cost
 * more than the products saved). The OpenCL kernels (00_common.cl,
 * stage_quantize) do the same operations. */
static inline __attribute__((always_inline)) float scaled_round(float v, float id)
{
	return __builtin_fmaf(v, id, 12582912.0f) - 12582912.0f;
}

#if defined(__AVX512F__)
typedef int8_t v16b __attribute__((vector_size(PANEL_ROWS)));

/* The largest |v[j]| of a block, in 16 lanes: the value a chain of fmaxf
 * gives (a compare with a NaN is false, so a NaN never wins, and the
 * largest of the rest does not depend on the order); fmaxf is a libm call. */
static inline __attribute__((always_inline)) float block_amax(const float *v)
{
	v16f m = { 0 };
	__m512 f;

	for (int j = 0; j < Q8_0_BLOCK; j += PANEL_ROWS) {
		v16f a;

		memcpy(&a, v + j, sizeof(a));
		a = (v16f)((v16u)a & 0x7fffffffu);
		v16i gt = a > m;
		m = (v16f)(((v16i)a & gt) | ((v16i)m & ~gt));
	}
	memcpy(&f, &m, sizeof(f));
	return _mm512_reduce_max_ps(f);
}

/* q = v * id rounded as scaled_round does, 16 lanes at a time; returns the
 * sum of q. */
static inline __attribute__((always_inline)) int32_t block_round(const float *v, float id, int8_t *q)
{
	v16i sum = { 0 };
	__m512i r;

	for (int j = 0; j < Q8_0_BLOCK; j += PANEL_ROWS) {
		__m512 f;
		v16f a;

		memcpy(&f, v + j, sizeof(f));
		f = _mm512_fmadd_ps(f, _mm512_set1_ps(id), _mm512_set1_ps(12582912.0f));
		memcpy(&a, &f, sizeof(a));
		v16i qi = __builtin_convertvector(a - 12582912.0f, v16i);
		v16b qb = __builtin_convertvector(qi, v16b);

		memcpy(q + j, &qb, sizeof(qb));
		sum += qi;
	}
	memcpy(&r, &sum, sizeof(r));
	return _mm512_reduce_add_epi32(r);
}
#else
/* One lane at a time (GCC 12 turns these vectors into scalar code on AVX2). */
static inline __attribute__((always_inline)) float block_amax(const float *v)
{
	float r = 0.0f;

	for (int j = 0; j < Q8_0_BLOCK; j++) {
		float a = __builtin_fabsf(v[j]);

		r = a > r ? a : r;
	}
	return r;
}

static inline __attribute__((always_inline)) int32_t block_round(const float *v, float id, int8_t *q)
{
	int32_t sum = 0;

	for (int j = 0; j < Q8_0_BLOCK; j++) {
		q[j] = (int8_t)scaled_round(v[j], id);
		sum += q[j];
	}
	return sum;
}
#endif

#if !defined(__AVX512F__)
/* Block kb (values at..at + 255) of x as llama.cpp's quantize_row_q8_K_ref:
 * the scale from the value of largest magnitude (the first, on a tie),
 * signed, so that value codes -127; each product rounded to a float, then
 * to the nearest integer, ties to even (rintf, so no multiply-add fuses
 * the two roundings), at most 127. */
static void quantize_q8k(size_t at, const float *x, QuantRows *out, size_t kb)
{
	float amax = 0.0f, max = 0.0f;

	for (int j = 0; j < Q6_K_BLOCK; j++) {
		float a = __builtin_fabsf(x[at + j]);

		if (a > amax) {
			amax = a;
			max = x[at + j];
		}
	}
	float iscale = amax != 0.0f ? -127.0f / max : 0.0f;

	out->kd[kb] = amax != 0.0f ? 1.0f / iscale : 0.0f;
	for (int j = 0; j < Q6_K_BLOCK; j += 16) {
		int32_t sum = 0;

		for (int i = 0; i < 16; i++) {
			float p = iscale * x[at + j + i];
			int v = (int)__builtin_rintf(p);

			out->kq[at + j + i] = (int8_t)(v < 127 ? v : 127);
			sum += out->kq[at + j + i];
		}
		out->ks[(at + j) / 16] = 128 * sum;
	}
}

#else
/* quantize_q8k's loops 16 lanes at a time, the same operations per value:
 * the first value of largest magnitude (a lane-wise max, then the first
 * index that has it), one multiply rounded to a float, then roundscale to
 * the nearest integer, ties to even (rintf's rounding), at most 127.
 * Quantizing the Q8_K input was 12% of a Q4_K prompt as scalar code. */
static void quantize_q8k(size_t at, const float *x, QuantRows *out, size_t kb)
{
	const float *v = x + at;
	__m512 m = _mm512_setzero_ps();

	for (int j = 0; j < Q6_K_BLOCK; j += 16)
		m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(v + j)), m); /* a NaN loses, as above */
	float amax = _mm512_reduce_max_ps(m), max = 0.0f;

	for (int j = 0; j < Q6_K_BLOCK; j += 16) {
		__mmask16 hit = _mm512_cmpeq_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(v + j)), _mm512_set1_ps(amax));

		if (hit && amax != 0.0f) {
			max = v[j + __builtin_ctz(hit)];
			break;
		}
	}
	float iscale = amax != 0.0f ? -127.0f / max : 0.0f;

	out->kd[kb] = amax != 0.0f ? 1.0f / iscale : 0.0f;
	for (int j = 0; j < Q6_K_BLOCK; j += 16) {
		__m512 p = _mm512_mul_ps(_mm512_set1_ps(iscale), _mm512_loadu_ps(v + j));
		__m512i q = _mm512_cvtps_epi32(_mm512_roundscale_ps(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));

		q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
		_mm_storeu_si128((__m128i *)(out->kq + at + j), _mm512_cvtepi32_epi8(q));
		out->ks[(at + j) / 16] = 128 * _mm512_reduce_add_epi32(q);
	}
}
#endif

/* As llama.cpp quantizes a Q8_0 product's input (quantize_row_q8_0), but d
 * stays a float and ties round to even; matmul.h says what s is. */
void QUANT_NAME(MATMUL_LEVEL)(const float *x, int batch, int n, QuantRows *out, int forms)
{
	int nb = n / Q8_0_BLOCK;

	for (int t = 0; t < batch && (forms & QUANT_Q8_0); t++)
		for (int b = 0; b < nb; b++) {
			size_t at = (size_t)t * n + (size_t)b * Q8_0_BLOCK;
			float d = block_amax(x + at) / 127.0f;
			float id = d != 0.0f ? 1.0f / d : 0.0f;

			out->d[(size_t)t * nb + b] = d;
			out->s[(size_t)t * nb + b] = 128 * block_round(x + at, id, out->q + at);
		}
	if ((forms & QUANT_Q8_K) && out->kq && n % Q6_K_BLOCK == 0)
		for (int t = 0; t < batch; t++)
			for (int b = 0; b < n / Q6_K_BLOCK; b++)
				quantize_q8k((size_t)t * n + (size_t)b * Q6_K_BLOCK, x, out,
					     (size_t)t * (n / Q6_K_BLOCK) + b);
}
