/* 00_common.cl - helpers shared by the forward-pass kernels.
 *
 * The kernels are written for PoCL's CPU device: one work-item computes a
 * panel of 16 weight rows against a group of tokens with explicit vector
 * loads, so each weight is streamed from memory once per 8 tokens and the
 * compiler gets plain vector FMAs (it does not have to vectorize across
 * work-items). Token vectors are first staged (and rmsnorm'ed) into local
 * memory once per work-group. */

/* On a CPU device (the host defines CPU_DEVICE) a panel's columns ahead
 * are prefetched while this one computes, as on the CPU backend: PoCL's
 * own prefetch() is a no-op. clang's builtin wants a plain pointer; a CPU
 * device has one flat address space. */
#ifdef CPU_DEVICE
#define PREFETCH(p) __builtin_prefetch((const void *)(ulong)(p))
#define PREFETCH_WRITE(p) __builtin_prefetch((const void *)(ulong)(p), 1)
#else
#define PREFETCH(p) ((void)0)
#define PREFETCH_WRITE(p) ((void)0)
#endif

static inline float hsum8(float8 v)
{
	float4 s = v.lo + v.hi;
	return (s.x + s.y) + (s.z + s.w);
}

static inline float hsum16(float16 v)
{
	return hsum8(v.lo + v.hi);
}

#ifndef WTYPE
#define WTYPE 0  /* the matrices' stored type: see PANEL_BYTES below */
#endif
#define QUANTIZED (WTYPE == 8 || WTYPE == 2 || WTYPE == 12 || WTYPE == 14)
#define KQUANT (WTYPE == 12 || WTYPE == 14) /* Q4_K, Q6_K: input as Q8_K */
#define NIBBLES (WTYPE == 2 || WTYPE == 12) /* Q4_0, Q4_K: two codes a byte */
#define Q8_BLOCK 32
#define Q6K_BLOCK 256
/* A quantized staged token's scales cover SCALE_SPAN values, its sums
 * SUM_SPAN (stage_quantize). */
#if KQUANT
#define SCALE_SPAN Q6K_BLOCK
#define SUM_SPAN 16
#else
#define SCALE_SPAN Q8_BLOCK
#define SUM_SPAN Q8_BLOCK
#endif

#ifndef NORM_EPS
#define NORM_EPS 1e-5f   /* llama2.c's; the host says the model's */
#endif

/* Staging: n token vectors of width k from x into local memory xs, token t
 * being row idx[t] of x, or row t when idx is NULL. With g non-NULL each is
 * rmsnorm'ed as llama2.c does: g[j] * (x[j] / sqrt(mean(x^2) + eps)), eps the
 * model's (NORM_EPS, from the host's build options).
 * F32 and F16 programs stage n*k floats, then the n per-token scales. With
 * quantized weights (QUANTIZED) the tokens are quantized as llama.cpp
 * quantizes such a product's input, straight from x: xs holds the n
 * scales, then the n*k int8 values, n*k/32 block scales d and n*k/32 sums
 * s (128 x the block's sum of its values); for the k-quants (KQUANT, Q8_K)
 * n*k/256 scales and n*k/16 sums. Staging no floats lets a call
 * take 64 tokens of the stories110M shape's 2048-wide input, not 48. The
 * operations are the CPU backend's (quantize_kernel.c, quantize_rows), so both get
 * the same values. Work-item lid of lsz does every lsz-th token's scale,
 * then every lsz-th column (or block). */
static inline __local float *staged_scales(__local float *xs, int n, int k)
{
	return QUANTIZED ? xs : xs + n * k;
}

static void stage_scales(const __global float *x, const __global int *idx, int n, int k,
			 const __global float *g, __local float *xs, int lid, int lsz)
{
	__local float *scale = staged_scales(xs, n, k);

	for (int t = lid; t < n; t += lsz) {
		const __global float *xt = x + (size_t)(idx ? idx[t] : t) * k;
		float s = 1.0f;
		if (g) {
			/* 16 lanes, as the dots: a serial sum here cost every
			 * work-group ~1 us while its other items waited */
			float16 acc = 0;
			int j = 0;
			for (; j + 16 <= k; j += 16) {
				float16 v = vload16(0, xt + j);
				acc = fma(v, v, acc);
			}
			float ss = hsum16(acc);
			for (; j < k; j++)
				ss = fma(xt[j], xt[j], ss);
			ss = ss / k + NORM_EPS;
			s = 1.0f / sqrt(ss);
		}
		scale[t] = s;
	}
}

#if QUANTIZED
static inline __local char *staged_q(__local float *xs, int n)
{
	return (__local char *)(xs + n);
}

/* Token t's value j of the staged block starting at column j0, normed as
 * stage_quantize's vectors norm it: g[j] * (s * x[j]). */
static inline float normed_value(const __global float *xt, const __global float *g, int j0, int j, float s)
{
	return g ? g[j0 + j] * (s * xt[j]) : xt[j];
}

#if KQUANT
/* A k-quant's input as llama.cpp quantizes it (Q8_K), as the CPU backend does
 * (quantize_kernel.c, quantize_q8k): the value of largest magnitude (the
 * first on a tie) codes -127; each product rounded, then to an integer,
 * ties to even; at most 127. A float scale for the 256 values, an int per
 * 16 (128 x their sum). The loop is scalar. */
static inline void quantize_block(const __global float *xt, const __global float *g, int j0, float s,
				  __local char *q, __local float *d, __local int *sums)
{
	float amax = 0.0f, max = 0.0f;

	for (int j = 0; j < Q6K_BLOCK; j++) {
		float v = normed_value(xt, g, j0, j, s);

		if (fabs(v) > amax) {
			amax = fabs(v);
			max = v;
		}
	}
	float iscale = amax != 0.0f ? -127.0f / max : 0.0f;

	*d = amax != 0.0f ? 1.0f / iscale : 0.0f;
	for (int j = 0; j < Q6K_BLOCK; j += 16) {
		int sum = 0;

		for (int i = 0; i < 16; i++) {
			float p = iscale * normed_value(xt, g, j0, j + i, s);
			int v = min(127, (int)rint(p));

			q[j + i] = (char)v;
			sum += v;
		}
		sums[j / 16] = 128 * sum;
	}
}
#else
/* A block of 32, two float16 at a time: lane by lane the same operations
 * as one value at a time, so no bit moves. The scalar loop was 3.6-3.8% of
 * the samples of 8 served stories110M-shape Q8_0 streams; this is 1.9%. */
static inline void quantize_block(const __global float *xt, const __global float *g, int j0, float s,
				  __local char *q, __local float *d, __local int *sums)
{
	float16 v0 = vload16(0, xt), v1 = vload16(1, xt);

	if (g) {
		v0 = vload16(0, g + j0) * (s * v0);
		v1 = vload16(1, g + j0) * (s * v1);
	}
	float16 m16 = fmax(fabs(v0), fabs(v1));
	float8 m8 = fmax(m16.lo, m16.hi);
	float4 m4 = fmax(m8.lo, m8.hi);
	float amax = fmax(fmax(fmax(0.0f, m4.x), m4.y), fmax(m4.z, m4.w));
	float db = amax / 127.0f, id = db != 0.0f ? 1.0f / db : 0.0f;
	/* ties to even, as quantize_kernel.c's scaled_round */
	char16 q0 = convert_char16(fma(v0, id, 12582912.0f) - 12582912.0f);
	char16 q1 = convert_char16(fma(v1, id, 12582912.0f) - 12582912.0f);
	short16 qs = convert_short16(q0) + convert_short16(q1);
	short8 s8 = qs.lo + qs.hi;
	short4 s4 = s8.lo + s8.hi;

	/* as ints: PoCL stores a char16 a byte at a time */
	vstore4(as_int4(q0), 0, (__local int *)q);
	vstore4(as_int4(q1), 1, (__local int *)q);
	*d = db;
	*sums = 128 * ((s4.x + s4.y) + (s4.z + s4.w));
}
#endif

/* Quantizes the tokens' blocks of SCALE_SPAN, each value normed as it is
 * read. Work-item lid of lsz takes every lsz-th block. */
static void stage_quantize(const __global float *x, const __global int *idx, int n, int k,
			   const __global float *g, __local float *xs, int lid, int lsz)
{
	const __local float *scale = staged_scales(xs, n, k);
	__local char *q = staged_q(xs, n);
	__local float *d = (__local float *)(q + n * k);
	__local int *sums = (__local int *)(d + n * k / SCALE_SPAN);
	int nb = k / SCALE_SPAN;

	for (int b = lid; b < n * nb; b += lsz) {
		int t = b / nb, j0 = b % nb * SCALE_SPAN;
		const __global float *xt = x + (size_t)(idx ? idx[t] : t) * k + j0;

		quantize_block(xt, g, j0, scale[t], q + b * SCALE_SPAN, d + b, sums + b * (SCALE_SPAN / SUM_SPAN));
	}
}
#else
static void stage_copy(const __global float *x, const __global int *idx, int n, int k,
		       const __global float *g, __local float *xs, int lid, int lsz)
{
	const __local float *scale = staged_scales(xs, n, k);

	for (int t = 0; t < n; t++) {
		const __global float *xt = x + (size_t)(idx ? idx[t] : t) * k;
		float s = scale[t];
		for (int j = lid; j < k; j += lsz)
			xs[t * k + j] = g ? g[j] * (s * xt[j]) : xt[j];
	}
}
#endif

/* The values after the scales: quantized, or copied. */
static void stage_values(const __global float *x, const __global int *idx, int n, int k,
			 const __global float *g, __local float *xs, int lid, int lsz)
{
#if QUANTIZED
	stage_quantize(x, idx, n, k, g, xs, lid, lsz);
#else
	stage_copy(x, idx, n, k, g, xs, lid, lsz);
#endif
}

/* Staging by every work-item of the group (it has barriers). */
static void stage_tokens(const __global float *x, const __global int *idx, int n, int k,
			 const __global float *g, __local float *xs)
{
	int lid = get_local_id(0), lsz = get_local_size(0);

	stage_scales(x, idx, n, k, g, xs, lid, lsz);
	barrier(CLK_LOCAL_MEM_FENCE);
	stage_values(x, idx, n, k, g, xs, lid, lsz);
	barrier(CLK_LOCAL_MEM_FENCE);
}

/* Staging by a work-item alone in its group, where a barrier could sit
 * in code the group takes or not as a whole. */
static void stage_alone(const __global float *x, const __global int *idx, int n, int k,
			const __global float *g, __local float *xs)
{
	stage_scales(x, idx, n, k, g, xs, 0, 1);
	stage_values(x, idx, n, k, g, xs, 0, 1);
}

/* Matrices come packed as for the CPU backend (backend/panels.h): a (rows, k)
 * matrix is ceil(rows / 16) panels, panel p holding rows 16p..16p+15
 * column by column, so one 64-byte load is 16 rows' weights for one input.
 * A work-item takes a panel (or two) and multiplies each load by staged
 * input values broadcast, with no sums across lanes. */
#define PANEL_ROWS 16
#define TOK_GROUP 8 /* tokens per pass over a panel */

/* The stored type of the matrices this program's kernels read, set by the
 * host at build (ggml's numbers: 0 F32, 1 F16, 2 Q4_0, 8 Q8_0, 12 Q4_K,
 * 14 Q6_K; a program per type a model has: backend/opencl/device.c), packed as
 * backend/panels.c packs it: an F16 panel holds 16 halves a column. A Q8_0 or Q4_0 panel holds
 * its blocks' scales as stored, 16 halves a block of 32 columns, padded to
 * 64 bytes (SCALE_BYTES), then each block's values (QBLOCK_BYTES): Q8_0's
 * 8 quads of 4 columns, 64 bytes each: row i's 4 values at 4i, plus 128,
 * unsigned; Q4_0's 4 pairs of quads, 64 bytes each: quad 2m in the low
 * nibbles of pair m, quad 2m + 1 in the high ones, plus 8. Values are
 * converted in registers, never stored as floats. */
#define Q8_QUADS (Q8_BLOCK / 4)
#if NIBBLES
#define QBLOCK_BYTES (Q8_BLOCK * PANEL_ROWS / 2)
#else
#define QBLOCK_BYTES (Q8_BLOCK * PANEL_ROWS)
#endif
/* The k-quants (backend/panels.h). Q6_K: Q8_0's quads, each code plus 96;
 * per block the rows' int8 scales of its two sub-blocks of 16, then per
 * superblock of 256 the rows' f16 scales, from KQ_D_OFFSET on. Q4_K: Q4_0's
 * pairs of quads, each code as it is; per block (a sub-block) the rows'
 * 6-bit scales, then mins, a byte each; per superblock the rows' f16 d,
 * then their f16 dmin. */
#define KQ_D_OFFSET(k) ((size_t)(k) / Q8_BLOCK * 2 * PANEL_ROWS)
#if KQUANT
#define KQ_D_HALVES (WTYPE == 12 ? 2 : 1) /* halves a row per superblock */
#define SCALE_BYTES(k) ((KQ_D_OFFSET(k) + (size_t)(k) / Q6K_BLOCK * KQ_D_HALVES * PANEL_ROWS * 2 + 63) / 64 * 64)
#else
#define SCALE_BYTES(k) (((size_t)(k) / Q8_BLOCK * PANEL_ROWS * 2 + 63) / 64 * 64)
#endif
#if WTYPE == 1
#define PANEL_BYTES(k) ((size_t)(k) * PANEL_ROWS * 2)
#elif QUANTIZED
#define PANEL_BYTES(k) (SCALE_BYTES(k) + (size_t)(k) / Q8_BLOCK * QBLOCK_BYTES)
#else
#define PANEL_BYTES(k) ((size_t)(k) * PANEL_ROWS * 4)
#endif
/* Columns of a panel prefetched ahead: 32 as matmul.c (2 KB of F32). F16
 * takes 128 (4 KB): its stories110M-shape step ran 5.2-5.7 ms against
 * 5.7-6.6 at 32 (3 interleaved rounds, twice); F32 and the cpu backend's
 * F16 gained nothing from more. */
#if WTYPE == 1
#define PREFETCH_COLUMNS 128
#else
#define PREFETCH_COLUMNS 32
#endif

/* Pointers stay `float *` (the weights are one float-aligned buffer); the
 * panel's own type is read through the functions below. */
static inline const __global float *panel_ptr(const __global float *w, int p, int k)
{
	return (const __global float *)((const __global char *)w + (size_t)p * PANEL_BYTES(k));
}

#if QUANTIZED
/* The values of the quantized block of a (k-column) panel that holds
 * column j. */
static inline const __global char *q8_block(const __global float *panel, int k, int j)
{
	return (const __global char *)panel + SCALE_BYTES(k) + (size_t)(j / Q8_BLOCK) * QBLOCK_BYTES;
}

/* The 16 rows' scales of a panel's block b. */
static inline float16 block_scales(const __global float *panel, int b)
{
	return vload_half16(b, (const __global half *)panel);
}

/* Quads a 64-byte load of a block holds: Q4_0's pair, or one. */
#define QUADS_PER_LOAD (NIBBLES ? 2 : 1)

/* Quad h of a load as 16 lanes of 4 unsigned bytes: a Q4_0 pair's low
 * (h 0) or high (h 1) nibbles. */
static inline int16 load_quad(int16 l, int h)
{
#if NIBBLES
	return as_int16((as_uint16(l) >> (uint)(4 * h)) & (uint)0x0f0f0f0f);
#else
	return l;
#endif
}

/* The +128 (Q8_0, Q6_K) or +8 (Q4_0) the stored weights carry; AVX2 takes
 * 8 off Q4_K's codes too, and q4k_sub_block gives it back. */
#define WEIGHT_BIAS (NIBBLES ? 8 : 128)

/* The integer sum s (128 x the block's sum of x) as the weights' offset
 * takes it out: all of it for Q8_0, s / 16 for Q4_0. The AVX2 dot4 takes
 * the offset out of the weights itself. */
static inline int weight_offset(int s)
{
#ifdef X86_AVX2
	return 0;
#else
	return WTYPE == 2 ? s / 16 : s;
#endif
}
#endif

/* Column j of an F32 or F16 panel: its 16 rows as floats. */
static inline float16 load_column(const __global float *panel, int j)
{
#if WTYPE == 1
	return vload_half16(j, (const __global half *)panel);
#else
	return vload16(j, panel);
#endif
}

/* Where column j of an F32 or F16 panel starts, to prefetch. */
static inline const __global char *column_at(const __global float *panel, int j)
{
	return (const __global char *)panel + (size_t)j * (PANEL_BYTES(1) / PANEL_ROWS) * PANEL_ROWS;
}

/* Row i of a k-column panel at column j. */
static inline float panel_elem(const __global float *panel, int k, int i, int j)
{
#if WTYPE == 1
	return vload_half(j * PANEL_ROWS + i, (const __global half *)panel);
#elif WTYPE == 8
	const __global uchar *blk = (const __global uchar *)q8_block(panel, k, j);
	int jj = j % Q8_BLOCK;

	return (float)((int)blk[(jj / 4) * PANEL_ROWS * 4 + i * 4 + jj % 4] - 128) *
	       vload_half((j / Q8_BLOCK) * PANEL_ROWS + i, (const __global half *)panel);
#elif WTYPE == 14
	const __global uchar *blk = (const __global uchar *)q8_block(panel, k, j);
	int jj = j % Q8_BLOCK;
	float d = vload_half((j / Q6K_BLOCK) * PANEL_ROWS + i,
			     (const __global half *)((const __global char *)panel + KQ_D_OFFSET(k)));
	char sc = ((const __global char *)panel)[(j / Q8_BLOCK) * 2 * PANEL_ROWS + (jj / 16) * PANEL_ROWS + i];

	return d * (float)sc * (float)((int)blk[(jj / 4) * PANEL_ROWS * 4 + i * 4 + jj % 4] - 128);
#elif WTYPE == 12
	const __global uchar *blk = (const __global uchar *)q8_block(panel, k, j);
	const __global half *dm = (const __global half *)((const __global char *)panel + KQ_D_OFFSET(k));
	const __global uchar *sm = (const __global uchar *)panel + (j / Q8_BLOCK) * 2 * PANEL_ROWS;
	int jj = j % Q8_BLOCK;
	uchar b = blk[(jj / 8) * PANEL_ROWS * 4 + i * 4 + jj % 4];
	float scaled = vload_half((j / Q6K_BLOCK) * 2 * PANEL_ROWS + i, dm) * (float)sm[i] *
		       (float)(jj % 8 < 4 ? b & 15 : b >> 4);
	float min = vload_half((j / Q6K_BLOCK) * 2 * PANEL_ROWS + PANEL_ROWS + i, dm) * (float)sm[PANEL_ROWS + i];

	return scaled - min;
#elif WTYPE == 2
	const __global uchar *blk = (const __global uchar *)q8_block(panel, k, j);
	int jj = j % Q8_BLOCK;
	uchar b = blk[(jj / 8) * PANEL_ROWS * 4 + i * 4 + jj % 4];

	return (float)((int)(jj % 8 < 4 ? b & 15 : b >> 4) - 8) *
	       vload_half((j / Q8_BLOCK) * PANEL_ROWS + i, (const __global half *)panel);
#else
	return panel[j * PANEL_ROWS + i];
#endif
}

/* Panel a (and b when two) against NT staged tokens from x: acc[t] (and
 * acc[TOK_GROUP + t]) lane i is the panel's row i times token t. Every lane
 * is one fma chain over the columns in order, whatever NT, so a token's
 * result does not depend on its batch (the serving engine's batch
 * invariance), and the order is the CPU backend's. */
static inline __attribute__((always_inline)) void
panels_dot(const __global float *a, const __global float *b, int two,
	   const __local float *x, int k, int NT, float16 *acc)
{
	/* Sums in variables of their own, copied out at the end: on a CPU
	 * device acc could alias x, so sums kept in acc went back to memory
	 * at every column. */
	float16 ra[TOK_GROUP], rb[TOK_GROUP];

#pragma unroll
	for (int t = 0; t < TOK_GROUP; t++) {
		ra[t] = 0;
		rb[t] = 0;
	}
	for (int j = 0; j < k; j++) {
		float16 wa = load_column(a, j), wb = two ? load_column(b, j) : 0;

		PREFETCH(column_at(a, j + PREFETCH_COLUMNS));
		if (two)
			PREFETCH(column_at(b, j + PREFETCH_COLUMNS));
#pragma unroll
		for (int t = 0; t < NT; t++) {
			float16 xv = (float16)(x[t * k + j]);

			ra[t] = fma(wa, xv, ra[t]);
			if (two)
				rb[t] = fma(wb, xv, rb[t]);
		}
	}
#pragma unroll
	for (int t = 0; t < NT; t++) {
		acc[t] = ra[t];
		acc[TOK_GROUP + t] = rb[t];
	}
}

#if QUANTIZED
/* Quantized weights against the staged tokens: per block, each lane's
 * exact integer dot product over the block's 8 quads, less the +128 (or +8)
 * the weights carry, then one multiply-add by the weight's and the token's
 * scales, as on the CPU backend (matmul_kernel.c). dot4 is VNNI's vpdpbusd: each
 * lane's 4 unsigned bytes of w times the 4 signed bytes of x. Where the
 * host says the CPU device has it (X86_VNNI), the products are functions
 * of their own built for AVX512-VNNI: PoCL compiles for the CPU model its
 * LLVM knows (skylake-avx512 here, for a Zen 5), and the instruction can
 * only be used in a function that asks for the feature. */
#ifdef X86_VNNI
typedef int v16si __attribute__((vector_size(64)));
#define Q8_TARGET __attribute__((target("avx512vnni")))
#define Q8_FN __attribute__((target("avx512vnni"), noinline))
Q8_TARGET static inline int16 dot4(int16 acc, int16 w, int x)
{
	return as_int16(__builtin_ia32_vpdpbusd512((v16si)acc, (v16si)w, (v16si)(int16)(x)));
}
#elif defined(X86_AVX2)
/* Without VNNI (AVX2, as PoCL's haswell target on a Zen 3): vpmaddubsw
 * multiplies unsigned bytes by signed ones into 16-bit pair sums that
 * saturate, so it takes |w| (at most 128) against x with w's sign (x is at
 * most 127 either way): a pair sums to at most 2 * 128 * 127 < 2^15, and
 * the products stay exact. vpmaddwd by ones then adds each lane's pairs.
 * w's bias comes off first (the weights' signed values), so the block's
 * sum needs no offset (weight_offset). Across a quad's tokens the compiler
 * computes w's sign and magnitude once. */
typedef char v32qi __attribute__((vector_size(32)));
typedef short v16hi __attribute__((vector_size(32)));
typedef int v8si __attribute__((vector_size(32)));
#define Q8_TARGET __attribute__((target("avx2")))
#define Q8_FN __attribute__((target("avx2"), noinline))
Q8_TARGET static inline int8 dot4_half(int8 acc, int8 w, int x)
{
	v32qi ws = __builtin_astype(w, v32qi) - (char)WEIGHT_BIAS;
	v32qi neg = ws >> 7;
	v32qi mag = (ws ^ neg) - neg;
	v32qi xs = __builtin_ia32_psignb256(__builtin_astype((int8)(x), v32qi), ws);
	v16hi pairs = __builtin_ia32_pmaddubsw256(mag, xs);

	return acc + as_int8(__builtin_ia32_pmaddwd256(pairs, __builtin_astype((short16)(1), v16hi)));
}

Q8_TARGET static inline int16 dot4(int16 acc, int16 w, int x)
{
	return (int16)(dot4_half(acc.lo, w.lo, x), dot4_half(acc.hi, w.hi, x));
}
#else
#define Q8_TARGET
#define Q8_FN
static inline int16 dot4(int16 acc, int16 w, int x)
{
	uint16 u = as_uint16(w);

#pragma unroll
	for (int c = 0; c < 4; c++)
		acc += as_int16((u >> (uint)(8 * c)) & (uint)0xff) * (int)(char)(x >> (8 * c));
	return acc;
}
#endif

/* The staged tokens' quantized form (stage_quantize), from token t0 on. */
typedef struct {
	const __local char *q;  /* (NT, k) */
	const __local float *d; /* (NT, k / SCALE_SPAN) */
	const __local int *s;   /* (NT, k / SUM_SPAN) */
} StagedQ8;

static inline StagedQ8 staged_q8(const __local float *xs, int n, int k, int t0)
{
	const __local char *q = (const __local char *)(xs + n);
	const __local float *d = (const __local float *)(q + n * k);
	StagedQ8 r = { q + t0 * k, d + t0 * (k / SCALE_SPAN), (const __local int *)(d + n * k / SCALE_SPAN) +
							      t0 * (k / SUM_SPAN) };
	return r;
}

/* Whether a lone token prefetches every line of a block, or one a block,
 * leaving the rest to the hardware prefetcher. On the VNNI machines (Zen 5)
 * a line per quad made one token 8% slower; on a Zen 3 (AVX2) it made the
 * stories110M-shape Q8_0 step 6.91 against 7.43 ms (6 interleaved rounds,
 * faster in 5): there each line costs a dozen instructions, not one, and
 * fewer lines are in flight. */
#ifdef X86_VNNI
#define LONE_TOKEN_LINES 0
#else
#define LONE_TOKEN_LINES 1
#endif

/* One 64-byte load of a block's quads (Q8_LOADS a block) and its dot
 * products with every token: Q8_0 loads a quad, Q4_0 two (its low and high
 * nibbles). Spelled out as macros: PoCL's LLVM unrolled a loop over t only
 * in part, and kept the sums in memory. */
#define Q8_LOADS (Q8_QUADS / QUADS_PER_LOAD)
#define Q8_TOKEN(t, kq)                                            \
	if (t < NT) {                                              \
		int x4 = xq[t * (k / 4) + (kq)];                   \
		ia[t] = dot4(ia[t], wa, x4);                       \
		if (two)                                           \
			ib[t] = dot4(ib[t], wb, x4);               \
	}
#define Q8_QUAD(kl, h)                                                                    \
	{                                                                                 \
		int16 wa = load_quad(la, h), wb = load_quad(lb, h);                       \
		int kq = (kl) * QUADS_PER_LOAD + (h);                                     \
		Q8_TOKEN(0, kq) Q8_TOKEN(1, kq) Q8_TOKEN(2, kq) Q8_TOKEN(3, kq)           \
		Q8_TOKEN(4, kq) Q8_TOKEN(5, kq) Q8_TOKEN(6, kq) Q8_TOKEN(7, kq)           \
	}
#if NIBBLES
#define Q8_QUADS_OF_LOAD(kl) Q8_QUAD(kl, 0) Q8_QUAD(kl, 1)
#else
#define Q8_QUADS_OF_LOAD(kl) Q8_QUAD(kl, 0)
#endif
#define Q8_LOAD(kl)                                                                       \
	{                                                                                 \
		int16 la = vload16(kl, wqa), lb = two ? vload16(kl, wqb) : 0;            \
		if (NT > 1 || LONE_TOKEN_LINES) {                                         \
			PREFETCH(wqa + (kl) * 16 + ahead * QBLOCK_BYTES / 4);             \
			if (two)                                                          \
				PREFETCH(wqb + (kl) * 16 + ahead * QBLOCK_BYTES / 4);     \
		}                                                                         \
		Q8_QUADS_OF_LOAD(kl)                                                      \
	}

#if WTYPE == 12
/* Q4_K block blk (a sub-block of 32) ends: each lane's exact sum (plus the
 * 8 x the input's sum that AVX2's signed codes took off), times the row's
 * 6-bit scale, in one multiply-add by d and the token's scale; then the
 * row's min times the input's sum, in one by -dmin and the token's scale.
 * As the CPU backend's q4k_sub_block. */
Q8_TARGET static inline __attribute__((always_inline)) void
q4k_sub_block(const __global float *a, const __global float *b, int two, const StagedQ8 *x, int k, int NT,
	      int blk, int16 *ia, int16 *ib, float16 *ra, float16 *rb)
{
	const __global half *da = (const __global half *)((const __global char *)a + KQ_D_OFFSET(k)) + blk / 8 * 32;
	const __global half *db = (const __global half *)((const __global char *)b + KQ_D_OFFSET(k)) + blk / 8 * 32;
	const __global uchar *sa = (const __global uchar *)a + blk * 2 * PANEL_ROWS;
	const __global uchar *sb = (const __global uchar *)b + blk * 2 * PANEL_ROWS;
	float16 dsa = vload_half16(0, da), dma = vload_half16(1, da);
	float16 dsb = two ? vload_half16(0, db) : 0, dmb = two ? vload_half16(1, db) : 0;
	int16 sca = convert_int16(vload16(0, sa)), scb = two ? convert_int16(vload16(0, sb)) : 0;
	float16 mina = convert_float16(vload16(1, sa)), minb = two ? convert_float16(vload16(1, sb)) : 0;

#pragma unroll
	for (int t = 0; t < NT; t++) {
		int sum = (x->s[t * (k / 16) + 2 * blk] + x->s[t * (k / 16) + 2 * blk + 1]) / 128;
		float dx = x->d[t * (k / Q6K_BLOCK) + blk / 8];
#ifdef X86_AVX2
		int off = -8 * sum;
#else
		int off = 0;
#endif

		ra[t] = fma(convert_float16((ia[t] - off) * sca), dsa * dx, ra[t]);
		ra[t] = fma(mina * (float)sum, dma * -dx, ra[t]);
		if (two) {
			rb[t] = fma(convert_float16((ib[t] - off) * scb), dsb * dx, rb[t]);
			rb[t] = fma(minb * (float)sum, dmb * -dx, rb[t]);
		}
	}
}
#endif

#if WTYPE == 14
/* Half h of Q6_K block blk ends a sub-block: each lane's exact sum, less
 * the +128 its weights carry (the staged sum of the 16 values), times the
 * row's int8 scale, then one multiply-add by the superblock's scale and
 * the token's; the sums start again. As the CPU backend's q6k_sub_block. */
Q8_TARGET static inline __attribute__((always_inline)) void
q6k_sub_block(const __global float *a, const __global float *b, int two, const StagedQ8 *x, int k, int NT,
	      int blk, int h, int16 *ia, int16 *ib, float16 *ra, float16 *rb)
{
	const __global char *da = (const __global char *)a + KQ_D_OFFSET(k);
	const __global char *db = (const __global char *)b + KQ_D_OFFSET(k);
	float16 dsa = vload_half16(blk / 8, (const __global half *)da);
	float16 dsb = two ? vload_half16(blk / 8, (const __global half *)db) : 0;
	int16 sca = convert_int16(vload16(0, (const __global char *)a + blk * 2 * PANEL_ROWS + h * PANEL_ROWS));
	int16 scb = two ? convert_int16(vload16(0, (const __global char *)b + blk * 2 * PANEL_ROWS + h * PANEL_ROWS))
			: 0;

#pragma unroll
	for (int t = 0; t < NT; t++) {
		float dx = x->d[t * (k / Q6K_BLOCK) + blk / 8];
		int sx = weight_offset(x->s[t * (k / 16) + 2 * blk + h]);

		ra[t] = fma(convert_float16((ia[t] - sx) * sca), dsa * dx, ra[t]);
		ia[t] = 0;
		if (two) {
			rb[t] = fma(convert_float16((ib[t] - sx) * scb), dsb * dx, rb[t]);
			ib[t] = 0;
		}
	}
}
#endif

Q8_TARGET static inline __attribute__((always_inline)) void
q8_dot(const __global float *a, const __global float *b, int two, const StagedQ8 *x, int k, int NT,
       float16 *acc)
{
	float16 ra[TOK_GROUP], rb[TOK_GROUP];
	int nb = k / Q8_BLOCK;
	/* Blocks ahead to prefetch, as the CPU backend's: with more tokens a
	 * block takes longer, so memory needs asking further ahead, and for
	 * each of its lines (LONE_TOKEN_LINES says whether a lone token does). */
	int ahead = NT == 1 ? 2 : 16 / (1 + two);

#pragma unroll
	for (int t = 0; t < TOK_GROUP; t++) {
		ra[t] = 0;
		rb[t] = 0;
	}
	for (int blk = 0; blk < nb; blk++) {
		const __global char *qa = q8_block(a, k, blk * Q8_BLOCK);
		const __global char *qb = two ? q8_block(b, k, blk * Q8_BLOCK) : qa;
		const __global int *wqa = (const __global int *)qa, *wqb = (const __global int *)qb;
		const __local int *xq = (const __local int *)(x->q + blk * Q8_BLOCK);
		int16 ia[TOK_GROUP], ib[TOK_GROUP];

#pragma unroll
		for (int t = 0; t < TOK_GROUP; t++) {
			ia[t] = 0;
			ib[t] = 0;
		}
		PREFETCH(qa + ahead * QBLOCK_BYTES);
		if (two)
			PREFETCH(qb + ahead * QBLOCK_BYTES);
		if (blk % 2 == 0) { /* a line holds two blocks' scales */
			PREFETCH((const __global half *)a + (blk + ahead) * PANEL_ROWS);
			if (two)
				PREFETCH((const __global half *)b + (blk + ahead) * PANEL_ROWS);
		}
#if WTYPE == 14
		/* Q6_K: each sub-block of 16 (4 loads) ends in q6k_sub_block */
		if (NT == 1) {
#pragma unroll
			for (int kl = 0; kl < Q8_LOADS / 2; kl++)
				Q8_LOAD(kl)
			q6k_sub_block(a, b, two, x, k, NT, blk, 0, ia, ib, ra, rb);
#pragma unroll
			for (int kl = Q8_LOADS / 2; kl < Q8_LOADS; kl++)
				Q8_LOAD(kl)
		} else {
			for (int kl = 0; kl < Q8_LOADS / 2; kl++)
				Q8_LOAD(kl)
			q6k_sub_block(a, b, two, x, k, NT, blk, 0, ia, ib, ra, rb);
			for (int kl = Q8_LOADS / 2; kl < Q8_LOADS; kl++)
				Q8_LOAD(kl)
		}
		q6k_sub_block(a, b, two, x, k, NT, blk, 1, ia, ib, ra, rb);
		continue;
#endif
		/* A lone token's loads unrolled: single streams 3-7% faster on
		 * PoCL; at 4 and 8 tokens the longer code was 2-3% slower. */
		if (NT == 1) {
#pragma unroll
			for (int kl = 0; kl < Q8_LOADS; kl++)
				Q8_LOAD(kl)
		} else {
			for (int kl = 0; kl < Q8_LOADS; kl++)
				Q8_LOAD(kl)
		}
#if WTYPE == 12
		q4k_sub_block(a, b, two, x, k, NT, blk, ia, ib, ra, rb);
		continue;
#endif
		float16 sa = block_scales(a, blk), sb = two ? block_scales(b, blk) : 0;
#pragma unroll
		for (int t = 0; t < NT; t++) {
			float dx = x->d[t * nb + blk];
			int sx = weight_offset(x->s[t * nb + blk]);

			ra[t] = fma(convert_float16(ia[t] - sx), sa * dx, ra[t]);
			if (two)
				rb[t] = fma(convert_float16(ib[t] - sx), sb * dx, rb[t]);
		}
	}
#pragma unroll
	for (int t = 0; t < NT; t++) {
		acc[t] = ra[t];
		acc[TOK_GROUP + t] = rb[t];
	}
}

/* q8_dot for each shape a panel block takes: one panel or two, 1, 4 or 8
 * tokens. Two panels of 8 tokens would keep 32 sums (an integer and a float
 * one per panel and token) beside the weights, more than AVX-512's 32
 * registers, so that shape runs the two panels one after the other. */
#define Q8_SHAPE(NT_)                                                                                   \
	Q8_FN static void q8_dot1_##NT_(const __global float *a, const StagedQ8 *x, int k, float16 *acc)  \
	{                                                                                                 \
		q8_dot(a, a, 0, x, k, NT_, acc);                                                          \
	}                                                                                                 \
	Q8_FN static void q8_dot2_##NT_(const __global float *a, const __global float *b, const StagedQ8 *x, \
					int k, float16 *acc)                                              \
	{                                                                                                 \
		if (NT_ > 4) {                                                                            \
			float16 accb[2 * TOK_GROUP];                                                      \
			q8_dot(a, a, 0, x, k, NT_, acc);                                                  \
			q8_dot(b, b, 0, x, k, NT_, accb);                                                 \
			for (int t = 0; t < NT_; t++)                                                     \
				acc[TOK_GROUP + t] = accb[t];                                             \
		} else {                                                                                  \
			q8_dot(a, b, 1, x, k, NT_, acc);                                                  \
		}                                                                                         \
	}
Q8_SHAPE(1)
Q8_SHAPE(4)
Q8_SHAPE(8)
#endif

/* panels_dot with `two` known at each call, so both shapes unroll. */
static inline __attribute__((always_inline)) void
panels_dot_any(const __global float *a, const __global float *b, int two,
	       const __local float *x, int k, int NT, float16 *acc)
{
	if (two)
		panels_dot(a, b, 1, x, k, NT, acc);
	else
		panels_dot(a, a, 0, x, k, NT, acc);
}

/* The products of panel a (and b when two) with tokens t0.. of the staged
 * block xs: 8 when at least 8 remain, else 4, else 1 (shapes the compiler
 * unrolls). Returns how many. */
static inline __attribute__((always_inline)) int
panel_block(const __global float *a, const __global float *b, int two,
			      const __local float *xs, int k, int n, int t0, float16 *acc)
{
	int NT = n - t0 >= 8 ? 8 : n - t0 >= 4 ? 4 : 1;
#if QUANTIZED
	StagedQ8 x = staged_q8(xs, n, k, t0);

	switch (NT) {
	case 8: if (two) q8_dot2_8(a, b, &x, k, acc); else q8_dot1_8(a, &x, k, acc); break;
	case 4: if (two) q8_dot2_4(a, b, &x, k, acc); else q8_dot1_4(a, &x, k, acc); break;
	default: if (two) q8_dot2_1(a, b, &x, k, acc); else q8_dot1_1(a, &x, k, acc); break;
	}
#else
	const __local float *x = xs + t0 * k;

	switch (NT) {
	case 8: panels_dot_any(a, b, two, x, k, 8, acc); break;
	case 4: panels_dot_any(a, b, two, x, k, 4, acc); break;
	default: panels_dot_any(a, b, two, x, k, 1, acc); break;
	}
#endif
	return NT;
}

/* Lanes of a panel starting at row r0 that hold rows below `rows`. */
static inline int panel_lanes(int r0, int rows)
{
	return min(PANEL_ROWS, rows - r0);
}

/* p[r] = v's lane r, for the lanes of a panel that hold rows: one vector
 * store for a whole panel, lane by lane from a private copy for the last,
 * partial one. (Through the private copy every time, PoCL stored v in
 * pieces and read it back whole, a store-forwarding stall per token that
 * was a fifth of the fused kernel's own time on an 8-token step.) */
static inline void put_lanes(float16 v, int lanes, __global float *p)
{
	float res[PANEL_ROWS];

	if (lanes == PANEL_ROWS) {
		vstore16(v, 0, p);
		return;
	}
	vstore16(v, 0, res);
	for (int r = 0; r < lanes; r++)
		p[r] = res[r];
}

/* p[r] += v's lane r, as put_lanes. */
static inline void add_lanes(float16 v, int lanes, __global float *p)
{
	float res[PANEL_ROWS];

	if (lanes == PANEL_ROWS) {
		vstore16(vload16(0, p) + v, 0, p);
		return;
	}
	vstore16(v, 0, res);
	for (int r = 0; r < lanes; r++)
		p[r] += res[r];
}
