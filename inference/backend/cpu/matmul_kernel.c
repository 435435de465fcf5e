/* matmul_kernel.c - the CPU backend's products over panel-packed weights
 * (matmul.h), built once per x86-64 level: MATMUL_LEVEL v4 (-march=x86-64-v4,
 * AVX-512), v3 (x86-64-v3: AVX2, FMA, F16C) or base, as
 * matmul_rows_typed_<level>; matmul.c picks one for the CPU at load (and
 * quantize_kernel.c's build of the same level for the input).
 *
 * Why builds and not GCC's target_clones: a clone cannot use a level's
 * intrinsics (the default clone of the same body would not compile), and
 * GCC 12 turns a vector conversion of halves or of int8 values into one
 * scalar conversion per lane: F16 and Q8_0 ran 2-3x slower than F32 here.
 * The conversions below are exact, so every level computes the same sums.
 * Q8_0's integer dot products are exact on every level; v4vnni (v4 with
 * AVX512-VNNI) does them with vpdpbusd, v4 and v3 with AVX2's vpmaddubsw,
 * base in plain int32 lanes. */
#include <string.h>
#include "backend/cpu/amx.h"
#include "backend/cpu/matmul_kernel.h"

#ifndef MATMUL_LEVEL
#error "build with -DMATMUL_LEVEL=v4vnni, v4, v3 or base"
#endif

#if defined(__AVX512F__) || defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* Without VNNI, AVX2 multiplies the quads as signed bytes (dot4): the
 * weights' +128 or +8 comes off as they load (quad_at), and the input's
 * block sum is not taken out after (Q4_K, whose codes carry no +8, gets
 * the 8 x sum back: q4k_sub_block). */
#if defined(__AVX2__) && !defined(__AVX512VNNI__)
#define DOT4_SIGNED 1
#else
#define DOT4_SIGNED 0
#endif

/* 16 halves at p as floats: one vcvtph2ps (two on AVX2). */
static inline __attribute__((always_inline)) void halves_to_floats(v16f *v, const void *p)
{
#if defined(__AVX512F__)
	__m512 f = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));

	memcpy(v, &f, sizeof(*v));
#elif defined(__F16C__) && defined(__AVX__)
	__m256 lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
	__m256 hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p + 1));

	memcpy(v, &lo, sizeof(lo));
	memcpy((char *)v + sizeof(lo), &hi, sizeof(hi));
#else
	_Float16 h[PANEL_ROWS];
	float f[PANEL_ROWS];

	memcpy(h, p, sizeof(h));
	for (int i = 0; i < PANEL_ROWS; i++)
		f[i] = (float)h[i];
	memcpy(v, f, sizeof(f));
#endif
}

/* Column j of an F32 or F16 panel as 16 floats: type is a constant
 * wherever this is inlined, so the branch folds away. (Through a pointer:
 * a returned vector would be an ABI question in the plain build.) */
static inline __attribute__((always_inline)) void load_column(v16f *v, const char *panel, WeightType type,
							      int j)
{
	if (type == WEIGHT_F16)
		halves_to_floats(v, panel + (size_t)j * sizeof(v16h));
	else
		memcpy(v, panel + (size_t)j * sizeof(*v), sizeof(*v));
}

/* Where to prefetch while column j is read: PREFETCH_BYTES further on. */
static inline __attribute__((always_inline)) const char *prefetch_at(const char *panel, WeightType type, int j)
{
	return panel + (size_t)j * PANEL_ROWS * (type == WEIGHT_F16 ? 2 : sizeof(float)) + PREFETCH_BYTES;
}

/* The G x T accumulators of a block of panels: zeroed, and stored to out
 * (a last, partial panel: only its `rows` lanes). Inlined with G and T
 * constant, so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void zero_sums(v16f acc[][TOKEN_GROUP], int G, int T)
{
#pragma GCC unroll 4
	for (int g = 0; g < G; g++)
#pragma GCC unroll 8
		for (int t = 0; t < T; t++)
			acc[g][t] = (v16f){ 0 };
}

static inline __attribute__((always_inline)) void
store_sums(v16f acc[][TOKEN_GROUP], int G, int T, float *out, size_t ldo, int rows)
{
#pragma GCC unroll 4
	for (int g = 0; g < G; g++)
#pragma GCC unroll 8
		for (int t = 0; t < T; t++) {
			float lanes[PANEL_ROWS];

			if (rows == PANEL_ROWS) { /* a fixed size keeps acc in registers */
				memcpy(out + t * ldo + g * PANEL_ROWS, &acc[g][t], sizeof(lanes));
				continue;
			}
			memcpy(lanes, &acc[g][t], sizeof(lanes));
			memcpy(out + t * ldo, lanes, (size_t)rows * sizeof(float));
		}
}

/* G panels (ldp bytes apart) against T tokens (stride ldx): one
 * accumulator per panel and token, each a chain over j in order. rows <
 * PANEL_ROWS only for a last, partial panel (then G is 1): its other lanes
 * are not stored. */
static inline __attribute__((always_inline)) void
panel_block(const char *w, WeightType type, size_t ldp, int G, const float *x, size_t ldx, int T, int n,
	    float *out, size_t ldo, int rows)
{
	v16f acc[MAX_PANELS][TOKEN_GROUP];

	zero_sums(acc, G, T);
	for (int j = 0; j < n; j++)
#pragma GCC unroll 4
		for (int g = 0; g < G; g++) {
			v16f wv;

			load_column(&wv, w + g * ldp, type, j);

			__builtin_prefetch(prefetch_at(w + g * ldp, type, j), 0, 3);
			/* scalar times vector: a broadcast load the FMA takes as is */
#pragma GCC unroll 8
			for (int t = 0; t < T; t++)
				acc[g][t] += wv * x[t * ldx + j];
		}
	store_sums(acc, G, T, out, ldo, rows);
}

typedef int8_t v64b __attribute__((vector_size(PANEL_ROWS * sizeof(int32_t))));

/* A quad of weights (16 lanes of 4 bytes) and a block's 16 integer sums.
 * On AVX2 (v3) each is two ymm: GCC 12 kept 64-byte integer vectors on the
 * stack there, storing and reloading every vpmaddwd result (a stories110M
 * Q8_0 token took 19.2 ms, against 6.8 in the OpenCL kernels). */
#if DOT4_SIGNED && !defined(__AVX512F__)
#define SUMS_IN_HALVES 1
typedef struct {
	__m256i h[2];
} Lanes;
#else
#define SUMS_IN_HALVES 0
typedef v16i Lanes;
#endif
typedef Lanes Quad;
typedef Lanes BlockSums;

static inline __attribute__((always_inline)) void sums_zero(BlockSums *s)
{
#if SUMS_IN_HALVES
	s->h[0] = s->h[1] = _mm256_setzero_si256();
#else
	*s = (v16i){ 0 };
#endif
}

/* *acc += the 4-way dot product of each lane's 4 bytes of w with the 4
 * signed bytes of x (little-endian in one int32): unsigned w with
 * vpdpbusd, signed w (DOT4_SIGNED) with vpmaddubsw. */
static inline __attribute__((always_inline)) void dot4(BlockSums *acc, const Quad *w, int32_t x)
{
#if defined(__AVX512VNNI__)
	__m512i a, b;

	memcpy(&a, acc, sizeof(a));
	memcpy(&b, w, sizeof(b));
	a = _mm512_dpbusd_epi32(a, b, _mm512_set1_epi32(x));
	memcpy(acc, &a, sizeof(a));
#elif DOT4_SIGNED
	/* vpmaddubsw's 16-bit pair sums saturate: |w| (at most 128) times x
	 * with w's sign (at most 127) keeps a pair under 2^15, so exact. The
	 * compiler computes w's sign and magnitude once for a quad's tokens. */
	__m256i ones = _mm256_set1_epi16(1), xb = _mm256_set1_epi32(x);

	for (int h = 0; h < 2; h++) {
		__m256i a, ws;

#if SUMS_IN_HALVES
		a = acc->h[h];
		ws = w->h[h];
#else
		memcpy(&a, (char *)acc + h * sizeof(a), sizeof(a));
		memcpy(&ws, (const char *)w + h * sizeof(ws), sizeof(ws));
#endif
		__m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(ws), _mm256_sign_epi8(xb, ws));

		a = _mm256_add_epi32(a, _mm256_madd_epi16(pairs, ones));
#if SUMS_IN_HALVES
		acc->h[h] = a;
#else
		memcpy((char *)acc + h * sizeof(a), &a, sizeof(a));
#endif
	}
#else
	v16u u;

	memcpy(&u, w, sizeof(u));
	for (int c = 0; c < 4; c++)
		*acc += (v16i)((u >> (8 * c)) & 0xff) * (int32_t)(int8_t)(x >> (8 * c));
#endif
}

/* Quad k of a Q8_0 or Q4_0 block's values (backend/panels.h) as 16 lanes
 * of 4 unsigned bytes: Q4_0's pair k / 2, masked or shifted. */
static inline __attribute__((always_inline)) void quad_at(Quad *wq, const char *blk, WeightType type, int k)
{
#if SUMS_IN_HALVES
	for (int h = 0; h < 2; h++) {
		if (nibble_type(type)) {
			__m256i u = _mm256_loadu_si256((const __m256i *)(blk + k / 2 * Q8_QUAD_BYTES) + h);

			u = _mm256_and_si256(k % 2 ? _mm256_srli_epi32(u, 4) : u, _mm256_set1_epi8(0x0f));
			wq->h[h] = _mm256_sub_epi8(u, _mm256_set1_epi8(8));
		} else {
			__m256i u = _mm256_loadu_si256((const __m256i *)(blk + k * Q8_QUAD_BYTES) + h);

			wq->h[h] = _mm256_xor_si256(u, _mm256_set1_epi8((char)0x80)); /* u - 128, signed */
		}
	}
#else
	if (nibble_type(type)) {
		v16u u;

		memcpy(&u, blk + k / 2 * Q8_QUAD_BYTES, sizeof(u));
		*wq = (v16i)((k % 2 ? u >> 4 : u) & 0x0f0f0f0fu);
#if DOT4_SIGNED
		*wq = (v16i)((v64b)*wq - 8);
#endif
		return;
	}
	memcpy(wq, blk + k * Q8_QUAD_BYTES, sizeof(*wq));
#if DOT4_SIGNED
	*wq = (v16i)((v64b)*wq ^ (int8_t)0x80); /* u - 128 as a signed byte */
#endif
#endif
}

/* A block's exact sums less off, as floats. */
static inline __attribute__((always_inline)) void sums_to_floats(v16f *f, const BlockSums *s, int32_t off)
{
#if SUMS_IN_HALVES
	__m256i o = _mm256_set1_epi32(off);
	__m256 lo = _mm256_cvtepi32_ps(_mm256_sub_epi32(s->h[0], o));
	__m256 hi = _mm256_cvtepi32_ps(_mm256_sub_epi32(s->h[1], o));

	memcpy(f, &lo, sizeof(lo));
	memcpy((char *)f + sizeof(lo), &hi, sizeof(hi));
#else
	*f = __builtin_convertvector(*s - off, v16f);
#endif
}

typedef int8_t v16sb __attribute__((vector_size(PANEL_ROWS)));

/* A k-quant sub-block's 16 int8 scales as floats. */
static inline __attribute__((always_inline)) void scales_to_floats(v16f *f, const int8_t *sc)
{
	v16sb b;

	memcpy(&b, sc, sizeof(b));
	*f = __builtin_convertvector(__builtin_convertvector(b, v16i), v16f);
}

/* A k-quant sub-block's exact sums less off, times the rows' scales scf
 * (scales_to_floats). Every sum, scale and product is an integer under 2^24
 * (Q6_K at most 16 x 32 x 127 x 128, Q4_K 32 x 15 x 127 x 63), so the float
 * product is the exact integer one, without a slow vpmulld a token; the
 * scales convert once a block. */
static inline __attribute__((always_inline)) void scaled_sums_to_floats(v16f *f, const BlockSums *s, int32_t off,
									const v16f *scf)
{
	sums_to_floats(f, s, off);
	*f *= *scf;
}

/* Half j of Q6_K block b ends a sub-block: each lane's exact sum, less the
 * +128 its weights carry (ks: matmul.h), times the row's int8 scale, then
 * one multiply-add by the superblock's scale and the token's (kd); the
 * sums start again. As ggml, a value's weight is d x scale x code. */
static inline __attribute__((always_inline)) void
q6k_sub_block(v16f acc[][TOKEN_GROUP], BlockSums isum[][TOKEN_GROUP], const char *w, size_t ldp, int G,
	      const QuantRows *xq, int T, int n, int b, int j)
{
#pragma GCC unroll 4
	for (int g = 0; g < G; g++) {
		const char *panel = w + g * ldp;
		v16f dsup;

		v16f scf;

		halves_to_floats(&dsup, panel + kquant_d_offset(n) + (size_t)(b / 8) * sizeof(v16h));
		scales_to_floats(&scf, (const int8_t *)panel + (size_t)b * 2 * PANEL_ROWS + j * PANEL_ROWS);
#pragma GCC unroll 8
		for (int t = 0; t < T; t++) {
			int32_t bias = xq->ks[(size_t)t * (n / 16) + 2 * b + j];
			v16f exact;

			scaled_sums_to_floats(&exact, &isum[g][t], DOT4_SIGNED ? 0 : bias, &scf);
			acc[g][t] += exact * (dsup * xq->kd[(size_t)t * (n / Q6_K_BLOCK) + b / 8]);
			sums_zero(&isum[g][t]);
		}
	}
}

/* Q4_K block b (a sub-block of 32) ends: each lane's exact sum (plus the 8
 * x the input's sum that AVX2's signed codes took off), times the row's
 * 6-bit scale, in one multiply-add by d and the input's scale; then the
 * row's 6-bit min times the input's sum, in one by -dmin and the input's
 * scale. As ggml, a value's weight is d x scale x code - dmin x min. */
static inline __attribute__((always_inline)) void
q4k_sub_block(v16f acc[][TOKEN_GROUP], BlockSums isum[][TOKEN_GROUP], const char *w, size_t ldp, int G,
	      const QuantRows *xq, int T, int n, int b)
{
#pragma GCC unroll 4
	for (int g = 0; g < G; g++) {
		const char *panel = w + g * ldp;
		const uint8_t *scale = (const uint8_t *)panel + (size_t)b * 2 * PANEL_ROWS;
		v16f dsup, dmin, mins, scf;

		halves_to_floats(&dsup, panel + kquant_d_offset(n) + (size_t)(b / 8) * 2 * sizeof(v16h));
		halves_to_floats(&dmin, panel + kquant_d_offset(n) + (size_t)(b / 8) * 2 * sizeof(v16h) + sizeof(v16h));
		scales_to_floats(&mins, (const int8_t *)scale + PANEL_ROWS);
		scales_to_floats(&scf, (const int8_t *)scale);
#pragma GCC unroll 8
		for (int t = 0; t < T; t++) {
			const int32_t *ks = xq->ks + (size_t)t * (n / 16) + 2 * b;
			int32_t sum = (ks[0] + ks[1]) / 128; /* the input's 32 values */
			float kd = xq->kd[(size_t)t * (n / Q6_K_BLOCK) + b / 8];
			v16f exact;

			scaled_sums_to_floats(&exact, &isum[g][t], DOT4_SIGNED ? -8 * sum : 0, &scf);
			acc[g][t] += exact * (dsup * kd);
			acc[g][t] += (mins * (float)sum) * (dmin * -kd);
		}
	}
}

/* Q8_0 or Q4_0 panels against T tokens quantized (QuantRows): per block,
 * each lane's exact integer dot product over the block's 8 quads, less the
 * +128 (Q8_0) or +8 (Q4_0, s / 16) the weights carry (AVX2 takes it off
 * each weight as it loads: quad_at), then added to the
 * row's sum in one multiply-add by the weight's and the token's scales:
 * (float)isum * (dw * dx). The OpenCL kernels (00_common.cl) do the same,
 * so the backends agree. G x T is at most 8: an integer and a float sum
 * each. */
static inline __attribute__((always_inline)) void
q_panel_block(const char *w, WeightType type, size_t ldp, int G, const QuantRows *xq, int T, int n,
	      float *out, size_t ldo, int rows)
{
	v16f acc[MAX_PANELS][TOKEN_GROUP];
	int nb = n / Q8_0_BLOCK;
	size_t block_bytes = quant_block_bytes(type);
	const char *values = w + quant_scale_bytes(type, n);
	/* Blocks ahead to prefetch, per panel: a block takes T times longer
	 * with more tokens, and G panels stream at once. At 8 tokens 2 blocks
	 * ahead left the product waiting on memory (90 against 57 us for a
	 * 2048 x 768 matrix out of cache, the time it takes in cache). */
	int ahead = T == 1 ? 2 : 16 / G;

	zero_sums(acc, G, T);
	for (int b = 0; b < nb; b++) {
		const char *blk = values + (size_t)b * block_bytes;
		BlockSums isum[MAX_PANELS][TOKEN_GROUP];

#pragma GCC unroll 4
		for (int g = 0; g < G; g++)
#pragma GCC unroll 8
			for (int t = 0; t < T; t++)
				sums_zero(&isum[g][t]);
		if (b % 2 == 0) /* a line holds two blocks' scales */
#pragma GCC unroll 4
			for (int g = 0; g < G; g++)
				__builtin_prefetch(w + g * ldp + (size_t)(b + ahead) * sizeof(v16h), 0, 3);
#pragma GCC unroll 8
		for (int k = 0; k < Q8_QUADS; k++) {
#pragma GCC unroll 4
			for (int g = 0; g < G; g++) {
				Quad wq;

				quad_at(&wq, blk + g * ldp, type, k);
				if (!nibble_type(type) || k % 2 == 0) /* each line once */
					__builtin_prefetch(blk + g * ldp + (!nibble_type(type) ? k : k / 2) * Q8_QUAD_BYTES +
								   ahead * block_bytes,
							   0, 3);
#pragma GCC unroll 8
				for (int t = 0; t < T; t++) {
					int32_t x4;

					memcpy(&x4, (weight_type_kquant(type) ? xq->kq : xq->q) + (size_t)t * n +
							    (size_t)b * Q8_0_BLOCK + 4 * k,
					       4);
					dot4(&isum[g][t], &wq, x4);
				}
			}
			if (type == WEIGHT_Q6_K && k % 4 == 3)
				q6k_sub_block(acc, isum, w, ldp, G, xq, T, n, b, k / 4);
		}
		if (type == WEIGHT_Q4_K)
			q4k_sub_block(acc, isum, w, ldp, G, xq, T, n, b);
		if (weight_type_kquant(type))
			continue;
#pragma GCC unroll 4
		for (int g = 0; g < G; g++) {
			v16f scale;

			halves_to_floats(&scale, w + g * ldp + (size_t)b * sizeof(v16h));
#pragma GCC unroll 8
			for (int t = 0; t < T; t++) {
				int32_t s = xq->s[(size_t)t * nb + b];
				v16f exact;

				sums_to_floats(&exact, &isum[g][t], DOT4_SIGNED ? 0 : type == WEIGHT_Q4_0 ? s / 16 : s);
				acc[g][t] += exact * (scale * xq->d[(size_t)t * nb + b]);
			}
		}
	}
	store_sums(acc, G, T, out, ldo, rows);
}

#if defined(__AVX512VNNI__) && defined(__x86_64__)
#define AMX_TOKENS 16 /* a tile's rows: tokens per AMX pass */

/* The AMX tiles: A, 16 tokens' 32 int8 inputs of a sub-block (rows n
 * bytes apart); B, its 8 quads of 16 rows' unsigned codes (backend/panels.h:
 * a quad is a B row as TDPBSUD reads it); C, the 16 x 16 int32 sums. Two
 * sets, for even and odd sub-blocks (q4k_panel_amx). */
#define TILE_A 0
#define TILE_B 1
#define TILE_C 2
#define TILE_A1 3
#define TILE_B1 4
#define TILE_C1 5

typedef struct {
	uint8_t palette, start_row, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} TileConfig;

__attribute__((target("amx-tile"))) static void amx_configure(void)
{
	TileConfig c = { .palette = 1 };

	for (int set = 0; set <= TILE_A1; set += TILE_A1) {
		c.rows[TILE_A + set] = AMX_TOKENS, c.colsb[TILE_A + set] = Q8_0_BLOCK;
		c.rows[TILE_B + set] = Q8_QUADS, c.colsb[TILE_B + set] = Q8_QUAD_BYTES;
		c.rows[TILE_C + set] = AMX_TOKENS, c.colsb[TILE_C + set] = PANEL_ROWS * sizeof(int32_t);
	}
	_tile_loadconfig(&c);
}

/* Sub-block b's 8 quads of a Q4_K panel's codes, as tile B reads them. */
static inline __attribute__((always_inline)) void q4k_quads(uint8_t quads[Q8_QUADS][Q8_QUAD_BYTES],
							   const char *values, int b)
{
	const char *blk = values + (size_t)b * quant_block_bytes(WEIGHT_Q4_K);

	for (int k = 0; k < Q8_QUADS; k++) {
		Quad q;

		quad_at(&q, blk, WEIGHT_Q4_K, k);
		memcpy(quads[k], &q, sizeof(q));
	}
}

/* Sub-block b's 16 x 16 integer sums (sums, from tile C) scaled into acc by
 * q4k_sub_block, 8 tokens at a time. */
static inline __attribute__((always_inline)) void
q4k_scale_tile(v16f acc[2][1][TOKEN_GROUP], int32_t sums[AMX_TOKENS][PANEL_ROWS], const char *w,
	       const QuantRows half[2], int n, int b)
{
	for (int h = 0; h < 2; h++) {
		BlockSums isum[1][TOKEN_GROUP];

		for (int t = 0; t < TOKEN_GROUP; t++)
			memcpy(&isum[0][t], sums[h * TOKEN_GROUP + t], sizeof(isum[0][t]));
		q4k_sub_block(acc[h], isum, w, 0, 1, &half[h], TOKEN_GROUP, n, b);
	}
}

/* Loads sub-block b into tiles A and B of a set, and starts its product. */
#define Q4K_TILE_PRODUCT(A, B, C, quads, b)                                  \
	do {                                                                 \
		q4k_quads(quads, values, b);                                 \
		_tile_loadd(B, quads, Q8_QUAD_BYTES);                        \
		_tile_loadd(A, xq->kq + (size_t)(b) * Q8_0_BLOCK, n);        \
		_tile_zero(C);                                               \
		_tile_dpbsud(C, A, B);                                       \
	} while (0)

/* One Q4_K panel against 16 tokens: per sub-block the integer sums come
 * from one TDPBSUD (the same exact sums as dot4's), then q4k_sub_block
 * scales them as the VNNI path does, 8 tokens at a time, so a token's
 * outputs are the same bits in either path. The next sub-block's product
 * runs in the other set of tiles while this one's sums are scaled: one set
 * left the core waiting on each product and its store (a third of the
 * time here). Sub-blocks are scaled in order, so the sums are unchanged. */
__attribute__((target("amx-tile,amx-int8"))) static void
q4k_panel_amx(const char *w, const QuantRows *xq, int n, float *out, size_t ldo, int rows)
{
	v16f acc[2][1][TOKEN_GROUP];
	const char *values = w + quant_scale_bytes(WEIGHT_Q4_K, n);
	uint8_t quads[2][Q8_QUADS][Q8_QUAD_BYTES] __attribute__((aligned(64)));
	int32_t sums[AMX_TOKENS][PANEL_ROWS] __attribute__((aligned(64)));
	QuantRows half[2] = { *xq, *xq };
	int nb = n / Q8_0_BLOCK; /* even: n is whole 256-value blocks */

	half[1].kq += (size_t)TOKEN_GROUP * n; /* tokens 8..15 */
	half[1].kd += (size_t)TOKEN_GROUP * (n / Q6_K_BLOCK);
	half[1].ks += (size_t)TOKEN_GROUP * (n / 16);
	zero_sums(acc[0], 1, TOKEN_GROUP);
	zero_sums(acc[1], 1, TOKEN_GROUP);
	Q4K_TILE_PRODUCT(TILE_A, TILE_B, TILE_C, quads[0], 0);
	for (int b = 0; b < nb; b += 2) {
		Q4K_TILE_PRODUCT(TILE_A1, TILE_B1, TILE_C1, quads[1], b + 1);
		_tile_stored(TILE_C, sums, sizeof(sums[0]));
		q4k_scale_tile(acc, sums, w, half, n, b);
		if (b + 2 < nb)
			Q4K_TILE_PRODUCT(TILE_A, TILE_B, TILE_C, quads[0], b + 2);
		_tile_stored(TILE_C1, sums, sizeof(sums[0]));
		q4k_scale_tile(acc, sums, w, half, n, b + 1);
	}
	store_sums(acc[0], 1, TOKEN_GROUP, out, ldo, rows);
	store_sums(acc[1], 1, TOKEN_GROUP, out + TOKEN_GROUP * ldo, ldo, rows);
}

/* The first tokens of a Q4_K product by AMX, 16 at a time, where the CPU
 * lets us (amx.c asked the kernel for the tiles); returns the tokens
 * done. */
__attribute__((target("amx-tile,amx-int8"))) static int q4k_rows_amx(const char *w, int n, int r0, int r1, const MatInput *in, int batch, float *out,
			size_t ldo)
{
	size_t ldp = panel_bytes(WEIGHT_Q4_K, n);
	int done = 0;

	if (!matmul_amx_ready || batch < AMX_TOKENS)
		return 0;
	amx_configure();
	for (; done + AMX_TOKENS <= batch; done += AMX_TOKENS) {
		QuantRows xq = *in->q;

		xq.kq += (size_t)done * n;
		xq.kd += (size_t)done * (n / Q6_K_BLOCK);
		xq.ks += (size_t)done * (n / 16);
		for (int r = r0; r < r1; r += PANEL_ROWS)
			q4k_panel_amx(w + (size_t)(r / PANEL_ROWS) * ldp, &xq, n, out + (size_t)done * ldo + r, ldo,
				      r1 - r < PANEL_ROWS ? r1 - r : PANEL_ROWS);
	}
	_tile_release();
	return done;
}
#else
static int q4k_rows_amx(const char *w, int n, int r0, int r1, const MatInput *in, int batch, float *out,
			size_t ldo)
{
	return 0;
}
#endif

/* G panels against T tokens of a packed type; G, T and type are constants
 * wherever this is inlined. Combinations the walk below never makes are
 * dropped here, so they are not compiled: Q8_0 keeps an integer block sum
 * beside each accumulator (G x T at most 8), the others at most 16. */
static inline __attribute__((always_inline)) void
block_of_type(const char *w, WeightType type, size_t ldp, int G, const MatInput *in, int b, int T, int n,
	      float *out, size_t ldo, int rows)
{
	if (weight_type_quantized(type)) {
		if (G * T <= 8) {
			size_t at = (size_t)b * (n / Q8_0_BLOCK);
			QuantRows xq = { in->q->q + (size_t)b * n, in->q->d + at, in->q->s + at, NULL, NULL, NULL };

			if (weight_type_kquant(type)) {
				xq.kq = in->q->kq + (size_t)b * n;
				xq.kd = in->q->kd + (size_t)b * (n / Q6_K_BLOCK);
				xq.ks = in->q->ks + (size_t)b * (n / 16);
			}

			q_panel_block(w, type, ldp, G, &xq, T, n, out, ldo, rows);
		}
	} else if (G * T <= 16) {
		panel_block(w, type, ldp, G, in->x + (size_t)b * n, n, T, n, out, ldo, rows);
	}
}

/* block_of_type with T a constant, so the accumulators stay in registers;
 * tokens b.. of the input. */
static inline __attribute__((always_inline)) void
blocks_of_type(const char *w, WeightType type, size_t ldp, int G, const MatInput *in, int b, int T, int n,
	       float *out, size_t ldo, int rows)
{
	switch (T) {
	case 8: block_of_type(w, type, ldp, G, in, b, 8, n, out, ldo, rows); break;
	case 7: block_of_type(w, type, ldp, G, in, b, 7, n, out, ldo, rows); break;
	case 6: block_of_type(w, type, ldp, G, in, b, 6, n, out, ldo, rows); break;
	case 5: block_of_type(w, type, ldp, G, in, b, 5, n, out, ldo, rows); break;
	case 4: block_of_type(w, type, ldp, G, in, b, 4, n, out, ldo, rows); break;
	case 3: block_of_type(w, type, ldp, G, in, b, 3, n, out, ldo, rows); break;
	case 2: block_of_type(w, type, ldp, G, in, b, 2, n, out, ldo, rows); break;
	default: block_of_type(w, type, ldp, G, in, b, 1, n, out, ldo, rows); break;
	}
}

/* Panels a block takes for T tokens: as many as the registers hold. */
static inline __attribute__((always_inline)) int panel_group(WeightType type, int T)
{
	if (weight_type_quantized(type))
		return T <= 2 ? 4 : T <= 4 ? 2 : 1;
	return T <= 4 ? 4 : 2;
}

/* matmul_rows for one packed type (a constant once inlined): tokens in
 * groups of TOKEN_GROUP, rows in blocks of G panels (fewer at the end). */
static inline __attribute__((always_inline)) void
rows_of_type(const char *w, WeightType type, int n, int r0, int r1, const MatInput *in, int batch, float *out,
	     size_t ldo)
{
	size_t ldp = panel_bytes(type, n);
	int b0 = type == WEIGHT_Q4_K ? q4k_rows_amx(w, n, r0, r1, in, batch, out, ldo) : 0;

	for (int b = b0; b < batch; b += TOKEN_GROUP) {
		int T = batch - b < TOKEN_GROUP ? batch - b : TOKEN_GROUP;
		float *ot = out + (size_t)b * ldo;

		for (int r = r0; r < r1;) {
			const char *wp = w + (size_t)(r / PANEL_ROWS) * ldp;
			int left = r1 - r, G = panel_group(type, T);

			while (G > 1 && left < G * PANEL_ROWS)
				G /= 2;
			int rows = G == 1 && left < PANEL_ROWS ? left : PANEL_ROWS;

			switch (G) {   /* a constant, as T is */
			case 4: blocks_of_type(wp, type, ldp, 4, in, b, T, n, ot + r, ldo, rows); break;
			case 2: blocks_of_type(wp, type, ldp, 2, in, b, T, n, ot + r, ldo, rows); break;
			default: blocks_of_type(wp, type, ldp, 1, in, b, T, n, ot + r, ldo, rows); break;
			}
			r += G * rows;
		}
	}
}

#define KERNEL_NAME(level) KERNEL_NAME_(level)
#define KERNEL_NAME_(level) matmul_rows_typed_##level

void KERNEL_NAME(MATMUL_LEVEL)(const void *w, WeightType type, int n, int r0, int r1, const MatInput *in,
			       int batch, float *out, size_t ldo)
{
	switch (type) {
	case WEIGHT_F16: rows_of_type(w, WEIGHT_F16, n, r0, r1, in, batch, out, ldo); break;
	case WEIGHT_Q8_0: rows_of_type(w, WEIGHT_Q8_0, n, r0, r1, in, batch, out, ldo); break;
	case WEIGHT_Q4_0: rows_of_type(w, WEIGHT_Q4_0, n, r0, r1, in, batch, out, ldo); break;
	case WEIGHT_Q4_K: rows_of_type(w, WEIGHT_Q4_K, n, r0, r1, in, batch, out, ldo); break;
	case WEIGHT_Q6_K: rows_of_type(w, WEIGHT_Q6_K, n, r0, r1, in, batch, out, ldo); break;
	default: rows_of_type(w, WEIGHT_F32, n, r0, r1, in, batch, out, ldo); break;
	}
}
