/* ops.c - the CPU backend's operations outside the products and attention:
 * RMSNorm and RoPE (llama2.c's run.c math), the residual add, the
 * embedding's rows, and the f16 KV cache's conversion to floats. The
 * phases (phases.c) run them on a tile's tokens or rows. */
#include <math.h>
#include <string.h>
#include "backend/cpu/ops.h"
#include "format/gguf.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

void rmsnorm(float *o, const float *x, const float *weight, int size, float eps)
{
	float ss = 0.0f;

	for (int j = 0; j < size; j++)
		ss += x[j] * x[j];
	ss /= size;
	ss += eps;
	ss = 1.0f / sqrtf(ss);
	for (int j = 0; j < size; j++)
		o[j] = weight[j] * (ss * x[j]);
}

void rope_head(float *q, float *k, int head_size, const float *cs)
{
	for (int i = 0; i < head_size; i += 2) {
		float fcr = cs[i], fci = cs[i + 1];

		for (int v = 0; v < (k ? 2 : 1); v++) {
			float *vec = v == 0 ? q : k;
			float v0 = vec[i], v1 = vec[i + 1];

			vec[i] = v0 * fcr - v1 * fci;
			vec[i + 1] = v0 * fci + v1 * fcr;
		}
	}
}

void fill_rope_table(CpuState *s)
{
	int hs = s->head_size;
	float theta = config_rope_theta(&s->c);

	for (int p = 0; p < s->c.seq_len; p++)
		for (int i = 0; i < hs; i += 2) {
			float freq = 1.0f / powf(theta, i / (float)hs);
			float val = p * freq;

			s->rope_cs[(size_t)p * hs + i] = cosf(val);
			s->rope_cs[(size_t)p * hs + i + 1] = sinf(val);
		}
}

/* n halves as floats, one by one. */
static void halves_soft(const _Float16 *h, int n, float *out)
{
	for (int j = 0; j < n; j++)
		out[j] = (float)h[j];
}

#if defined(__x86_64__)
/* The same with F16C's vcvtph2ps, 8 at a time, where the CPU has it (GCC
 * 12 built __builtin_convertvector and the loop above a value at a time). */
__attribute__((target("avx,f16c"))) static void halves_f16c(const _Float16 *h, int n, float *out)
{
	int j = 0;

	for (; j + 8 <= n; j += 8)
		_mm256_storeu_ps(out + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + j))));
	halves_soft(h + j, n - j, out + j);
}
#endif

halves_fn *halves_for_cpu(void)
{
#if defined(__x86_64__)
	if (__builtin_cpu_supports("f16c"))
		return halves_f16c;
#endif
	return halves_soft;
}

void residual_rows(float *x, const float *d, int width, int r0, int r1, int n)
{
	for (int b = 0; b < n; b++)
		for (int r = r0; r < r1; r++)
			x[(size_t)b * width + r] += d[(size_t)b * width + r];
}

void embed_row(float *out, const Tensor *emb, int token, int dim)
{
	if (emb->type == WEIGHT_F32) {
		memcpy(out, (const float *)emb->data + (size_t)token * dim, dim * sizeof(float));
	} else if (emb->type == WEIGHT_F16) {
		const _Float16 *row = (const _Float16 *)emb->data + (size_t)token * dim;

		for (int j = 0; j < dim; j++)
			out[j] = (float)row[j];
	} else {
		size_t row_bytes = (size_t)ggml_type_bytes((uint32_t)emb->type, (uint64_t)dim);

		dequantize_row(out, (const char *)emb->data + (size_t)token * row_bytes, emb->type, dim);
	}
}
