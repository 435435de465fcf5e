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

/* Block b of row r's stored codes as unsigned bytes: Q8_0's int8 plus
 * 128, Q4_0's nibbles as they are (value + 8; value j low in byte j, j + 16
 * high); a row past d (src NULL) codes zero. Returns the block's scale as
 * stored (a half; zero past d). */
static uint16_t block_codes(WeightType type, const uint8_t *src, uint8_t v[Q8_0_BLOCK])
{
	uint16_t dh;

	for (int j = 0; j < Q8_0_BLOCK; j++)
		if (!src)
			v[j] = type == WEIGHT_Q4_0 ? 8 : 128;
		else if (type == WEIGHT_Q4_0)
			v[j] = (src[2 + j % 16] >> (j / 16 * 4)) & 0x0f;
		else
			v[j] = (uint8_t)((int8_t)src[2 + j] + 128);
	if (!src)
		return 0;
	memcpy(&dh, src, 2);
	return dh;
}

/* Panel p of a Q8_0 or Q4_0 (d, n) matrix (rows of blocks: f16 scale,
 * then the values): the scales as they are, the codes (block_codes) moved
 * into quads, or Q4_0's pairs of quads (matmul_panels.h). Rows past d are
 * zero. */
static void pack_panel_quant(char *out, WeightType type, const uint8_t *w, int d, int n, int p)
{
	int q4 = type == WEIGHT_Q4_0;
	size_t block_bytes = q4 ? Q4_0_BLOCK_BYTES : Q8_0_BLOCK_BYTES;
	size_t row_bytes = (size_t)n / Q8_0_BLOCK * block_bytes;
	uint16_t *scale = (uint16_t *)(void *)out;

	memset(out, 0, panel_bytes(type, n));
	for (int b = 0; b < n / Q8_0_BLOCK; b++) {
		uint8_t *quads = (uint8_t *)out + quant_scale_bytes(n) + (size_t)b * quant_block_bytes(type);

		for (int i = 0; i < PANEL_ROWS; i++) {
			int r = p * PANEL_ROWS + i;
			uint8_t v[Q8_0_BLOCK];

			scale[b * PANEL_ROWS + i] =
				block_codes(type, r < d ? w + (size_t)r * row_bytes + (size_t)b * block_bytes : NULL, v);
			for (int j = 0; j < Q8_0_BLOCK; j++)
				if (q4) /* quad j / 4 is pair j / 8's low or high nibbles */
					quads[(j / 8) * Q8_QUAD_BYTES + i * 4 + j % 4] |= (uint8_t)(v[j] << (j % 8 / 4 * 4));
				else
					quads[(j / 4) * Q8_QUAD_BYTES + i * 4 + j % 4] = v[j];
		}
	}
}

void dequantize_row(float *out, const void *row, WeightType type, int n)
{
	size_t block_bytes = type == WEIGHT_Q4_0 ? Q4_0_BLOCK_BYTES : Q8_0_BLOCK_BYTES;
	int offset = type == WEIGHT_Q4_0 ? 8 : 128;

	for (int b = 0; b < n / Q8_0_BLOCK; b++) {
		uint8_t v[Q8_0_BLOCK];
		float d = f16_to_f32(block_codes(type, (const uint8_t *)row + (size_t)b * block_bytes, v));

		for (int j = 0; j < Q8_0_BLOCK; j++)
			out[(size_t)b * Q8_0_BLOCK + j] = (float)(v[j] - offset) * d;
	}
}

size_t quant_rows_bytes(int batch, int n)
{
	size_t blocks = (size_t)batch * (n / Q8_0_BLOCK);

	return ((size_t)batch * n + 63) / 64 * 64 + blocks * (sizeof(float) + sizeof(int32_t));
}

QuantRows quant_rows_at(void *mem, int batch, int n)
{
	size_t blocks = (size_t)batch * (n / Q8_0_BLOCK);
	char *p = mem;
	QuantRows r;

	r.q = (int8_t *)p;
	p += ((size_t)batch * n + 63) / 64 * 64;
	r.d = (float *)(void *)p;
	r.s = (int32_t *)(void *)(p + blocks * sizeof(float));
	return r;
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
			pack_panel_quant(out, type, w, d, n, p);
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
void quantize_rows(const float *x, int batch, int n, QuantRows *out) __attribute__((ifunc("quantize_resolve")));
#else
MATMUL_KERNEL(base);

void matmul_rows_typed(const void *w, WeightType type, int n, int r0, int r1, const MatInput *in, int batch,
		       float *out, size_t ldo)
{
	matmul_rows_typed_base(w, type, n, r0, r1, in, batch, out, ldo);
}

void quantize_rows(const float *x, int batch, int n, QuantRows *out)
{
	quantize_rows_base(x, batch, n, out);
}
#endif

void matmul_rows(const float *w, int n, int r0, int r1, const float *x, int batch, float *out, size_t ldo)
{
	MatInput in = { x, NULL };

	matmul_rows_typed(w, WEIGHT_F32, n, r0, r1, &in, batch, out, ldo);
}
