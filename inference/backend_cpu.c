/* backend_cpu.c - the reference forward pass, llama2.c's run.c math.
 *
 * A call handles a batch of tokens from one or more sequences: every phase
 * runs over the whole batch before the next, so one forward fires one span
 * per layer, and each weight row is read once per call for every token.
 * Keys and values live in a paged cache (see kvcache.h); each token finds
 * its sequence's earlier positions through that sequence's block table.
 *
 * Batch invariance: each output element of a matrix product is one dot
 * product over its row, the same code whatever the batch (matmul_tile); attention sums over
 * its own positions in order. Dot products are summed in 16 vector lanes
 * (then the lanes in a fixed tree), not run.c's one serial chain: the
 * order is still fixed, and the compiler can keep the loads wide. */
#include <math.h>
#include <omp.h>
#include <string.h>
#include "backend.h"
#include "pool.h"
#include "sampler.h"
#include "trace.h"

#define CPU_MAX_BATCH 32
/* Below this many multiply-adds a parallel region costs more than it saves. */
#define PARALLEL_MIN_WORK 65536
#define ATTN_PARALLEL_MIN_WORK 16384

typedef struct {
	const Model *model;
	Config c;
	int head_size, kv_dim, kv_mul;
	int max_out;        /* sequences wanting logits per call */
	int n_blocks, block_size;
	/* activations, (CPU_MAX_BATCH, width) each, carved from one block */
	float *x, *xb, *xb2, *q, *k, *v, *hb, *hb2;
	float *xo;          /* (max_out, dim) final-normed rows for the classifier */
	float *att;         /* (CPU_MAX_BATCH, n_heads, seq_len) scores per token and head */
	float *block;
	size_t block_bytes;
	/* per token of the current call */
	int *tpos;          /* (CPU_MAX_BATCH) its position */
	const int **tblocks; /* (CPU_MAX_BATCH) its sequence's block table */
	int *out_tok;       /* (max_out) tokens whose logits are wanted */
	void *meta;
	size_t meta_bytes;
	float *key_cache;   /* (n_layers, n_blocks * block_size, kv_dim) */
	float *value_cache;
	float *kv_block;
	size_t kv_bytes;
} CpuState;

static void rmsnorm(float *o, const float *x, const float *weight, int size)
{
	float ss = 0.0f;

	for (int j = 0; j < size; j++)
		ss += x[j] * x[j];
	ss /= size;
	ss += 1e-5f;
	ss = 1.0f / sqrtf(ss);
	for (int j = 0; j < size; j++)
		o[j] = weight[j] * (ss * x[j]);
}

/* 16 and 8 floats; loaded through memcpy, so no alignment is assumed. */
typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

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

/* The one way every dot product is summed: lane j mod 16 accumulates
 * w[j] * x[j] in order of j, then dot_finish. dot_block does R rows (stride
 * ldw) against T tokens (stride ldx) at once, each pair in its own
 * accumulator, so which block a pair came in never changes its sum: the
 * batch invariance of backend.h. out[t * ldo + r] gets row r, token t. */
static inline __attribute__((always_inline)) void
dot_block(const float *w, size_t ldw, int R, const float *x, size_t ldx, int T, int n,
	  float *out, size_t ldo)
{
	v16f acc[4][4];
	int j = 0;

	/* unrolled, so the accumulators live in registers */
#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
#pragma GCC unroll 4
		for (int t = 0; t < T; t++)
			acc[r][t] = (v16f){ 0 };
	for (; j + 16 <= n; j += 16) {
		v16f xv[4];

		/* the next block of rows, while this one computes: with several
		 * tokens the loads no longer keep the hardware prefetcher ahead */
#pragma GCC unroll 4
		for (int r = 0; r < R; r++)
			__builtin_prefetch(w + (r + R) * ldw + j, 0, 3);
#pragma GCC unroll 4
		for (int t = 0; t < T; t++)
			LOAD16(xv[t], x + t * ldx + j);
#pragma GCC unroll 4
		for (int r = 0; r < R; r++) {
			v16f wv;

			LOAD16(wv, w + r * ldw + j);
#pragma GCC unroll 4
			for (int t = 0; t < T; t++)
				acc[r][t] += wv * xv[t];
		}
	}
#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
#pragma GCC unroll 4
		for (int t = 0; t < T; t++)
			out[t * ldo + r] = dot_finish(&acc[r][t], w + r * ldw, x + t * ldx, j, n);
}

static inline __attribute__((always_inline)) float dot(const float *w, const float *x, int n)
{
	float o;

	dot_block(w, 0, 1, x, 0, 1, n, &o, 0);
	return o;
}

/* dot_block with R and T known at compile time, so the accumulators stay
 * in registers: 4 rows, or the last rows one by one; 1 to 4 tokens. */
#define DOT_BLOCKS(R) \
	switch (T) { \
	case 4: dot_block(w, ldw, R, x, ldx, 4, n, out, ldo); break; \
	case 3: dot_block(w, ldw, R, x, ldx, 3, n, out, ldo); break; \
	case 2: dot_block(w, ldw, R, x, ldx, 2, n, out, ldo); break; \
	default: dot_block(w, ldw, R, x, ldx, 1, n, out, ldo); break; \
	}

static inline __attribute__((always_inline)) void
dot_tile(const float *w, size_t ldw, int R, const float *x, size_t ldx, int T, int n,
	 float *out, size_t ldo)
{
	if (R == 4) {
		DOT_BLOCKS(4)
		return;
	}
	for (int r = 0; r < R; r++, w += ldw, out++)
		DOT_BLOCKS(1)
}

/* One projection of a fused matmul: out(batch, d) = x @ w(d, n)^T. */
typedef struct {
	float *out;
	const float *w;
	int d;
} Proj;

/* Rows r0..r1-1 of one projection against every token of the batch: the
 * unit of work a thread takes, in blocks of 4 rows by up to 4 tokens (each
 * weight row is read from memory once for the batch). Cloned for
 * x86-64-v4 (AVX-512) and v3 (AVX2, FMA) where the CPU has them; one
 * machine always takes one clone. */
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
static void matmul_tile(const Proj *p, int r0, int r1, const float *x, int n, int batch)
{
	/* GCC drops -fno-omit-frame-pointer in target clones; asking for the
	 * frame address keeps the frame, so `spantrace profile` unwinds here. */
	__asm__ volatile("" : : "r"(__builtin_frame_address(0)));
	for (int i = r0; i < r1; i += 4) {
		int R = r1 - i < 4 ? r1 - i : 4;

		for (int b = 0; b < batch; b += 4)
			dot_tile(p->w + (size_t)i * n, (size_t)n, R, x + (size_t)b * n, (size_t)n,
				 batch - b < 4 ? batch - b : 4, n, p->out + (size_t)b * p->d + i,
				 (size_t)p->d);
	}
}

#define TILE_ROWS 16 /* a multiple of 4: rows go in fours inside a tile */

/* Several projections of the same input in one parallel region (q/k/v,
 * w1/w3): fewer thread wake-ups per token. Each weight row is read once for
 * the whole batch. Tiles are handed out dynamically: on a shared 2-core
 * machine a thread that loses its core for a while no longer holds the
 * other back at the barrier (a tile's result does not depend on who
 * computes it). */
static void matmul_fused(const Proj *p, int nproj, const float *x, int n, int batch)
{
	long tiles = 0, rows = 0, t;

	for (int k = 0; k < nproj; k++) {
		tiles += (p[k].d + TILE_ROWS - 1) / TILE_ROWS;
		rows += p[k].d;
	}
#pragma omp parallel for schedule(dynamic, 4) if (rows * n * batch >= PARALLEL_MIN_WORK)
	for (t = 0; t < tiles; t++) {
		int k = 0, r0 = (int)t * TILE_ROWS;

		while (r0 >= p[k].d) { /* tile t in projection k, from row r0 */
			r0 -= (p[k].d + TILE_ROWS - 1) / TILE_ROWS * TILE_ROWS;
			k++;
		}
		int r1 = r0 + TILE_ROWS < p[k].d ? r0 + TILE_ROWS : p[k].d;
		matmul_tile(&p[k], r0, r1, x, n, batch);
	}
}

static void matmul(float *out, const float *x, const float *w, int n, int d, int batch)
{
	Proj p = { out, w, d };

	matmul_fused(&p, 1, x, n, batch);
}

static void rope(float *q, float *k, int dim, int kv_dim, int head_size, int pos)
{
	for (int i = 0; i < dim; i += 2) {
		int head_dim = i % head_size;
		float freq = 1.0f / powf(10000.0f, head_dim / (float)head_size);
		float val = pos * freq;
		float fcr = cosf(val), fci = sinf(val);
		int rotn = i < kv_dim ? 2 : 1;

		for (int v = 0; v < rotn; v++) {
			float *vec = v == 0 ? q : k;
			float v0 = vec[i], v1 = vec[i + 1];

			vec[i] = v0 * fcr - v1 * fci;
			vec[i + 1] = v0 * fci + v1 * fcr;
		}
	}
}

/* Row `row` of the pool (block * block_size + offset) in layer l. */
static float *cache_row(const CpuState *s, float *cache, int l, size_t row)
{
	return cache + ((size_t)l * s->n_blocks * s->block_size + row) * s->kv_dim;
}

/* The pool row holding position p of a sequence with block table blocks. */
static size_t pos_row(const CpuState *s, const int *blocks, int p)
{
	return (size_t)blocks[p / s->block_size] * s->block_size + p % s->block_size;
}

/* Scores of one head against its sequence's positions 0..pos, walked block
 * by block in order, softmax, then the weighted sum of values, each output
 * lane summed over positions in order. Cloned as matmul_tile is. */
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
static void attend_head(const CpuState *s, int l, int b, int h, const float *q, float *out)
{
	int hs = s->head_size, bs = s->block_size, pos = s->tpos[b];
	const int *blocks = s->tblocks[b];
	const float *qh = q + (size_t)b * s->c.dim + h * hs;
	float *att = s->att + ((size_t)b * s->c.n_heads + h) * s->c.seq_len;
	float *xb = out + (size_t)b * s->c.dim + h * hs;
	size_t head_off = (size_t)(h / s->kv_mul) * hs;
	float scale = sqrtf(hs);

	__asm__ volatile("" : : "r"(__builtin_frame_address(0))); /* see matmul_tile */
	for (int t = 0; t <= pos; t++) {
		size_t row = (size_t)blocks[t / bs] * bs + t % bs;

		att[t] = dot(qh, cache_row(s, s->key_cache, l, row) + head_off, hs) / scale;
	}
	softmax(att, pos + 1);
	memset(xb, 0, hs * sizeof(float));
	for (int t = 0; t <= pos; t++) {
		size_t row = (size_t)blocks[t / bs] * bs + t % bs;
		const float *v = cache_row(s, s->value_cache, l, row) + head_off;
		v8f a8 = { 0 };
		int i = 0;

		a8 += att[t];
		for (; i + 8 <= hs; i += 8) {
			v8f vv, o;

			memcpy(&vv, v + i, sizeof(vv));
			memcpy(&o, xb + i, sizeof(o));
			o += a8 * vv;
			memcpy(xb + i, &o, sizeof(o));
		}
		for (; i < hs; i++)
			xb[i] += att[t] * v[i];
	}
}

/* Causal attention of every token of the batch, all (token, head) pairs in
 * one parallel region once there is enough work: one thread wake-up per
 * layer, not one per token. */
static void attend(CpuState *s, int l, int n, const float *q, float *out)
{
	long work = 0, pairs = (long)n * s->c.n_heads, k;

	for (int b = 0; b < n; b++)
		work += (long)(s->tpos[b] + 1) * s->c.dim;
#pragma omp parallel for schedule(dynamic) if (work >= ATTN_PARALLEL_MIN_WORK)
	for (k = 0; k < pairs; k++)
		attend_head(s, l, (int)(k / s->c.n_heads), (int)(k % s->c.n_heads), q, out);
}

static void residual_add(float *x, const float *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] += d[i];
}

/* RoPE on q and k of each token, then k/v into their pool rows. */
static void rope_and_store(CpuState *s, int l, int n)
{
	int dim = s->c.dim, kv_dim = s->kv_dim;

	for (int b = 0; b < n; b++) {
		float *k = s->k + (size_t)b * kv_dim;
		size_t row = pos_row(s, s->tblocks[b], s->tpos[b]);

		rope(s->q + (size_t)b * dim, k, dim, kv_dim, s->head_size, s->tpos[b]);
		memcpy(cache_row(s, s->key_cache, l, row), k, kv_dim * sizeof(float));
		memcpy(cache_row(s, s->value_cache, l, row), s->v + (size_t)b * kv_dim,
		       kv_dim * sizeof(float));
	}
}

static void attention_block(CpuState *s, int l, int n)
{
	const Config *c = &s->c;
	const Weights *w = &s->model->weights;
	int dim = c->dim, kv_dim = s->kv_dim;
	size_t ldd = (size_t)l * dim * dim, ldk = (size_t)l * dim * kv_dim;

	/* qkv holds its norm and rope, as the OpenCL backend's fused kernel does. */
	trace_span_begin(SPAN_QKV, l);
	trace_span_begin(SPAN_ATTN_NORM, l);
	for (int b = 0; b < n; b++)
		rmsnorm(s->xb + (size_t)b * dim, s->x + (size_t)b * dim,
			w->rms_att_weight + (size_t)l * dim, dim);
	trace_span_end(SPAN_ATTN_NORM, l);

	matmul_fused((Proj[]){ { s->q, w->wq + ldd, dim }, { s->k, w->wk + ldk, kv_dim },
			       { s->v, w->wv + ldk, kv_dim } }, 3, s->xb, dim, n);

	trace_span_begin(SPAN_ROPE, l);
	rope_and_store(s, l, n);
	trace_span_end(SPAN_ROPE, l);
	trace_span_end(SPAN_QKV, l);

	trace_span_begin(SPAN_ATTENTION, l);
	attend(s, l, n, s->q, s->xb);
	trace_span_end(SPAN_ATTENTION, l);

	trace_span_begin(SPAN_ATTN_OUT, l);
	matmul(s->xb2, s->xb, w->wo + ldd, dim, dim, n);
	residual_add(s->x, s->xb2, (size_t)n * dim);
	trace_span_end(SPAN_ATTN_OUT, l);
}

static void swiglu(float *hb, const float *hb2, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float val = hb[i];

		val *= (1.0f / (1.0f + expf(-val)));
		val *= hb2[i];
		hb[i] = val;
	}
}

static void ffn_block(CpuState *s, int l, int n)
{
	const Config *c = &s->c;
	const Weights *w = &s->model->weights;
	int dim = c->dim, hidden = c->hidden_dim;
	size_t lw = (size_t)l * dim * hidden;

	trace_span_begin(SPAN_FFN, l);
	trace_span_begin(SPAN_FFN_NORM, l);
	for (int b = 0; b < n; b++)
		rmsnorm(s->xb + (size_t)b * dim, s->x + (size_t)b * dim,
			w->rms_ffn_weight + (size_t)l * dim, dim);
	trace_span_end(SPAN_FFN_NORM, l);

	matmul_fused((Proj[]){ { s->hb, w->w1 + lw, hidden }, { s->hb2, w->w3 + lw, hidden } },
		     2, s->xb, dim, n);
	swiglu(s->hb, s->hb2, (size_t)n * hidden);
	matmul(s->xb, s->hb, w->w2 + lw, hidden, dim, n);
	residual_add(s->x, s->xb, (size_t)n * dim);
	trace_span_end(SPAN_FFN, l);
}

/* Lays the batch out per token: embedding row, position, block table;
 * returns the number of tokens, and the logits rows in out_tok. */
static int gather_batch(CpuState *s, const BatchSeq *seqs, int nseqs, int *n_out)
{
	const float *emb = s->model->weights.token_embedding_table;
	int dim = s->c.dim, n = 0;

	*n_out = 0;
	for (int i = 0; i < nseqs; i++) {
		for (int t = 0; t < seqs[i].n; t++, n++) {
			memcpy(s->x + (size_t)n * dim, emb + (size_t)seqs[i].tokens[t] * dim,
			       dim * sizeof(float));
			s->tpos[n] = seqs[i].pos + t;
			s->tblocks[n] = seqs[i].blocks;
		}
		if (seqs[i].want_logits)
			s->out_tok[(*n_out)++] = n - 1;
	}
	return n;
}

static int cpu_forward_batch(void *state, const BatchSeq *seqs, int nseqs,
			     float *logits, InferError *err)
{
	CpuState *s = state;
	const Config *c = &s->c;
	const Weights *w = &s->model->weights;
	int dim = c->dim, n, n_out;

	if (backend_check_batch(c, seqs, nseqs, CPU_MAX_BATCH, s->max_out, s->n_blocks,
				s->block_size, err))
		return -1;

	trace_span_begin(SPAN_EMBED, LAYER_NONE);
	n = gather_batch(s, seqs, nseqs, &n_out);
	trace_span_end(SPAN_EMBED, LAYER_NONE);

	for (int l = 0; l < c->n_layers; l++) {
		trace_span_begin(SPAN_LAYER, l);
		attention_block(s, l, n);
		ffn_block(s, l, n);
		trace_span_end(SPAN_LAYER, l);
	}

	trace_span_begin(SPAN_LOGITS, LAYER_NONE);
	trace_span_begin(SPAN_FINAL_NORM, LAYER_NONE);
	for (int i = 0; i < n_out; i++)
		rmsnorm(s->xo + (size_t)i * dim, s->x + (size_t)s->out_tok[i] * dim,
			w->rms_final_weight, dim);
	trace_span_end(SPAN_FINAL_NORM, LAYER_NONE);
	if (n_out > 0)
		matmul(logits, s->xo, w->wcls, dim, c->vocab_size, n_out);
	trace_span_end(SPAN_LOGITS, LAYER_NONE);
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
	pool_free(POOL_KV_CACHE, s->kv_block, s->kv_bytes);
	pool_free(POOL_ACTIVATIONS, s->meta, s->meta_bytes);
	pool_free(POOL_ACTIVATIONS, s->block, s->block_bytes);
	pool_free(POOL_ACTIVATIONS, s, sizeof(*s));
}

/* Carves the activation block: widths in floats per batch row. */
static void carve_activations(CpuState *s)
{
	size_t dim = (size_t)s->c.dim, hidden = (size_t)s->c.hidden_dim, kv = (size_t)s->kv_dim;
	float *p = s->block;

	s->x = p;    p += CPU_MAX_BATCH * dim;
	s->xb = p;   p += CPU_MAX_BATCH * dim;
	s->xb2 = p;  p += CPU_MAX_BATCH * dim;
	s->q = p;    p += CPU_MAX_BATCH * dim;
	s->k = p;    p += CPU_MAX_BATCH * kv;
	s->v = p;    p += CPU_MAX_BATCH * kv;
	s->hb = p;   p += CPU_MAX_BATCH * hidden;
	s->hb2 = p;  p += CPU_MAX_BATCH * hidden;
	s->xo = p;   p += (size_t)s->max_out * dim;
	s->att = p;
}

static void carve_meta(CpuState *s)
{
	char *p = s->meta;

	s->tblocks = (const int **)(void *)p;  p += CPU_MAX_BATCH * sizeof(*s->tblocks);
	s->tpos = (int *)(void *)p;            p += CPU_MAX_BATCH * sizeof(int);
	s->out_tok = (int *)(void *)p;
}

static int cpu_alloc(CpuState *s, InferError *err)
{
	const Config *c = &s->c;
	size_t dim = (size_t)c->dim, hidden = (size_t)c->hidden_dim, kv = (size_t)s->kv_dim;
	size_t act_floats, kv_floats;

	/* Sizes are bounded by config_validate, so these cannot overflow. */
	act_floats = CPU_MAX_BATCH * (4 * dim + 2 * kv + 2 * hidden) + (size_t)s->max_out * dim +
		     (size_t)CPU_MAX_BATCH * c->n_heads * c->seq_len;
	kv_floats = (size_t)c->n_layers * s->n_blocks * s->block_size * kv;
	s->block_bytes = act_floats * sizeof(float);
	s->meta_bytes = CPU_MAX_BATCH * (sizeof(int *) + sizeof(int)) + s->max_out * sizeof(int);
	s->kv_bytes = 2 * kv_floats * sizeof(float);
	s->block = pool_alloc(POOL_ACTIVATIONS, s->block_bytes);
	s->meta = pool_alloc(POOL_ACTIVATIONS, s->meta_bytes);
	s->kv_block = pool_alloc(POOL_KV_CACHE, s->kv_bytes);
	if (!s->block || !s->meta || !s->kv_block)
		return infer_fail(err, "cpu backend: cannot allocate %zu bytes of activations "
				  "and %zu bytes of kv cache", s->block_bytes, s->kv_bytes);
	carve_activations(s);
	carve_meta(s);
	s->key_cache = s->kv_block;
	s->value_cache = s->kv_block + kv_floats;
	return 0;
}

static int cpu_create(const Model *m, const BackendOptions *opt, void **state,
		      InferError *err)
{
	const Config *c = &m->config;
	CpuState *s = pool_alloc(POOL_ACTIVATIONS, sizeof(*s));

	*state = NULL;
	if (!s)
		return infer_fail(err, "cpu backend: out of memory");
	s->model = m;
	s->c = *c;
	s->head_size = c->dim / c->n_heads;
	s->kv_dim = c->dim * c->n_kv_heads / c->n_heads;
	s->kv_mul = c->n_heads / c->n_kv_heads;
	s->max_out = opt && opt->max_seqs > 0 ? opt->max_seqs : 1;
	if (s->max_out > CPU_MAX_BATCH)
		s->max_out = CPU_MAX_BATCH;
	backend_kv_shape(c, opt, &s->n_blocks, &s->block_size);
	if (cpu_alloc(s, err) < 0) {
		cpu_destroy(s);
		return -1;
	}
	if (opt && opt->threads > 0)
		omp_set_num_threads(opt->threads);
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
