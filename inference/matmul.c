/* matmul.c - products over panel-packed weights; see matmul.h. */
#include <stdint.h>
#include <string.h>
#include "matmul.h"
#include "matmul_panels.h"

size_t packed_floats(int d, int n)
{
	return (size_t)(d + PANEL_ROWS - 1) / PANEL_ROWS * PANEL_ROWS * n;
}

size_t packed_bytes(WeightType type, int d, int n)
{
	return (size_t)(d + PANEL_ROWS - 1) / PANEL_ROWS * panel_bytes(type, n);
}

static float f16_to_f32(uint16_t u)
{
	_Float16 h;

	memcpy(&h, &u, 2);
	return (float)h;
}

/* Panel p of a row-major F16 (d, n) matrix: the halves moved, not changed. */
static void pack_panel_f16(uint16_t *out, const uint16_t *w, int d, int n, int p)
{
	for (int i = 0; i < PANEL_ROWS; i++) {
		int r = p * PANEL_ROWS + i;

		for (int j = 0; j < n; j++)
			out[(size_t)j * PANEL_ROWS + i] = r < d ? w[(size_t)r * n + j] : 0;
	}
}

/* Panel p of a Q8_0 (d, n) matrix (rows of blocks: f16 scale, 32 int8):
 * the int8 values moved, the scales widened to float (exactly). */
static void pack_panel_q8_0(char *out, const uint8_t *w, int d, int n, int p)
{
	size_t row_bytes = (size_t)n / Q8_0_BLOCK * Q8_0_BLOCK_BYTES;

	for (int b = 0; b < n / Q8_0_BLOCK; b++) {
		char *blk = out + (size_t)b * Q8_PANEL_BLOCK;
		float *scale = (float *)blk;
		int8_t *q = (int8_t *)(blk + PANEL_ROWS * sizeof(float));

		for (int i = 0; i < PANEL_ROWS; i++) {
			int r = p * PANEL_ROWS + i;
			const uint8_t *src = w + (size_t)r * row_bytes + (size_t)b * Q8_0_BLOCK_BYTES;
			uint16_t dh;

			if (r >= d) {
				scale[i] = 0.0f;
				for (int j = 0; j < Q8_0_BLOCK; j++)
					q[j * PANEL_ROWS + i] = 0;
				continue;
			}
			memcpy(&dh, src, 2);
			scale[i] = f16_to_f32(dh);
			for (int j = 0; j < Q8_0_BLOCK; j++)
				q[j * PANEL_ROWS + i] = (int8_t)src[2 + j];
		}
	}
}

void pack_matrix_typed(void *dst, WeightType type, const void *w, int d, int n)
{
	int panels = (d + PANEL_ROWS - 1) / PANEL_ROWS;

	if (type == WEIGHT_F32) {
		pack_matrix(dst, w, d, n);
		return;
	}
#pragma omp parallel for schedule(static)
	for (int p = 0; p < panels; p++) {
		char *out = (char *)dst + (size_t)p * panel_bytes(type, n);

		if (type == WEIGHT_F16)
			pack_panel_f16((uint16_t *)out, w, d, n, p);
		else
			pack_panel_q8_0(out, w, d, n, p);
	}
}

void pack_matrix(float *dst, const float *w, int d, int n)
{
	int panels = (d + PANEL_ROWS - 1) / PANEL_ROWS;

#pragma omp parallel for schedule(static)
	for (int p = 0; p < panels; p++) {
		float *out = dst + (size_t)p * PANEL_ROWS * n;

		for (int i = 0; i < PANEL_ROWS; i++) {
			int r = p * PANEL_ROWS + i;

			for (int j = 0; j < n; j++)
				out[(size_t)j * PANEL_ROWS + i] = r < d ? w[(size_t)r * n + j] : 0.0f;
		}
	}
}

/* The kernels, built once per x86-64 level (matmul_kernel.c); the dynamic
 * linker picks one for this CPU when the library loads, so one process
 * always runs one of them and its sums never mix. */
#if defined(__x86_64__)
MATMUL_KERNEL(v4);
MATMUL_KERNEL(v3);
MATMUL_KERNEL(base);

static matmul_kernel_fn *matmul_resolve(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("x86-64-v4"))
		return matmul_rows_typed_v4;
	if (__builtin_cpu_supports("x86-64-v3"))
		return matmul_rows_typed_v3;
	return matmul_rows_typed_base;
}

void matmul_rows_typed(const void *w, WeightType type, int n, int r0, int r1, const float *x, int batch,
		       float *out, size_t ldo) __attribute__((ifunc("matmul_resolve")));
#else
MATMUL_KERNEL(base);

void matmul_rows_typed(const void *w, WeightType type, int n, int r0, int r1, const float *x, int batch,
		       float *out, size_t ldo)
{
	matmul_rows_typed_base(w, type, n, r0, r1, x, batch, out, ldo);
}
#endif

void matmul_rows(const float *w, int n, int r0, int r1, const float *x, int batch, float *out, size_t ldo)
{
	matmul_rows_typed(w, WEIGHT_F32, n, r0, r1, x, batch, out, ldo);
}
