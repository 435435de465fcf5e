/* panels.c - the packing into panels (panels.h): each stored type's rows
 * moved, not changed, into the layout the products read; and a stored
 * row's values as floats (dequantize_row), from the same decoding. */
#include <stdint.h>
#include <string.h>
#include "backend/panels.h"

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
 * into quads, or Q4_0's pairs of quads (panels.h). Rows past d are
 * zero. */
static void pack_panel_quant(char *out, WeightType type, const uint8_t *w, int d, int n, int p)
{
	int q4 = type == WEIGHT_Q4_0;
	size_t block_bytes = q4 ? Q4_0_BLOCK_BYTES : Q8_0_BLOCK_BYTES;
	size_t row_bytes = (size_t)n / Q8_0_BLOCK * block_bytes;
	uint16_t *scale = (uint16_t *)(void *)out;

	memset(out, 0, panel_bytes(type, n));
	for (int b = 0; b < n / Q8_0_BLOCK; b++) {
		uint8_t *quads = (uint8_t *)out + quant_scale_bytes(type, n) + (size_t)b * quant_block_bytes(type);

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

/* Value v's 6-bit code (0..63, the value plus 32) in a Q6_K superblock, as
 * ggml lays them out: each half of 128 values takes 64 bytes of low
 * nibbles (values l and l + 64 of the half in byte l, l + 32 and l + 96 in
 * byte l + 32) and 32 bytes of high bit pairs (values l, l + 32, l + 64
 * and l + 96 in byte l, from the lowest pair up). */
static int q6k_code(const uint8_t *blk, int v)
{
	const uint8_t *ql = blk + v / 128 * 64, *qh = blk + 128 + v / 128 * 32;
	int g = v % 128 / 32, l = v % 32;
	int low = (ql[l + 32 * (g & 1)] >> (g / 2 * 4)) & 0x0f;

	return low | ((qh[l] >> (2 * g)) & 3) << 4;
}

/* Panel p of a Q6_K (d, n) matrix (panels.h): the int8 and f16
 * scales as stored, each code as a byte, q + 96. Rows past d are zero. */
static void pack_panel_q6k(char *out, const uint8_t *w, int d, int n, int p)
{
	size_t row_bytes = (size_t)n / Q6_K_BLOCK * Q6_K_BLOCK_BYTES;
	int8_t *sc = (int8_t *)out;
	uint16_t *dsup = (uint16_t *)(void *)(out + kquant_d_offset(n));
	uint8_t *values = (uint8_t *)out + quant_scale_bytes(WEIGHT_Q6_K, n);

	memset(out, 0, panel_bytes(WEIGHT_Q6_K, n));
	for (int i = 0; i < PANEL_ROWS; i++) {
		int r = p * PANEL_ROWS + i;

		for (int j = 0; j < n; j++) {
			const uint8_t *blk = w + (size_t)r * row_bytes + (size_t)(j / Q6_K_BLOCK) * Q6_K_BLOCK_BYTES;
			int b = j / Q8_0_BLOCK, jj = j % Q8_0_BLOCK;
			uint8_t *quad = values + (size_t)b * quant_block_bytes(WEIGHT_Q6_K) + jj / 4 * Q8_QUAD_BYTES;

			quad[i * 4 + jj % 4] = r < d ? (uint8_t)(q6k_code(blk, j % Q6_K_BLOCK) + 96) : 128;
			if (r < d && j % 16 == 0)
				sc[b * 2 * PANEL_ROWS + jj / 16 * PANEL_ROWS + i] = (int8_t)blk[192 + j % Q6_K_BLOCK / 16];
			if (r < d && j % Q6_K_BLOCK == 0)
				memcpy(&dsup[j / Q6_K_BLOCK * PANEL_ROWS + i], blk + 208, 2);
		}
	}
}

/* Value v's 4-bit code in a Q4_K superblock (after d, dmin and 12 bytes of
 * scales): each 64 values take 32 bytes, the first 32 in the low nibbles. */
static int q4k_code(const uint8_t *blk, int v)
{
	return (blk[16 + v / 64 * 32 + v % 32] >> (v % 64 / 32 * 4)) & 0x0f;
}

/* Sub-block j's 6-bit scale and min in a Q4_K superblock, as ggml packs
 * them in 12 bytes (its get_scale_min_k4). */
static void q4k_scale_min(const uint8_t *blk, int j, uint8_t *sc, uint8_t *m)
{
	const uint8_t *q = blk + 4;

	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4;
		*m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
	}
}

/* Panel p of a Q4_K (d, n) matrix (panels.h): the codes in Q4_0's
 * pairs of quads, the scales and mins unpacked to a byte each, d and dmin
 * as stored. Rows past d are zero. */
static void pack_panel_q4k(char *out, const uint8_t *w, int d, int n, int p)
{
	size_t row_bytes = (size_t)n / Q6_K_BLOCK * Q4_K_BLOCK_BYTES;
	uint8_t *sc = (uint8_t *)out;
	uint16_t *dsup = (uint16_t *)(void *)(out + kquant_d_offset(n));
	uint8_t *values = (uint8_t *)out + quant_scale_bytes(WEIGHT_Q4_K, n);

	memset(out, 0, panel_bytes(WEIGHT_Q4_K, n));
	for (int i = 0; i < PANEL_ROWS; i++) {
		int r = p * PANEL_ROWS + i;

		for (int j = 0; r < d && j < n; j++) {
			const uint8_t *blk = w + (size_t)r * row_bytes + (size_t)(j / Q6_K_BLOCK) * Q4_K_BLOCK_BYTES;
			int b = j / Q8_0_BLOCK, jj = j % Q8_0_BLOCK;
			uint8_t *pair = values + (size_t)b * quant_block_bytes(WEIGHT_Q4_K) + jj / 8 * Q8_QUAD_BYTES;

			pair[i * 4 + jj % 4] |= (uint8_t)(q4k_code(blk, j % Q6_K_BLOCK) << (jj % 8 / 4 * 4));
			if (jj == 0)
				q4k_scale_min(blk, j % Q6_K_BLOCK / 32, &sc[b * 2 * PANEL_ROWS + i],
					      &sc[b * 2 * PANEL_ROWS + PANEL_ROWS + i]);
			if (j % Q6_K_BLOCK == 0) {
				memcpy(&dsup[j / Q6_K_BLOCK * 2 * PANEL_ROWS + i], blk, 2);
				memcpy(&dsup[j / Q6_K_BLOCK * 2 * PANEL_ROWS + PANEL_ROWS + i], blk + 2, 2);
			}
		}
	}
}

void dequantize_row(float *out, const void *row, WeightType type, int n)
{
	if (type == WEIGHT_Q4_K) {
		for (int s = 0; s < n / Q6_K_BLOCK; s++) {
			const uint8_t *blk = (const uint8_t *)row + (size_t)s * Q4_K_BLOCK_BYTES;
			uint16_t dh, mh;

			memcpy(&dh, blk, 2);
			memcpy(&mh, blk + 2, 2);
			for (int v = 0; v < Q6_K_BLOCK; v++) { /* as ggml: (d * scale) * code - dmin * min */
				uint8_t sc, m;

				q4k_scale_min(blk, v / 32, &sc, &m);
				float scaled = f16_to_f32(dh) * (float)sc * (float)q4k_code(blk, v);

				out[(size_t)s * Q6_K_BLOCK + v] = scaled - f16_to_f32(mh) * (float)m;
			}
		}
		return;
	}
	if (type == WEIGHT_Q6_K) {
		for (int s = 0; s < n / Q6_K_BLOCK; s++) {
			const uint8_t *blk = (const uint8_t *)row + (size_t)s * Q6_K_BLOCK_BYTES;
			uint16_t dh;

			memcpy(&dh, blk + 208, 2);
			for (int v = 0; v < Q6_K_BLOCK; v++) /* as ggml: (d * scale) * value */
				out[(size_t)s * Q6_K_BLOCK + v] =
					f16_to_f32(dh) * (float)(int8_t)blk[192 + v / 16] * (float)(q6k_code(blk, v) - 32);
		}
		return;
	}
	size_t block_bytes = type == WEIGHT_Q4_0 ? Q4_0_BLOCK_BYTES : Q8_0_BLOCK_BYTES;
	int offset = type == WEIGHT_Q4_0 ? 8 : 128;

	for (int b = 0; b < n / Q8_0_BLOCK; b++) {
		uint8_t v[Q8_0_BLOCK];
		float d = f16_to_f32(block_codes(type, (const uint8_t *)row + (size_t)b * block_bytes, v));

		for (int j = 0; j < Q8_0_BLOCK; j++)
			out[(size_t)b * Q8_0_BLOCK + j] = (float)(v[j] - offset) * d;
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
		else if (type == WEIGHT_Q6_K)
			pack_panel_q6k(out, w, d, n, p);
		else if (type == WEIGHT_Q4_K)
			pack_panel_q4k(out, w, d, n, p);
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
