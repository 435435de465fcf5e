/* backend_cpu.c - the reference forward pass, llama2.c's run.c math.
 *
 * A call handles a batch of tokens from one or more sequences: every phase
 * runs over the whole batch before the next, so one forward fires one span
 * per layer, and each weight row is read once per call for every token.
 * Keys and values live in a paged cache (see kvcache.h); each token finds
 * its sequence's earlier positions through that sequence's block table.
 *
 * Threads: a forward is one OpenMP parallel region, not one per phase. It
 * is a list of phases (norm, q/k/v, rope, attention, ... classifier), each
 * cut into tiles that any thread takes from a shared counter; a thread
 * moves to the next phase when every tile of this one is done, spinning
 * briefly for the last ones. So a forward wakes the other threads once
 * (with OMP_WAIT_POLICY=passive a wake-up is a futex and an IPI, tens of
 * microseconds here), and a thread that loses its core holds back only the
 * tile it is in. The first thread fires every span, at the phase edges.
 *
 * Weights: the matrices are packed into panels of 16 rows at create
 * (matmul.h), so 8 tokens share each weight load and no product needs a
 * sum across vector lanes.
 *
 * Batch invariance: each output element of a matrix product is one
 * multiply-add chain over its row, whatever the batch (matmul.h);
 * attention sums over its own positions in order, its dot products in 16
 * vector lanes and then the lanes in a fixed tree. */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include "backend/backend.h"
#include "format/gguf.h"
#include "backend/cpu/matmul.h"
#include "base/pool.h"
#include "base/trace.h"

/* Tokens a forward takes: a prompt's batch reads each weight once, so 64
 * halves what 32 read per token from L3 (a stories110M F32 layer is 28 MB). */
#define CPU_MAX_BATCH 64
/* Below this many multiply-adds a forward runs on one thread: waking the
 * others costs more than it saves (stories260K decodes alone). */
#define PARALLEL_MIN_WORK (1L << 21)
/* Rows per tile of a layer's matrix: a tile's grab is an atomic on a line
 * both cores write, and its rows are one stretch of the packed weights.
 * Tiles of 128 rows (8 panels, matmul.h) made the stories110M-shape step
 * 1.15-1.3x faster than tiles of 32; a small matrix keeps TILES_PER_THREAD
 * tiles a thread, so the last tile leaves no thread idle for long. */
#define TILE_ROWS_MIN 32
#define TILE_ROWS_MAX 128
#define TILES_PER_THREAD 4
/* Classifier rows per tile and token wanting logits, up to 4 tokens: a
 * tile's grab pulls the counters' cache line from the other core, which
 * cost ~5% of an 8-sequence step at 64-row tiles; one token's tiles stay
 * small so that the last one does not leave a thread idle for long. */
#define LOGIT_TILE_ROWS 64
#define LOGIT_TILE_TOKENS 4
#define CACHE_LINE 64
/* Queries an attention tile takes, of one sequence: a 64-token batch of
 * one prompt is 4 groups a head, so 2 threads share 48 tiles of 12 heads,
 * and an f16 cache's rows are converted 4 times, not 64. */
#define ATT_QUERY_GROUP 16
/* Positions an attention tile converts into floats at most: 2 * 4096 * 256
 * floats a thread at the widest head; groups reaching past it read the
 * f16 rows query by query. */
#define ATT_SCRATCH_MAX 4096

/* The phases of a forward, in order; a layer runs PH_ATTN_NORM..PH_FFN_DOWN. */
enum phase_kind {
	PH_ATTN_NORM,  /* tile: a token */
	PH_QKV,        /* tile: tile_rows() rows of wq, wk or wv */
	PH_ROPE,       /* tile: a token, or some of its heads (rotate q and k, store k and v) */
	PH_ATTENTION,  /* tile: a (query group, head) pair */
	PH_ATTN_OUT,   /* tile: tile_rows() rows of wo, with the residual add */
	PH_FFN_NORM,   /* tile: a token */
	PH_FFN_UP,     /* tile: tile_rows() rows of w1 and of w3, with SwiGLU */
	PH_FFN_DOWN,   /* tile: tile_rows() rows of w2, with the residual add */
	PH_FINAL_NORM, /* tile: a token that wants logits */
	PH_LOGITS,     /* tile: logit_tile_rows() rows of the classifier */
	PH_LAYER_COUNT = PH_FFN_DOWN + 1
};

/* A phase's tile counters, one cache line each: every thread hits them. */
typedef struct {
	int next;  /* tiles handed out */
	int done;  /* tiles finished */
	char pad[CACHE_LINE - 2 * sizeof(int)];
} PhaseCounters;

typedef struct {
	enum phase_kind kind;
	int layer;
	int tiles;   /* in this forward */
} Phase;

typedef struct {
	const Model *model;
	Config c;
	int head_size, kv_dim, kv_mul;
	int max_out;        /* sequences wanting logits per call */
	int threads;        /* OpenMP threads a parallel forward runs on */
	QuantRows *quant;   /* (threads) each thread's copy of a product's input,
			     * quantized; NULL unless a matrix is quantized */
	void *quant_mem;    /* the QuantRows, then each thread's rows */
	size_t quant_bytes;
	int n_blocks, block_size;
	/* activations, (CPU_MAX_BATCH, width) each, carved from one block */
	float *x, *xb, *xb2, *q, *k, *v, *hb, *hb2;
	float *xo;          /* (max_out, dim) final-normed rows for the classifier */
	float *att;         /* (CPU_MAX_BATCH, n_heads, seq_len) scores per token and head */
	float *rope_cs;     /* (seq_len, head_size / 2, 2) cos and sin per position and pair */
	float *block;       /* the activations, from CACHE_LINE on */
	void *block_mem;    /* the allocation behind block */
	size_t block_bytes;
	/* the forward's phases and their counters */
	Phase *phases;      /* (n_phases) */
	PhaseCounters *ctr; /* (n_phases) */
	int n_phases;
	int n, n_out;       /* tokens and logits rows of the current call */
	float *logits;      /* (n_out, vocab_size) the caller's, during a call */
	/* per token of the current call */
	int *tpos;          /* (CPU_MAX_BATCH) its position */
	const int **tblocks; /* (CPU_MAX_BATCH) its sequence's block table */
	int *qgroup;        /* (CPU_MAX_BATCH + 1) attention's query groups: group g
			     * is tokens qgroup[g]..qgroup[g + 1]-1 */
	int n_qgroups;
	int *out_tok;       /* (max_out) tokens whose logits are wanted */
	void *meta;         /* the per-token arrays and the phases */
	size_t meta_bytes;
	/* the matrices packed for matmul_rows_typed (matmul.h), each in its
	 * stored type: layer l's kind k at [l * MAT_PER_LAYER + k], the
	 * classifier last */
	PackedMatrix *mats;
	void *packed_mem;   /* all of them, from CACHE_LINE on */
	size_t packed_bytes;
	/* (n_layers, n_blocks, n_kv_heads, block_size, head_size) elements:
	 * floats, or _Float16 when kv_half (--kv-type f16) */
	void *key_cache;
	void *value_cache;
	void *kv_block;
	size_t kv_bytes;
	int kv_half;
	void (*halves_to_floats)(const _Float16 *h, int n, float *out);
	/* (threads, scratch_floats) a query group's value chains
	 * (ATT_QUERY_GROUP, 2, head_size), then with an f16 cache its key and
	 * value rows as floats (2, scratch_rows, head_size) */
	float *att_scratch;
	size_t scratch_bytes, scratch_floats;
	int scratch_rows;
} CpuState;

/* A layer's matrices, in LayerWeights' order less the norms. */
enum { MAT_WQ, MAT_WK, MAT_WV, MAT_WO, MAT_W1, MAT_W2, MAT_W3, MAT_PER_LAYER };

static void rmsnorm(float *o, const float *x, const float *weight, int size, float eps)
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

/* 16 and 8 floats; loaded through memcpy, so no alignment is assumed. */
typedef float v16f __attribute__((vector_size(64)));

#define LOAD16(v, p) memcpy(&(v), (p), sizeof(v))

/* The end of every dot product: its 16 lanes in a fixed tree, then the
 * tail (widths not a multiple of 16) in order. */
static inline __attribute__((always_inline)) float
dot_finish(const v16f *acc, const float *w, const float *x, int j, int n)
{
	float t[8], s;

	for (int i = 0; i < 8; i++)
		t[i] = (*acc)[i] + (*acc)[i + 8];
	for (int i = 0; i < 4; i++)
		t[i] += t[i + 4];
	s = (t[0] + t[2]) + (t[1] + t[3]);
	for (; j < n; j++)
		s += w[j] * x[j];
	return s;
}

/* A dot product: lane j mod 16 accumulates w[j] * x[j] in order of j, then
 * dot_finish. Attention's scores; the matrices go through matmul.h. */
static inline __attribute__((always_inline)) float dot(const float *w, const float *x, int n)
{
	v16f acc = { 0 };
	int j = 0;

	for (; j + 16 <= n; j += 16) {
		v16f wv, xv;

		LOAD16(wv, w + j);
		LOAD16(xv, x + j);
		acc += wv * xv;
	}
	return dot_finish(&acc, w, x, j, n);
}

/* One projection of a fused matmul: out(batch, d) = x @ w(d, n)^T, w packed
 * (matmul.h). */
typedef struct {
	float *out;
	PackedMatrix w;
	int d;
} Proj;

/* Rows r0..r1-1 of one projection against every token of the batch: the
 * unit of work a thread takes. */
static void matmul_tile(const Proj *p, int r0, int r1, const MatInput *in, int n, int batch)
{
	matmul_rows_typed(p->w.data, p->w.type, n, r0, r1, in, batch, p->out, (size_t)p->d);
}

/* Tiles of rows tile_rows high over several projections of the same
 * input (q/k/v): projection k holds tiles of its own rows only. */
static int proj_tiles(const Proj *p, int nproj, int tile_rows)
{
	int tiles = 0;

	for (int k = 0; k < nproj; k++)
		tiles += (p[k].d + tile_rows - 1) / tile_rows;
	return tiles;
}

/* Runs tile t of proj_tiles' numbering. */
static void proj_tile(const Proj *p, int nproj, int t, int tile_rows, const MatInput *in, int n,
		      int batch)
{
	int k = 0, r0 = t * tile_rows;

	while (k + 1 < nproj && r0 >= p[k].d) { /* tile t lies in projection k, from row r0 */
		r0 -= (p[k].d + tile_rows - 1) / tile_rows * tile_rows;
		k++;
	}
	matmul_tile(&p[k], r0, r0 + tile_rows < p[k].d ? r0 + tile_rows : p[k].d, in, n, batch);
}

/* RoPE on one head of q, and of k unless NULL, with the precomputed table
 * (cs: the position's row): the same rotation as run.c, whose angles come
 * from the same libm calls. */
static void rope_head(float *q, float *k, int head_size, const float *cs)
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

/* The table rope reads: (cos, sin) of pos * theta^(-2i / head_size) per
 * position and pair (theta: the model's base, llama2.c's 10000), computed
 * as run.c computes each angle. */
static void fill_rope_table(CpuState *s)
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

/* Where the first of kv head h's rows of a block of the pool in layer l
 * is, in elements of the cache. A block holds each head's block_size rows
 * contiguous (head-major), so attention streams a sequence's positions
 * instead of striding by kv_dim. */
static size_t head_rows(const CpuState *s, int l, int block, int h)
{
	return (((size_t)l * s->n_blocks + block) * s->c.n_kv_heads + h) * s->block_size *
	       s->head_size;
}

/* Where attention finds one kv head's rows in a layer: position t's row
 * starts at element blocks[t / bs] * block_stride + (t % bs) * head_size
 * of keys and of values. Either the cache's own rows, or their floats
 * converted once into a thread's scratch as one block (convert_rows). */
typedef struct {
	const void *keys, *values;
	const int *blocks;
	size_t block_stride; /* elements from a block's rows to the next block's */
	int bs;              /* positions a block */
} KvView;

/* A view's block table where its rows are one block (seq_len positions). */
static const int zero_block[1] = { 0 };

/* The cache's rows of kv head h in layer l, for token b's sequence. */
static KvView cache_view(const CpuState *s, int l, int b, int h)
{
	size_t first = head_rows(s, l, 0, h);

	return (KvView){ s->kv_half ? (const void *)((const _Float16 *)s->key_cache + first)
				    : (const void *)((const float *)s->key_cache + first),
			 s->kv_half ? (const void *)((const _Float16 *)s->value_cache + first)
				    : (const void *)((const float *)s->value_cache + first),
			 s->tblocks[b], head_rows(s, l, 1, h) - first, s->block_size };
}

/* Element offset of position t's row in a view. */
static inline __attribute__((always_inline)) size_t view_row(const KvView *v, int t, int hs)
{
	return (size_t)v->blocks[t / v->bs] * v->block_stride + (size_t)(t % v->bs) * hs;
}

/* The cache's element, as the OpenCL kernels' kv_t: a float, or with
 * --kv-type f16 an IEEE half stored round-to-nearest-even (their
 * vstore_half_rte), which halves the bytes attention reads. Attention
 * takes an f16 row as floats converted into a buffer of its own (8 a
 * vcvtph2ps from x86-64-v3 on), then runs the f32 loops: on 16-lane
 * vectors of halves GCC kept the conversions on the stack. The callers
 * take half as a constant, so each type's loop is built apart. */
#define KV_ROW_MAX 256 /* the widest f16 row attention converts (cpu_create checks) */

/* n halves as floats, one by one. */
static void halves_soft(const _Float16 *h, int n, float *out)
{
	for (int j = 0; j < n; j++)
		out[j] = (float)h[j];
}

/* The same with F16C's vcvtph2ps, 8 at a time, where the CPU has it (GCC
 * 12 built __builtin_convertvector and the loop above a value at a time). */
__attribute__((target("avx,f16c"))) static void halves_f16c(const _Float16 *h, int n, float *out)
{
	int j = 0;

	for (; j + 8 <= n; j += 8)
		_mm256_storeu_ps(out + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + j))));
	halves_soft(h + j, n - j, out + j);
}

static inline __attribute__((always_inline)) const float *
kv_row(const CpuState *s, const void *cache, size_t i, int n, int half, float *buf)
{
	if (!half)
		return (const float *)cache + i;
	s->halves_to_floats((const _Float16 *)cache + i, n, buf);
	return buf;
}

/* Element i of the cache as a float. */
static inline __attribute__((always_inline)) float kv_value(const void *cache, size_t i, int half)
{
	return half ? (float)((const _Float16 *)cache)[i] : ((const float *)cache)[i];
}

static inline __attribute__((always_inline)) const char *kv_at(const void *cache, size_t i, int half)
{
	return (const char *)cache + i * (half ? sizeof(_Float16) : sizeof(float));
}

/* Positions ahead whose key and value rows score_keys prefetches. Serving
 * 8 streams of the stories110M shape as Q8_0: 1,326-1,411 tok/s against
 * 1,253-1,355 without (3 interleaved rounds, faster in each). */
#define ATT_AHEAD 4

/* Asks for position t's key and value rows of head h in layer l: a head's
 * rows are a few KB in blocks of their own, from memory that the weights'
 * stream flushed, too short a stream for the hardware prefetcher. */
static inline __attribute__((always_inline)) void
prefetch_rows(const CpuState *s, const KvView *v, int t, int half)
{
	size_t off = view_row(v, t, s->head_size);

	for (int c = 0; c < s->head_size; c += half ? 32 : 16) { /* a line each */
		__builtin_prefetch(kv_at(v->keys, off + c, half));
		__builtin_prefetch(kv_at(v->values, off + c, half));
	}
}

/* Positions scored at once by score16 (prefill's long rows of keys). */
#define SCORE_GROUP 16

/* Two vectors' lanes picked as __builtin_shuffle numbers them (0..15 a,
 * 16..31 b). */
typedef int32_t v16idx __attribute__((vector_size(64)));
#define PICK(a, b, ...) __builtin_shuffle((a), (b), (v16idx){ __VA_ARGS__ })

/* The scores of 16 positions, att[p] = q . key[p] / scale, each exactly as
 * dot() and dot_finish() make one (hs a multiple of 16): position p's
 * 16-lane chain, then the same tree of adds, done for 16 positions at once
 * by moving lanes, not by changing a sum. A position's score is the same
 * whether it is scored alone or in a group, so prefill stays equal to
 * token-by-token decode. */
static inline __attribute__((always_inline)) void
score16(const float *q, const float *const key[SCORE_GROUP], int hs, float scale, float *att)
{
	v16f acc[SCORE_GROUP], u[8], w[4], z[2];

	/* a position at a time, each chain in one register: with the 16 chains
	 * advanced together, their 16 row pointers did not fit the registers,
	 * and GCC zeroed the chains in memory with a rep stos (a third of an
	 * F16 prompt's attention) */
#pragma GCC unroll 16
	for (int p = 0; p < SCORE_GROUP; p++) {
		const float *k = key[p];
		v16f a = { 0 };

		for (int j = 0; j < hs; j += 16) {
			v16f qv, kv;

			LOAD16(qv, q + j);
			LOAD16(kv, k + j);
			a += qv * kv;
		}
		acc[p] = a;
	}
	/* t[i] = acc[i] + acc[i + 8]: two positions a vector */
	for (int p = 0; p < 8; p++)
		u[p] = PICK(acc[2 * p], acc[2 * p + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
		       PICK(acc[2 * p], acc[2 * p + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
	/* t[i] += t[i + 4]: four positions a vector */
	for (int p = 0; p < 4; p++)
		w[p] = PICK(u[2 * p], u[2 * p + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
		       PICK(u[2 * p], u[2 * p + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
	/* t[0] + t[2] and t[1] + t[3] of eight positions */
	for (int p = 0; p < 2; p++)
		z[p] = PICK(w[2 * p], w[2 * p + 1], 0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29) +
		       PICK(w[2 * p], w[2 * p + 1], 2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
	v16f sum = PICK(z[0], z[1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
		   PICK(z[0], z[1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);

	sum /= scale;
	memcpy(att, &sum, sizeof(sum));
}

/* Scores of positions t..t+15 (score16), their key rows found through the
 * view; f16 rows converted into rows. */
static inline __attribute__((always_inline)) void
score_group(const CpuState *s, const KvView *v, const float *q, int t, float *att, int half,
	    float *rows)
{
	int hs = s->head_size;
	const float *key[SCORE_GROUP];

	if (t / v->bs == (t + SCORE_GROUP - 1) / v->bs) {
		/* the 16 rows lie in one block, one after another: one conversion */
		const float *all = kv_row(s, v->keys, view_row(v, t, hs), SCORE_GROUP * hs, half, rows);

		for (int p = 0; p < SCORE_GROUP; p++)
			key[p] = all + (size_t)p * hs;
	} else {
		for (int p = 0; p < SCORE_GROUP; p++)
			key[p] = kv_row(s, v->keys, view_row(v, t + p, hs), hs, half, rows + (size_t)p * hs);
	}
	score16(q, key, hs, sqrtf(hs), att + t);
}

/* att[t] = q . key(t) / sqrt(head_size) for positions 0..n-1: whole
 * groups of SCORE_GROUP first where head_size is whole vectors, then
 * block by block, asking for the rows ATT_AHEAD positions on. */
static inline __attribute__((always_inline)) void
score_keys(const CpuState *s, const KvView *v, const float *q, int n, float *att, int half)
{
	int hs = s->head_size, bs = v->bs, first = 0;
	float scale = sqrtf(hs), row[KV_ROW_MAX];

	if (hs % 16 == 0 && hs <= KV_ROW_MAX && n >= SCORE_GROUP) {
		float rows[half ? SCORE_GROUP * KV_ROW_MAX : 1];

		for (; first + SCORE_GROUP <= n; first += SCORE_GROUP)
			score_group(s, v, q, first, att, half, rows);
	}
	for (int t = first; t < first + ATT_AHEAD && t < n; t++)
		prefetch_rows(s, v, t, half);
	for (int t0 = first / bs * bs; t0 < n; t0 += bs) {
		size_t k = view_row(v, t0, hs);

		for (int i = t0 < first ? first - t0 : 0; i < bs && t0 + i < n; i++) {
			if (t0 + i + ATT_AHEAD < n)
				prefetch_rows(s, v, t0 + i + ATT_AHEAD, half);
			att[t0 + i] = dot(q, kv_row(s, v->keys, k + (size_t)i * hs, hs, half, row),
					  hs) / scale;
		}
	}
}

#define VALUE_CHUNK 16 /* value rows weigh_chunks converts at once (even) */

/* cm rows (hs apart) weighed by a[0..cm) into NC 16-lane chunks of two
 * chains: even rows into even, odd rows into odd, in order. */
static inline __attribute__((always_inline)) void
weigh_rows(const float *rows, const float *a, int cm, int hs, int NC, v16f *even, v16f *odd)
{
	int j = 0;

	for (; j + 2 <= cm; j += 2) {
		const float *r0 = rows + (size_t)j * hs, *r1 = r0 + hs;
#pragma GCC unroll 4
		for (int c = 0; c < NC; c++) {
			v16f v0, v1;

			LOAD16(v0, r0 + 16 * c);
			LOAD16(v1, r1 + 16 * c);
			even[c] += v0 * a[j];
			odd[c] += v1 * a[j + 1];
		}
	}
	if (j < cm) { /* an odd count: the last position of the block */
		const float *r0 = rows + (size_t)j * hs;
#pragma GCC unroll 4
		for (int c = 0; c < NC; c++) {
			v16f v0;

			LOAD16(v0, r0 + 16 * c);
			even[c] += v0 * a[j];
		}
	}
}

/* NC 16-lane chunks of out from lane i: out[i..] = sum over positions t of
 * att[t] * value(t)[i..]. Each lane keeps two chains, even and odd t, then
 * adds them: a fixed order whatever the batch, with 2 * NC chains in flight
 * instead of one latency-bound chain per lane. */
static inline __attribute__((always_inline)) void
weigh_chunks(const CpuState *s, const KvView *v, const float *att, int n, int i, int NC,
	     float *out, int half)
{
	int hs = s->head_size, bs = v->bs;
	v16f even[4] = { 0 }, odd[4] = { 0 };
	float buf[half ? VALUE_CHUNK * KV_ROW_MAX : 1];

	for (int t0 = 0; t0 < n; t0 += bs) {
		size_t row0 = view_row(v, t0, hs);
		int m = n - t0 < bs ? n - t0 : bs;

		/* an f16 cache's rows a chunk at a time (one conversion; an even
		 * count, so a position keeps its chain) */
		for (int c0 = 0; c0 < m; c0 += VALUE_CHUNK) {
			int cm = m - c0 < VALUE_CHUNK ? m - c0 : VALUE_CHUNK;
			const float *rows = kv_row(s, v->values, row0 + (size_t)c0 * hs, cm * hs, half, buf) + i;

			weigh_rows(rows, att + t0 + c0, cm, hs, NC, even, odd);
		}
	}
#pragma GCC unroll 4
	for (int c = 0; c < NC; c++) {
		v16f sum = even[c] + odd[c];

		memcpy(out + i + 16 * c, &sum, sizeof(sum));
	}
}

/* out = the att-weighted sum of the value rows of positions 0..n-1. */
static inline __attribute__((always_inline)) void
weigh_values(const CpuState *s, const KvView *v, const float *att, int n, float *out, int half)
{
	int hs = s->head_size, bs = v->bs, i = 0;

	for (; i + 64 <= hs; i += 64)
		weigh_chunks(s, v, att, n, i, 4, out, half);
	switch ((hs - i) / 16) {
	case 3: weigh_chunks(s, v, att, n, i, 3, out, half); i += 48; break;
	case 2: weigh_chunks(s, v, att, n, i, 2, out, half); i += 32; break;
	case 1: weigh_chunks(s, v, att, n, i, 1, out, half); i += 16; break;
	default: break;
	}
	for (; i < hs; i++) { /* lanes past the last 16: the same two chains */
		float even = 0.0f, odd = 0.0f;

		for (int t0 = 0; t0 < n; t0 += bs) {
			size_t e = view_row(v, t0, hs) + i;
			int m = n - t0 < bs ? n - t0 : bs;

			for (int j = 0; j < m; j++, e += hs) {
				if (j % 2)
					odd += kv_value(v->values, e, half) * att[t0 + j];
				else
					even += kv_value(v->values, e, half) * att[t0 + j];
			}
		}
		out[i] = even + odd;
	}
}

/* glibc's vector expf (libmvec, through libm): declared as simd here, as
 * math.h does only under -ffast-math. One exp per hidden value and token
 * was ~6% of an 8-sequence step as scalar calls. */
#pragma omp declare simd notinbranch
float expf(float x);

/* softmax over one head's scores, the exps and their sum vectorised (the
 * sampler keeps softmax() for its logits). The sum's order depends on n
 * alone, never on the batch. */
static inline __attribute__((always_inline)) void attn_softmax(float *x, int n)
{
	float max_val = x[0], sum = 0.0f;

#pragma omp simd reduction(max : max_val) /* a max is the same in any order */
	for (int i = 1; i < n; i++)
		max_val = x[i] > max_val ? x[i] : max_val;
#pragma omp simd reduction(+ : sum)
	for (int i = 0; i < n; i++) {
		x[i] = expf(x[i] - max_val);
		sum += x[i];
	}
#pragma omp simd
	for (int i = 0; i < n; i++)
		x[i] /= sum;
}

/* Token b's query of head h, and its scores of head h. */
static float *query_of(const CpuState *s, int b, int h)
{
	return s->q + (size_t)b * s->c.dim + (size_t)h * s->head_size;
}

static float *scores_of(const CpuState *s, int b, int h)
{
	return s->att + ((size_t)b * s->c.n_heads + h) * s->c.seq_len;
}

/* Token b's head h: scores against its sequence's positions 0..pos in the
 * view (f16 rows where half), softmax, then the weighted sum of values.
 * Cloned per x86-64 level, as the products are built per level
 * (matmul_kernel.c). */
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
static void attend_head(const CpuState *s, const KvView *v, int half, int b, int h,
			const float *q, float *out)
{
	int hs = s->head_size, pos = s->tpos[b];
	float *att = scores_of(s, b, h);

	/* GCC drops -fno-omit-frame-pointer in target clones; asking for the
	 * frame address keeps the frame, so `spantrace profile` unwinds here. */
	__asm__ volatile("" : : "r"(__builtin_frame_address(0)));
	q += (size_t)b * s->c.dim + h * hs;
	out += (size_t)b * s->c.dim + h * hs;
	if (half) { /* each type's loops built apart */
		score_keys(s, v, q, pos + 1, att, 1);
		attn_softmax(att, pos + 1);
		weigh_values(s, v, att, pos + 1, out, 1);
	} else {
		score_keys(s, v, q, pos + 1, att, 0);
		attn_softmax(att, pos + 1);
		weigh_values(s, v, att, pos + 1, out, 0);
	}
}

/* ---- a group's queries at once ----
 * A query streams its sequence's key and value rows from L2 (512 bytes a
 * position at head size 64, more than the arithmetic on them takes), so a
 * group of one sequence's queries reads each stretch of rows once for all
 * of them. Each score and each sum is made exactly as attend_head makes it
 * for one query: the same chains in the same order. The rows are floats:
 * an f16 cache's are converted first (convert_rows). */

/* Scores of queries b0..b1-1 (of one sequence) of head h: each 16 key rows
 * scored against every query reaching past them (score16), then each
 * query's last positions one by one, as score_keys does. */
static inline __attribute__((always_inline)) void
score_queries(const CpuState *s, const KvView *v, int b0, int b1, int h)
{
	int hs = s->head_size, n_max = s->tpos[b1 - 1] + 1;
	float scale = sqrtf(hs);

	for (int t = 0; t + SCORE_GROUP <= n_max; t += SCORE_GROUP) {
		const float *key[SCORE_GROUP];

		for (int p = 0; p < SCORE_GROUP; p++)
			key[p] = (const float *)v->keys + view_row(v, t + p, hs);
		for (int b = b0; b < b1; b++)
			if (s->tpos[b] + 1 >= t + SCORE_GROUP)
				score16(query_of(s, b, h), key, hs, scale, scores_of(s, b, h) + t);
	}
	for (int b = b0; b < b1; b++) {
		int n = s->tpos[b] + 1;
		float *att = scores_of(s, b, h);

		for (int t = n / SCORE_GROUP * SCORE_GROUP; t < n; t++)
			att[t] = dot(query_of(s, b, h), (const float *)v->keys + view_row(v, t, hs), hs) / scale;
	}
}

/* weigh_rows on NC lane chunks whose chains wait in memory between calls. */
static inline __attribute__((always_inline)) void
weigh_rows_kept(const float *rows, const float *a, int cm, int hs, int NC, float *even_at,
		float *odd_at)
{
	v16f even[4], odd[4];

#pragma GCC unroll 4
	for (int c = 0; c < NC; c++) {
		LOAD16(even[c], even_at + 16 * c);
		LOAD16(odd[c], odd_at + 16 * c);
	}
	weigh_rows(rows, a, cm, hs, NC, even, odd);
#pragma GCC unroll 4
	for (int c = 0; c < NC; c++) {
		memcpy(even_at + 16 * c, &even[c], sizeof(v16f));
		memcpy(odd_at + 16 * c, &odd[c], sizeof(v16f));
	}
}

/* Chunk rows (cm of them at most) weighed into query b's chains e and o,
 * as many rows as b reaches: left. */
static inline __attribute__((always_inline)) void
weigh_chunk_into(const float *rows, const float *a, int cm, int left, int hs, float *e, float *o)
{
	if (left < cm)
		cm = left;
	if (cm <= 0)
		return;
	for (int i = 0; i < hs; i += 64) {
		switch (hs - i >= 64 ? 4 : (hs - i) / 16) {
		case 4: weigh_rows_kept(rows + i, a, cm, hs, 4, e + i, o + i); break;
		case 3: weigh_rows_kept(rows + i, a, cm, hs, 3, e + i, o + i); break;
		case 2: weigh_rows_kept(rows + i, a, cm, hs, 2, e + i, o + i); break;
		default: weigh_rows_kept(rows + i, a, cm, hs, 1, e + i, o + i); break;
		}
	}
}

/* The weighted sums of queries b0..b1-1 of head h: each chunk of value rows
 * weighed into every query reaching it, in weigh_values' chunks, each
 * query's even and odd chains kept in chains (b1 - b0, 2, hs). */
static inline __attribute__((always_inline)) void
weigh_queries(const CpuState *s, const KvView *v, int b0, int b1, int h, float *chains)
{
	int hs = s->head_size, bs = v->bs, n_max = s->tpos[b1 - 1] + 1;

	memset(chains, 0, (size_t)(b1 - b0) * 2 * hs * sizeof(float));
	for (int t0 = 0; t0 < n_max; t0 += bs) {
		const float *block = (const float *)v->values + view_row(v, t0, hs);
		int m = n_max - t0 < bs ? n_max - t0 : bs;

		for (int c0 = 0; c0 < m; c0 += VALUE_CHUNK) {
			int cm = m - c0 < VALUE_CHUNK ? m - c0 : VALUE_CHUNK;

			for (int b = b0; b < b1; b++) {
				float *e = chains + (size_t)(b - b0) * 2 * hs;

				weigh_chunk_into(block + (size_t)c0 * hs, scores_of(s, b, h) + t0 + c0, cm,
						 s->tpos[b] + 1 - t0 - c0, hs, e, e + hs);
			}
		}
	}
	for (int b = b0; b < b1; b++) {
		const float *e = chains + (size_t)(b - b0) * 2 * hs;
		float *out = s->xb + (size_t)b * s->c.dim + (size_t)h * hs;

		for (int i = 0; i < hs; i++)
			out[i] = e[i] + e[hs + i];
	}
}

/* Head h of queries b0..b1-1 of one sequence, against an f32 view (head
 * size a multiple of 16, even blocks or one). Cloned as attend_head. */
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
static void attend_queries(const CpuState *s, const KvView *v, int b0, int b1, int h, float *chains)
{
	__asm__ volatile("" : : "r"(__builtin_frame_address(0))); /* as in attend_head */
	score_queries(s, v, b0, b1, h);
	for (int b = b0; b < b1; b++)
		attn_softmax(scores_of(s, b, h), s->tpos[b] + 1);
	weigh_queries(s, v, b0, b1, h, chains);
}

/* Thread thread's scratch: a group's chains, then (f16 cache) its rows. */
static float *thread_scratch(const CpuState *s, int thread)
{
	return s->att_scratch + (size_t)thread * s->scratch_floats;
}

/* Positions 0..n-1 of an f16 view as floats in the thread's scratch, one
 * block's rows a conversion: exact, so scores and sums are those of the
 * cache's own rows. */
static KvView convert_rows(const CpuState *s, const KvView *v, int n, int thread)
{
	int hs = s->head_size;
	float *keys = thread_scratch(s, thread) + (size_t)ATT_QUERY_GROUP * 2 * hs;
	float *values = keys + (size_t)s->scratch_rows * hs;

	for (int t0 = 0; t0 < n; t0 += v->bs) {
		size_t from = view_row(v, t0, hs);
		int m = n - t0 < v->bs ? n - t0 : v->bs;

		s->halves_to_floats((const _Float16 *)v->keys + from, m * hs, keys + (size_t)t0 * hs);
		s->halves_to_floats((const _Float16 *)v->values + from, m * hs, values + (size_t)t0 * hs);
	}
	return (KvView){ keys, values, zero_block, 0, s->c.seq_len };
}

/* Attention tile t: query group t / n_heads (a run of one sequence's tokens,
 * gather_batch), head t % n_heads. Each query of a prompt would convert an
 * f16 cache's rows again, so a group of several converts them once: 36% of
 * a Q4_K stories110M pp512 was attention, half of it conversions. */
static void attention_tile(const CpuState *s, int l, int t, int thread)
{
	int g = t / s->c.n_heads, h = t % s->c.n_heads;
	int b0 = s->qgroup[g], b1 = s->qgroup[g + 1], last = s->tpos[b1 - 1];
	KvView v = cache_view(s, l, b0, h / s->kv_mul);
	/* a position's value chain is its parity within its block: the same
	 * in a one-block copy only when blocks are even */
	int grouped = b1 - b0 > 1 && s->head_size % 16 == 0 && (v.bs % 2 == 0 || last < v.bs);

	if (grouped && s->kv_half && last >= s->scratch_rows)
		grouped = 0;
	if (!grouped) {
		for (int b = b0; b < b1; b++)
			attend_head(s, &v, s->kv_half, b, h, s->q, s->xb);
		return;
	}
	if (s->kv_half)
		v = convert_rows(s, &v, last + 1, thread);
	attend_queries(s, &v, b0, b1, h, thread_scratch(s, thread));
}

/* ---- the tiles of each phase ---- */

static const Weights *weights(const CpuState *s)
{
	return &s->model->weights;
}

/* Layer l's packed matrix of kind k (MAT_*). */
static PackedMatrix layer_matrix(const CpuState *s, int k, int l)
{
	return s->mats[(size_t)l * MAT_PER_LAYER + k];
}

/* q/k/v of layer l as three projections of the normed tokens. */
static void qkv_projs(const CpuState *s, int l, Proj p[3])
{
	int dim = s->c.dim, kv = s->kv_dim;

	p[0] = (Proj){ s->q, layer_matrix(s, MAT_WQ, l), dim };
	p[1] = (Proj){ s->k, layer_matrix(s, MAT_WK, l), kv };
	p[2] = (Proj){ s->v, layer_matrix(s, MAT_WV, l), kv };
}

/* Heads per rope tile. q/k/v come from both threads' product tiles, and
 * pulling a line from the other core costs ~250 ns here (as does each
 * grab of a tile): with fewer tokens than threads, one thread pulling a
 * whole token's was most of the phase while the other waited, so the
 * token's heads are split among the threads; with more, a tile is a token. */
static int rope_tile_heads(const CpuState *s)
{
	int groups = s->n >= s->threads ? 1 : 2 * s->threads;

	return (s->c.n_heads + groups - 1) / groups;
}

/* n floats into the cache at element i, as its type. Cloned per x86-64
 * level: from v3 on, a float becomes a half in one instruction (F16C),
 * not a libgcc call. */
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
static void kv_store(void *cache, size_t i, const float *x, int n, int half)
{
	if (!half) {
		memcpy((float *)cache + i, x, n * sizeof(float));
		return;
	}
	for (int j = 0; j < n; j++)
		((_Float16 *)cache)[i + j] = (_Float16)x[j]; /* round to nearest even */
}

/* RoPE on heads h0..h1-1 of token b's q, and of its k where they are kv
 * heads, then their k/v into their pool rows. */
static void rope_and_store(const CpuState *s, int l, int b, int h0, int h1)
{
	int hs = s->head_size, p = s->tpos[b], block = s->tblocks[b][p / s->block_size];
	size_t off = (size_t)(p % s->block_size) * hs;

	for (int h = h0; h < h1; h++) {
		float *k = h < s->c.n_kv_heads ? s->k + (size_t)b * s->kv_dim + h * hs : NULL;

		rope_head(s->q + (size_t)b * s->c.dim + h * hs, k, hs, s->rope_cs + (size_t)p * hs);
		if (!k)
			continue;
		kv_store(s->key_cache, head_rows(s, l, block, h) + off, k, hs, s->kv_half);
		kv_store(s->value_cache, head_rows(s, l, block, h) + off,
			 s->v + (size_t)b * s->kv_dim + h * hs, hs, s->kv_half);
	}
}

/* Rope tile t: its token, and its heads. */
static void rope_tile(const CpuState *s, int l, int t)
{
	int per = rope_tile_heads(s), groups = (s->c.n_heads + per - 1) / per;
	int h0 = t % groups * per, h1 = h0 + per < s->c.n_heads ? h0 + per : s->c.n_heads;

	rope_and_store(s, l, t / groups, h0, h1);
}

/* x[b][r0..r1) += d[b][r0..r1) for every token: a tile's residual add. */
static void residual_rows(float *x, const float *d, int width, int r0, int r1, int n)
{
	for (int b = 0; b < n; b++)
		for (int r = r0; r < r1; r++)
			x[(size_t)b * width + r] += d[(size_t)b * width + r];
}

/* Rows per tile of a matrix phase whose matrices have `rows` rows in all. */
static int tile_rows(const CpuState *s, int rows)
{
	int per = rows / (s->threads * TILES_PER_THREAD) / PANEL_ROWS * PANEL_ROWS;

	return per < TILE_ROWS_MIN ? TILE_ROWS_MIN : per > TILE_ROWS_MAX ? TILE_ROWS_MAX : per;
}

/* out += w @ in on the tile's rows of a (dim, k) matrix: wo and w2. */
static void matmul_add_tile(const CpuState *s, PackedMatrix w, int k, const MatInput *in,
			    float *tmp, int t)
{
	int dim = s->c.dim, rows = tile_rows(s, dim), r0 = t * rows;
	int r1 = r0 + rows < dim ? r0 + rows : dim;
	Proj p = { tmp, w, dim };

	matmul_tile(&p, r0, r1, in, k, s->n);
	residual_rows(s->x, tmp, dim, r0, r1, s->n);
}

/* h = silu(h) * h3 over n values. Which lanes go through the vector expf
 * depends only on the tile's rows, never on the batch. Cloned per x86-64
 * level, as the products are built per level (matmul_kernel.c), so each
 * clone calls its own width of libmvec. */
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
static void swiglu(float *h, const float *h3, int n)
{
#pragma omp simd
	for (int i = 0; i < n; i++) {
		float val = h[i];

		val *= (1.0f / (1.0f + expf(-val)));
		h[i] = val * h3[i];
	}
}

/* Hidden rows of w1 and w3, then SwiGLU on them: hb = silu(w1 x) * (w3 x). */
static void ffn_up_tile(const CpuState *s, int l, int t, const MatInput *in)
{
	int dim = s->c.dim, hid = s->c.hidden_dim, rows = tile_rows(s, hid), r0 = t * rows;
	int r1 = r0 + rows < hid ? r0 + rows : hid;
	Proj p1 = { s->hb, layer_matrix(s, MAT_W1, l), hid };
	Proj p3 = { s->hb2, layer_matrix(s, MAT_W3, l), hid };

	matmul_tile(&p1, r0, r1, in, dim, s->n);
	matmul_tile(&p3, r0, r1, in, dim, s->n);
	for (int b = 0; b < s->n; b++)
		swiglu(s->hb + (size_t)b * hid + r0, s->hb2 + (size_t)b * hid + r0, r1 - r0);
}

static int logit_tile_rows(const CpuState *s)
{
	return LOGIT_TILE_ROWS * (s->n_out < LOGIT_TILE_TOKENS ? s->n_out : LOGIT_TILE_TOKENS);
}

/* Tile t of phase ph; in is the phase's input when it is a product. */
static void run_tile(const CpuState *s, const Phase *ph, int t, const MatInput *in, int thread)
{
	const Weights *w = weights(s);
	const Config *c = &s->c;
	int l = ph->layer, dim = c->dim, hid = c->hidden_dim;
	Proj p[3];

	switch (ph->kind) {
	case PH_ATTN_NORM:
		rmsnorm(s->xb + (size_t)t * dim, s->x + (size_t)t * dim,
			tensor_f32(w->layers[l].rms_att), dim, config_norm_eps(c));
		break;
	case PH_QKV:
		qkv_projs(s, l, p);
		proj_tile(p, 3, t, tile_rows(s, dim + 2 * s->kv_dim), in, dim, s->n);
		break;
	case PH_ROPE:
		rope_tile(s, l, t);
		break;
	case PH_ATTENTION:
		attention_tile(s, l, t, thread);
		break;
	case PH_ATTN_OUT:
		matmul_add_tile(s, layer_matrix(s, MAT_WO, l), dim, in, s->xb2, t);
		break;
	case PH_FFN_NORM:
		rmsnorm(s->xb + (size_t)t * dim, s->x + (size_t)t * dim,
			tensor_f32(w->layers[l].rms_ffn), dim, config_norm_eps(c));
		break;
	case PH_FFN_UP:
		ffn_up_tile(s, l, t, in);
		break;
	case PH_FFN_DOWN:
		matmul_add_tile(s, layer_matrix(s, MAT_W2, l), hid, in, s->xb, t);
		break;
	case PH_FINAL_NORM:
		rmsnorm(s->xo + (size_t)t * dim, s->x + (size_t)s->out_tok[t] * dim,
			tensor_f32(w->rms_final_weight), dim, config_norm_eps(c));
		break;
	case PH_LOGITS:
		p[0] = (Proj){ s->logits, s->mats[(size_t)c->n_layers * MAT_PER_LAYER], c->vocab_size };
		proj_tile(p, 1, t, logit_tile_rows(s), in, dim, s->n_out);
		break;
	}
}

/* Tiles of each phase for n tokens, n_out of them wanting logits. */
static int phase_tiles(const CpuState *s, enum phase_kind kind)
{
	const Config *c = &s->c;
	Proj p[3];

	switch (kind) {
	case PH_ATTN_NORM:
	case PH_FFN_NORM:
		return s->n;
	case PH_QKV:
		qkv_projs(s, 0, p);
		return proj_tiles(p, 3, tile_rows(s, c->dim + 2 * s->kv_dim));
	case PH_ROPE:
		return s->n * ((c->n_heads + rope_tile_heads(s) - 1) / rope_tile_heads(s));
	case PH_ATTENTION:
		return s->n_qgroups * c->n_heads;
	case PH_ATTN_OUT:
	case PH_FFN_DOWN:
		return (c->dim + tile_rows(s, c->dim) - 1) / tile_rows(s, c->dim);
	case PH_FFN_UP:
		return (c->hidden_dim + tile_rows(s, c->hidden_dim) - 1) / tile_rows(s, c->hidden_dim);
	case PH_FINAL_NORM:
		return s->n_out;
	case PH_LOGITS:
		return s->n_out > 0 ? (c->vocab_size + logit_tile_rows(s) - 1) / logit_tile_rows(s) : 0;
	}
	return 0;
}

/* ---- spans, fired by the first thread at the phase edges ---- */

/* qkv holds attn_norm and rope; ffn holds ffn_norm; logits holds final_norm. */
static void phase_enter(const Phase *ph)
{
	int l = ph->layer;

	switch (ph->kind) {
	case PH_ATTN_NORM:
		trace_span_begin(SPAN_LAYER, l);
		trace_span_begin(SPAN_QKV, l);
		trace_span_begin(SPAN_ATTN_NORM, l);
		break;
	case PH_ROPE:
		trace_span_begin(SPAN_ROPE, l);
		break;
	case PH_ATTENTION:
		trace_span_begin(SPAN_ATTENTION, l);
		break;
	case PH_ATTN_OUT:
		trace_span_begin(SPAN_ATTN_OUT, l);
		break;
	case PH_FFN_NORM:
		trace_span_begin(SPAN_FFN, l);
		trace_span_begin(SPAN_FFN_NORM, l);
		break;
	case PH_FINAL_NORM:
		trace_span_begin(SPAN_LOGITS, LAYER_NONE);
		trace_span_begin(SPAN_FINAL_NORM, LAYER_NONE);
		break;
	default:
		break;
	}
}

static void phase_leave(const Phase *ph)
{
	int l = ph->layer;

	switch (ph->kind) {
	case PH_ATTN_NORM:
		trace_span_end(SPAN_ATTN_NORM, l);
		break;
	case PH_ROPE:
		trace_span_end(SPAN_ROPE, l);
		trace_span_end(SPAN_QKV, l);
		break;
	case PH_ATTENTION:
		trace_span_end(SPAN_ATTENTION, l);
		break;
	case PH_ATTN_OUT:
		trace_span_end(SPAN_ATTN_OUT, l);
		break;
	case PH_FFN_NORM:
		trace_span_end(SPAN_FFN_NORM, l);
		break;
	case PH_FFN_DOWN:
		trace_span_end(SPAN_FFN, l);
		trace_span_end(SPAN_LAYER, l);
		break;
	case PH_FINAL_NORM:
		trace_span_end(SPAN_FINAL_NORM, LAYER_NONE);
		break;
	case PH_LOGITS:
		trace_span_end(SPAN_LOGITS, LAYER_NONE);
		break;
	default:
		break;
	}
}

/* ---- running the phases ---- */

/* Waits until every tile of a phase is done. The wait is for tiles other
 * threads are running, so it is short unless one lost its core: then,
 * after a while, give the core away rather than spin a time slice. */
static void wait_done(const PhaseCounters *pc, int tiles)
{
	for (unsigned spins = 0; __atomic_load_n(&pc->done, __ATOMIC_ACQUIRE) < tiles; spins++) {
		if (spins < 4096)
			__builtin_ia32_pause();
		else
			sched_yield();
	}
}

/* The quantized forms (QUANT_*) the products of a phase take: both for a
 * layer that mixes Q8_0 or Q4_0 with the k-quants. */
static int phase_quant_forms(const CpuState *s, const Phase *ph)
{
	int l = ph->layer;

	switch (ph->kind) {
	case PH_QKV:
		return quant_form_of(layer_matrix(s, MAT_WQ, l).type) | quant_form_of(layer_matrix(s, MAT_WK, l).type) |
		       quant_form_of(layer_matrix(s, MAT_WV, l).type);
	case PH_ATTN_OUT: return quant_form_of(layer_matrix(s, MAT_WO, l).type);
	case PH_FFN_UP: return quant_form_of(layer_matrix(s, MAT_W1, l).type) | quant_form_of(layer_matrix(s, MAT_W3, l).type);
	case PH_FFN_DOWN: return quant_form_of(layer_matrix(s, MAT_W2, l).type);
	case PH_LOGITS: return quant_form_of(s->mats[(size_t)s->c.n_layers * MAT_PER_LAYER].type);
	default: return 0;
	}
}

/* The input of a product phase: (rows, n) floats; NULL for the others. */
static const float *phase_input(const CpuState *s, enum phase_kind kind, int *rows, int *n)
{
	*rows = s->n;
	*n = s->c.dim;
	switch (kind) {
	case PH_QKV: case PH_ATTN_OUT: case PH_FFN_UP: return s->xb;
	case PH_FFN_DOWN: *n = s->c.hidden_dim; return s->hb;
	case PH_LOGITS: *rows = s->n_out; return s->xo;
	default: return NULL;
	}
}

/* Every thread of the region runs this: the phases in order, taking tiles
 * until a phase has none left, then waiting for its last ones. With quantized
 * weights a thread quantizes a product's input for itself before its first
 * tile: the input is whole only once the phase before has ended, and two
 * copies of a few KB cost less than one more wait. */
static void run_phases(CpuState *s, int first, int thread)
{
	for (int i = 0; i < s->n_phases; i++) {
		const Phase *ph = &s->phases[i];
		PhaseCounters *pc = &s->ctr[i];
		MatInput in = { NULL, NULL };
		int t, rows, n;

		in.x = phase_input(s, ph->kind, &rows, &n);
		if (first)
			phase_enter(ph);
		while ((t = __atomic_fetch_add(&pc->next, 1, __ATOMIC_RELAXED)) < ph->tiles) {
			if (in.x && s->quant && !in.q) {
				quantize_rows(in.x, rows, n, &s->quant[thread], phase_quant_forms(s, ph));
				in.q = &s->quant[thread];
			}
			run_tile(s, ph, t, &in, thread);
			__atomic_fetch_add(&pc->done, 1, __ATOMIC_RELEASE);
		}
		wait_done(pc, ph->tiles);
		if (first)
			phase_leave(ph);
	}
}

/* Multiply-adds of a forward over n tokens, roughly: the weights it reads. */
static long forward_work(const CpuState *s, int n, int n_out)
{
	const Config *c = &s->c;
	long layer = (long)c->dim * (c->dim + 2 * s->kv_dim) + (long)c->dim * c->dim +
		     3L * c->dim * c->hidden_dim;

	return layer * c->n_layers * n + (long)c->vocab_size * c->dim * n_out;
}

static void run_forward(CpuState *s)
{
	for (int i = 0; i < s->n_phases; i++) {
		s->phases[i].tiles = phase_tiles(s, s->phases[i].kind);
		s->ctr[i].next = 0;
		s->ctr[i].done = 0;
	}
	/* num_threads: omp_set_num_threads at create set only the creating
	 * thread's count, and the HTTP engine forwards from another thread;
	 * each thread's scratch is sized for s->threads */
#pragma omp parallel num_threads(s->threads) if (forward_work(s, s->n, s->n_out) >= PARALLEL_MIN_WORK)
	run_phases(s, omp_get_thread_num() == 0, omp_get_thread_num());
}

/* Row `token` of the embedding as floats, from its stored type. */
static void embed_row(float *out, const Tensor *emb, int token, int dim)
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

/* Lays the batch out per token: embedding row, position, block table;
 * sets the number of tokens, and the logits rows in out_tok. */
static void gather_batch(CpuState *s, const BatchSeq *seqs, int nseqs)
{
	const Tensor *emb = &weights(s)->token_embedding_table;
	int dim = s->c.dim, n = 0;

	s->n_out = 0;
	s->n_qgroups = 0;
	for (int i = 0; i < nseqs; i++) {
		for (int t = 0; t < seqs[i].n; t++, n++) {
			embed_row(s->x + (size_t)n * dim, emb, seqs[i].tokens[t], dim);
			s->tpos[n] = seqs[i].pos + t;
			s->tblocks[n] = seqs[i].blocks;
			if (t % ATT_QUERY_GROUP == 0)
				s->qgroup[s->n_qgroups++] = n;
		}
		if (seqs[i].want_logits)
			s->out_tok[s->n_out++] = n - 1;
	}
	s->qgroup[s->n_qgroups] = n;
	s->n = n;
}

static int cpu_forward_batch(void *state, const BatchSeq *seqs, int nseqs,
			     float *logits, InferError *err)
{
	CpuState *s = state;

	if (backend_check_batch(&s->c, seqs, nseqs, CPU_MAX_BATCH, s->max_out, s->n_blocks,
				s->block_size, err))
		return -1;

	trace_span_begin(SPAN_EMBED, LAYER_NONE);
	gather_batch(s, seqs, nseqs);
	trace_span_end(SPAN_EMBED, LAYER_NONE);

	s->logits = logits;
	run_forward(s);
	s->logits = NULL;
	return 0;
}

static int cpu_forward(void *state, const int *tokens, int n, int pos,
		       float *logits, InferError *err)
{
	CpuState *s = state;
	BatchSeq q = { tokens, n, pos, (const int[]){ 0 }, 1 };

	if (s->n_blocks != 1 || s->block_size != s->c.seq_len)
		return infer_fail(err, "cpu forward: single-stream calls need the single-stream "
				  "KV layout");
	return cpu_forward_batch(state, &q, 1, logits, err);
}

static void cpu_destroy(void *state)
{
	CpuState *s = state;

	if (!s)
		return;
	pool_free(POOL_DEVICE, s->packed_mem, s->packed_bytes);
	pool_free(POOL_ACTIVATIONS, s->quant_mem, s->quant_bytes);
	pool_free(POOL_ACTIVATIONS, s->att_scratch, s->scratch_bytes);
	if (s->mats)
		pool_free(POOL_ACTIVATIONS, s->mats,
			  ((size_t)s->c.n_layers * MAT_PER_LAYER + 1) * sizeof(*s->mats));
	pool_free(POOL_KV_CACHE, s->kv_block, s->kv_bytes);
	pool_free(POOL_ACTIVATIONS, s->meta, s->meta_bytes);
	pool_free(POOL_ACTIVATIONS, s->block_mem, s->block_bytes);
	pool_free(POOL_ACTIVATIONS, s, sizeof(*s));
}

/* Carves the activation block: the phase counters, then widths in floats
 * per batch row. Each row starts a cache line when its width is a multiple
 * of 16 floats, so threads writing neighbouring tiles share no line. */
static void carve_activations(CpuState *s)
{
	size_t dim = (size_t)s->c.dim, hidden = (size_t)s->c.hidden_dim, kv = (size_t)s->kv_dim;
	float *p;

	s->ctr = (PhaseCounters *)(void *)s->block;
	p = (float *)(void *)(s->ctr + s->n_phases);
	s->x = p;    p += CPU_MAX_BATCH * dim;
	s->xb = p;   p += CPU_MAX_BATCH * dim;
	s->xb2 = p;  p += CPU_MAX_BATCH * dim;
	s->q = p;    p += CPU_MAX_BATCH * dim;
	s->k = p;    p += CPU_MAX_BATCH * kv;
	s->v = p;    p += CPU_MAX_BATCH * kv;
	s->hb = p;   p += CPU_MAX_BATCH * hidden;
	s->hb2 = p;  p += CPU_MAX_BATCH * hidden;
	s->xo = p;   p += (size_t)s->max_out * dim;
	s->rope_cs = p; p += (size_t)s->c.seq_len * s->head_size;
	s->att = p;
}

static void carve_meta(CpuState *s)
{
	char *p = s->meta;

	s->tblocks = (const int **)(void *)p;  p += CPU_MAX_BATCH * sizeof(*s->tblocks);
	s->phases = (Phase *)(void *)p;        p += s->n_phases * sizeof(Phase);
	s->tpos = (int *)(void *)p;            p += CPU_MAX_BATCH * sizeof(int);
	s->qgroup = (int *)(void *)p;          p += (CPU_MAX_BATCH + 1) * sizeof(int);
	s->out_tok = (int *)(void *)p;
}

/* The forward's phases: each layer's in order, then the classifier's. */
static void plan_phases(CpuState *s)
{
	int i = 0;

	for (int l = 0; l < s->c.n_layers; l++)
		for (int k = 0; k < PH_LAYER_COUNT; k++)
			s->phases[i++] = (Phase){ (enum phase_kind)k, l, 0 };
	s->phases[i++] = (Phase){ PH_FINAL_NORM, LAYER_NONE, 0 };
	s->phases[i++] = (Phase){ PH_LOGITS, LAYER_NONE, 0 };
}

static int cpu_alloc(CpuState *s, InferError *err)
{
	const Config *c = &s->c;
	size_t dim = (size_t)c->dim, hidden = (size_t)c->hidden_dim, kv = (size_t)s->kv_dim;
	size_t act_floats, kv_elems;

	/* Sizes are bounded by config_validate, so these cannot overflow. */
	s->n_phases = c->n_layers * PH_LAYER_COUNT + 2;
	act_floats = CPU_MAX_BATCH * (4 * dim + 2 * kv + 2 * hidden) + (size_t)s->max_out * dim +
		     (size_t)c->seq_len * s->head_size +
		     (size_t)CPU_MAX_BATCH * c->n_heads * c->seq_len;
	kv_elems = (size_t)c->n_layers * s->n_blocks * s->block_size * kv;
	s->block_bytes = CACHE_LINE + s->n_phases * sizeof(PhaseCounters) +
			 act_floats * sizeof(float);
	s->meta_bytes = CPU_MAX_BATCH * (sizeof(int *) + sizeof(int)) +
			(CPU_MAX_BATCH + 1) * sizeof(int) +
			s->n_phases * sizeof(Phase) + s->max_out * sizeof(int);
	s->kv_bytes = 2 * kv_elems * (s->kv_half ? sizeof(_Float16) : sizeof(float));
	s->block_mem = pool_alloc(POOL_ACTIVATIONS, s->block_bytes);
	s->meta = pool_alloc(POOL_ACTIVATIONS, s->meta_bytes);
	s->kv_block = pool_alloc(POOL_KV_CACHE, s->kv_bytes);
	if (!s->block_mem || !s->meta || !s->kv_block)
		return infer_fail(err, "cpu backend: cannot allocate %zu bytes of activations "
				  "and %zu bytes of kv cache", s->block_bytes, s->kv_bytes);
	s->block = (float *)(void *)(((uintptr_t)s->block_mem + CACHE_LINE - 1) &
				     ~(uintptr_t)(CACHE_LINE - 1));
	carve_activations(s);
	carve_meta(s);
	plan_phases(s);
	fill_rope_table(s);
	s->key_cache = s->kv_block;
	s->value_cache = (char *)s->kv_block + s->kv_bytes / 2;
	return 0;
}

/* Layer l's matrix of kind k (MAT_*) in the model, with its shape; l ==
 * n_layers: the classifier. */
static const Tensor *model_matrix(const CpuState *s, int k, int l, int *d, int *n)
{
	const Weights *w = weights(s);
	const LayerWeights *lw = l < s->c.n_layers ? &w->layers[l] : NULL;
	int dim = s->c.dim, hid = s->c.hidden_dim, kv = s->kv_dim;

	if (!lw) {
		*d = s->c.vocab_size, *n = dim;
		return &w->wcls;
	}
	switch (k) {
	case MAT_WQ: *d = dim, *n = dim; return &lw->wq;
	case MAT_WK: *d = kv, *n = dim; return &lw->wk;
	case MAT_WV: *d = kv, *n = dim; return &lw->wv;
	case MAT_WO: *d = dim, *n = dim; return &lw->wo;
	case MAT_W1: *d = hid, *n = dim; return &lw->w1;
	case MAT_W2: *d = dim, *n = hid; return &lw->w2;
	default: *d = hid, *n = dim; return &lw->w3;
	}
}

/* Packs every matrix for matmul_rows_typed, each in the type the model
 * stores it in. The copy is the backend's own layout of the weights, so it
 * is counted in the device pool, as the OpenCL backend's buffers are; the
 * mapped file stays the weights pool. */
static int pack_weights(CpuState *s, InferError *err)
{
	size_t nmats = (size_t)s->c.n_layers * MAT_PER_LAYER + 1, bytes = CACHE_LINE;
	char *p;
	int d, n;

	s->mats = pool_alloc(POOL_ACTIVATIONS, nmats * sizeof(*s->mats));
	if (!s->mats)
		return infer_fail(err, "cpu backend: out of memory");
	for (size_t i = 0; i < nmats; i++) {
		const Tensor *t = model_matrix(s, (int)(i % MAT_PER_LAYER), (int)(i / MAT_PER_LAYER), &d, &n);

		/* a cache line apiece: each matrix starts aligned */
		bytes += (packed_bytes(t->type, d, n) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
	}
	s->packed_bytes = bytes;
	s->packed_mem = pool_alloc(POOL_DEVICE, s->packed_bytes);
	if (!s->packed_mem)
		return infer_fail(err, "cpu backend: cannot allocate %zu bytes of packed weights",
				  s->packed_bytes);
	p = (char *)(((uintptr_t)s->packed_mem + CACHE_LINE - 1) & ~(uintptr_t)(CACHE_LINE - 1));
	for (size_t i = 0; i < nmats; i++) {
		const Tensor *t = model_matrix(s, (int)(i % MAT_PER_LAYER), (int)(i / MAT_PER_LAYER), &d, &n);

		if (t->type == WEIGHT_Q4_K)
			matmul_want_amx();
		pack_matrix_typed(p, t->type, t->data, d, n);
		s->mats[i] = (PackedMatrix){ p, t->type };
		p += (packed_bytes(t->type, d, n) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
	}
	return 0;
}

static int pack_weights_span(CpuState *s, InferError *err)
{
	int rc;

	trace_span_begin(SPAN_PACK, LAYER_NONE);
	rc = pack_weights(s, err);
	trace_span_end(SPAN_PACK, LAYER_NONE);
	return rc;
}

/* Each thread's quantized input (s->quant), if any matrix is quantized: rows
 * for the widest input and the largest batch (and the Q8_K form for k-quants). */
static int alloc_quant(CpuState *s, InferError *err)
{
	size_t nmats = (size_t)s->c.n_layers * MAT_PER_LAYER + 1, per, head;
	int rows = s->max_out > CPU_MAX_BATCH ? s->max_out : CPU_MAX_BATCH;
	int width = s->c.hidden_dim > s->c.dim ? s->c.hidden_dim : s->c.dim;
	int forms = 0, kform;
	char *p;

	for (size_t i = 0; i < nmats; i++)
		forms |= quant_form_of(s->mats[i].type);
	if (!forms)
		return 0;
	kform = (forms & QUANT_Q8_K) != 0;
	per = (quant_rows_bytes(rows, width, kform) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
	head = ((size_t)s->threads * sizeof(QuantRows) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
	s->quant_bytes = CACHE_LINE + head + (size_t)s->threads * per;
	s->quant_mem = pool_alloc(POOL_ACTIVATIONS, s->quant_bytes);
	if (!s->quant_mem)
		return infer_fail(err, "cpu backend: out of memory");
	p = (char *)(((uintptr_t)s->quant_mem + CACHE_LINE - 1) & ~(uintptr_t)(CACHE_LINE - 1));
	s->quant = (QuantRows *)(void *)p;
	for (int t = 0; t < s->threads; t++)
		s->quant[t] = quant_rows_at(p + head + (size_t)t * per, rows, width, kform);
	return 0;
}

/* Each thread's scratch for a query group: its chains, and with an f16
 * cache its converted rows (convert_rows). */
static int alloc_scratch(CpuState *s, InferError *err)
{
	if (s->kv_half)
		s->scratch_rows = s->c.seq_len < ATT_SCRATCH_MAX ? s->c.seq_len : ATT_SCRATCH_MAX;
	s->scratch_floats = (size_t)2 * (ATT_QUERY_GROUP + s->scratch_rows) * s->head_size;
	s->scratch_bytes = (size_t)s->threads * s->scratch_floats * sizeof(float);
	s->att_scratch = pool_alloc(POOL_ACTIVATIONS, s->scratch_bytes);
	if (!s->att_scratch)
		return infer_fail(err, "cpu backend: cannot allocate %zu bytes of attention scratch",
				  s->scratch_bytes);
	return 0;
}

static int cpu_create(const Model *m, const BackendOptions *opt, void **state,
		      InferError *err)
{
	const Config *c = &m->config;
	CpuState *s;

	*state = NULL;
	if (opt && opt->kv_type == KV_F16 && c->dim / c->n_heads > KV_ROW_MAX)
		return infer_fail(err, "cpu backend: an f16 KV cache takes heads of at most %d values, not %d",
				  KV_ROW_MAX, c->dim / c->n_heads);
	s = pool_alloc(POOL_ACTIVATIONS, sizeof(*s));
	if (!s)
		return infer_fail(err, "cpu backend: out of memory");
	s->model = m;
	s->c = *c;
	s->kv_half = opt && opt->kv_type == KV_F16;
	s->halves_to_floats = __builtin_cpu_supports("f16c") ? halves_f16c : halves_soft;
	s->head_size = c->dim / c->n_heads;
	s->kv_dim = c->dim * c->n_kv_heads / c->n_heads;
	s->kv_mul = c->n_heads / c->n_kv_heads;
	s->max_out = opt && opt->max_seqs > 0 ? opt->max_seqs : 1;
	if (s->max_out > CPU_MAX_BATCH)
		s->max_out = CPU_MAX_BATCH;
	backend_kv_shape(c, opt, &s->n_blocks, &s->block_size);
	if (opt && opt->threads > 0)
		omp_set_num_threads(opt->threads);
	s->threads = omp_get_max_threads();
	if (cpu_alloc(s, err) < 0 || alloc_scratch(s, err) < 0 || pack_weights_span(s, err) < 0 ||
	    alloc_quant(s, err) < 0) {
		cpu_destroy(s);
		return -1;
	}
	*state = s;
	return 0;
}

const BackendOps backend_cpu = {
	.name = "cpu",
	.create = cpu_create,
	.forward = cpu_forward,
	.destroy = cpu_destroy,
	.max_batch = CPU_MAX_BATCH,
	.forward_batch = cpu_forward_batch,
};
