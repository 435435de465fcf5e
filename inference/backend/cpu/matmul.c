/* matmul.c - products over panel-packed weights (matmul.h): the input's
 * quantized rows, and the pick of the kernels' build for this CPU. */
#include <stdint.h>
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_kernel.h"

size_t quant_rows_bytes(int batch, int n, int kform)
{
	size_t values = ((size_t)batch * n + 63) / 64 * 64, blocks = (size_t)batch * (n / Q8_0_BLOCK);
	size_t bytes = values + blocks * (sizeof(float) + sizeof(int32_t));

	if (kform)
		bytes += values + (size_t)batch * (n / Q6_K_BLOCK) * sizeof(float) +
			 (size_t)batch * (n / 16) * sizeof(int32_t);
	return bytes;
}

QuantRows quant_rows_at(void *mem, int batch, int n, int kform)
{
	size_t values = ((size_t)batch * n + 63) / 64 * 64, blocks = (size_t)batch * (n / Q8_0_BLOCK);
	char *p = mem;
	QuantRows r = { 0 };

	r.q = (int8_t *)p;
	r.d = (float *)(void *)(p + values);
	r.s = (int32_t *)(void *)(p + values + blocks * sizeof(float));
	if (kform) {
		p = (char *)(r.s + blocks);
		r.kq = (int8_t *)p;
		r.kd = (float *)(void *)(p + values);
		r.ks = (int32_t *)(void *)(r.kd + (size_t)batch * (n / Q6_K_BLOCK));
	}
	return r;
}
/* The kernels, built once per x86-64 level (matmul_kernel.c); the dynamic
 * linker picks one for this CPU when the library loads, so one process
 * always runs one of them and its sums never mix. */
#if defined(__x86_64__)
MATMUL_KERNEL(v4vnni);
MATMUL_KERNEL(v4);
MATMUL_KERNEL(v3);
MATMUL_KERNEL(base);

/* The build for this CPU: 0 v4vnni, 1 v4, 2 v3, 3 base. */
static int matmul_level(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("x86-64-v4"))
		return __builtin_cpu_supports("avx512vnni") ? 0 : 1;
	return __builtin_cpu_supports("x86-64-v3") ? 2 : 3;
}

static matmul_kernel_fn *matmul_resolve(void)
{
	matmul_kernel_fn *const fns[] = { matmul_rows_typed_v4vnni, matmul_rows_typed_v4, matmul_rows_typed_v3,
					  matmul_rows_typed_base };

	return fns[matmul_level()];
}

static quantize_fn *quantize_resolve(void)
{
	quantize_fn *const fns[] = { quantize_rows_v4vnni, quantize_rows_v4, quantize_rows_v3, quantize_rows_base };

	return fns[matmul_level()];
}

void matmul_rows_typed(const void *w, WeightType type, int n, int r0, int r1, const MatInput *in, int batch,
		       float *out, size_t ldo) __attribute__((ifunc("matmul_resolve")));
void quantize_rows(const float *x, int batch, int n, QuantRows *out, int forms)
	__attribute__((ifunc("quantize_resolve")));
#else
MATMUL_KERNEL(base);

void matmul_rows_typed(const void *w, WeightType type, int n, int r0, int r1, const MatInput *in, int batch,
		       float *out, size_t ldo)
{
	matmul_rows_typed_base(w, type, n, r0, r1, in, batch, out, ldo);
}

void quantize_rows(const float *x, int batch, int n, QuantRows *out, int forms)
{
	quantize_rows_base(x, batch, n, out, forms);
}
#endif

void matmul_rows(const float *w, int n, int r0, int r1, const float *x, int batch, float *out, size_t ldo)
{
	MatInput in = { x, NULL };

	matmul_rows_typed(w, WEIGHT_F32, n, r0, r1, &in, batch, out, ldo);
}
