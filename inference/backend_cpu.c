/* backend_cpu.c - the reference forward pass, llama2.c's run.c math.
 *
 * A call handles a batch of consecutive positions: every phase runs over the
 * whole batch before the next, so one forward fires one span per layer. Per
 * position the arithmetic is exactly run.c's (same operation order, float
 * accumulators), so greedy output matches run.c token for token. */
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

typedef struct {
	const Model *model;
	Config c;
	int head_size, kv_dim, kv_mul;
	/* activations, (batch, width) each, carved from one block */
	float *x, *xb, *xb2, *q, *hb, *hb2;
	float *att;         /* (n_heads, seq_len) scores of one position */
	float *block;
	size_t block_bytes;
	float *key_cache;   /* (n_layers, seq_len, kv_dim) */
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

/* One projection of a fused matmul: out(batch, d) = x @ w(d, n)^T. */
typedef struct {
	float *out;
	const float *w;
	int d;
} Proj;

/* Several projections of the same input in one parallel region (q/k/v,
 * w1/w3): fewer thread wake-ups per token. Each weight row is read once for
 * the whole batch; each dot product sums j = 0..n-1 in order, as run.c.
 * (Interleaving several rows' sums measured slower here.) */
static void matmul_fused(const Proj *p, int nproj, const float *x, int n, int batch)
{
	long rows = 0, r;

	for (int k = 0; k < nproj; k++)
		rows += p[k].d;
#pragma omp parallel for if (rows * n >= PARALLEL_MIN_WORK)
	for (r = 0; r < rows; r++) {
		int k = 0, i = (int)r;

		while (i >= p[k].d)
			i -= p[k++].d;
		const float *row = p[k].w + (size_t)i * n;

		for (int b = 0; b < batch; b++) {
			const float *xv = x + (size_t)b * n;
			float val = 0.0f;

			for (int j = 0; j < n; j++)
				val += row[j] * xv[j];
			p[k].out[(size_t)b * p[k].d + i] = val;
		}
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

static float *layer_cache(const CpuState *s, float *cache, int l, int pos)
{
	return cache + ((size_t)l * s->c.seq_len + pos) * s->kv_dim;
}

/* Causal attention of one position over positions 0..pos of layer l. */
static void attend(CpuState *s, int l, int pos, const float *q, float *out)
{
	int hs = s->head_size, h;
	float *keys = layer_cache(s, s->key_cache, l, 0);
	float *values = layer_cache(s, s->value_cache, l, 0);

#pragma omp parallel for if ((long)(pos + 1) * s->c.dim >= PARALLEL_MIN_WORK)
	for (h = 0; h < s->c.n_heads; h++) {
		const float *qh = q + h * hs;
		float *att = s->att + (size_t)h * s->c.seq_len;
		float *xb = out + h * hs;
		size_t head_off = (size_t)(h / s->kv_mul) * hs;

		for (int t = 0; t <= pos; t++) {
			const float *k = keys + (size_t)t * s->kv_dim + head_off;
			float score = 0.0f;

			for (int i = 0; i < hs; i++)
				score += qh[i] * k[i];
			score /= sqrtf(hs);
			att[t] = score;
		}
		softmax(att, pos + 1);
		memset(xb, 0, hs * sizeof(float));
		for (int t = 0; t <= pos; t++) {
			const float *v = values + (size_t)t * s->kv_dim + head_off;
			float a = att[t];

			for (int i = 0; i < hs; i++)
				xb[i] += a * v[i];
		}
	}
}

static void residual_add(float *x, const float *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] += d[i];
}

static void attention_block(CpuState *s, int l, int n, int pos)
{
	const Config *c = &s->c;
	const Weights *w = &s->model->weights;
	int dim = c->dim, kv_dim = s->kv_dim;
	size_t ldd = (size_t)l * dim * dim, ldk = (size_t)l * dim * kv_dim;
	float *kc = layer_cache(s, s->key_cache, l, pos);
	float *vc = layer_cache(s, s->value_cache, l, pos);

	/* qkv holds its norm and rope, as the OpenCL backend's fused kernel does. */
	trace_span_begin(SPAN_QKV, l);
	trace_span_begin(SPAN_ATTN_NORM, l);
	for (int b = 0; b < n; b++)
		rmsnorm(s->xb + (size_t)b * dim, s->x + (size_t)b * dim,
			w->rms_att_weight + (size_t)l * dim, dim);
	trace_span_end(SPAN_ATTN_NORM, l);

	/* k and v land straight in the cache: the batch's rows are consecutive. */
	matmul_fused((Proj[]){ { s->q, w->wq + ldd, dim }, { kc, w->wk + ldk, kv_dim },
			       { vc, w->wv + ldk, kv_dim } }, 3, s->xb, dim, n);

	trace_span_begin(SPAN_ROPE, l);
	for (int b = 0; b < n; b++)
		rope(s->q + (size_t)b * dim, kc + (size_t)b * kv_dim, dim, kv_dim,
		     s->head_size, pos + b);
	trace_span_end(SPAN_ROPE, l);
	trace_span_end(SPAN_QKV, l);

	trace_span_begin(SPAN_ATTENTION, l);
	for (int b = 0; b < n; b++)
		attend(s, l, pos + b, s->q + (size_t)b * dim, s->xb + (size_t)b * dim);
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

static int cpu_forward(void *state, const int *tokens, int n, int pos,
		       float *logits, InferError *err)
{
	CpuState *s = state;
	const Config *c = &s->c;
	const Weights *w = &s->model->weights;
	int dim = c->dim;
	float *last;

	if (n < 1 || n > CPU_MAX_BATCH || pos < 0 || pos > c->seq_len - n)
		return infer_fail(err, "cpu forward: %d tokens at position %d do not fit "
				  "(batch limit %d, seq_len %d)", n, pos, CPU_MAX_BATCH, c->seq_len);
	for (int b = 0; b < n; b++)
		if (tokens[b] < 0 || tokens[b] >= c->vocab_size)
			return infer_fail(err, "token id %d is outside the model's vocabulary (%d)",
					  tokens[b], c->vocab_size);

	trace_span_begin(SPAN_EMBED, LAYER_NONE);
	for (int b = 0; b < n; b++)
		memcpy(s->x + (size_t)b * dim,
		       w->token_embedding_table + (size_t)tokens[b] * dim, dim * sizeof(float));
	trace_span_end(SPAN_EMBED, LAYER_NONE);

	for (int l = 0; l < c->n_layers; l++) {
		trace_span_begin(SPAN_LAYER, l);
		attention_block(s, l, n, pos);
		ffn_block(s, l, n);
		trace_span_end(SPAN_LAYER, l);
	}

	/* Only the last position's logits are wanted. */
	last = s->x + (size_t)(n - 1) * dim;
	trace_span_begin(SPAN_LOGITS, LAYER_NONE);
	trace_span_begin(SPAN_FINAL_NORM, LAYER_NONE);
	rmsnorm(last, last, w->rms_final_weight, dim);
	trace_span_end(SPAN_FINAL_NORM, LAYER_NONE);
	matmul(logits, last, w->wcls, dim, c->vocab_size, 1);
	trace_span_end(SPAN_LOGITS, LAYER_NONE);
	return 0;
}

static void cpu_destroy(void *state)
{
	CpuState *s = state;

	if (!s)
		return;
	pool_free(POOL_KV_CACHE, s->kv_block, s->kv_bytes);
	pool_free(POOL_ACTIVATIONS, s->block, s->block_bytes);
	pool_free(POOL_ACTIVATIONS, s, sizeof(*s));
}

/* Carves the activation block: widths in floats per batch row. */
static void carve_activations(CpuState *s)
{
	size_t dim = (size_t)s->c.dim, hidden = (size_t)s->c.hidden_dim;
	float *p = s->block;

	s->x = p;    p += CPU_MAX_BATCH * dim;
	s->xb = p;   p += CPU_MAX_BATCH * dim;
	s->xb2 = p;  p += CPU_MAX_BATCH * dim;
	s->q = p;    p += CPU_MAX_BATCH * dim;
	s->hb = p;   p += CPU_MAX_BATCH * hidden;
	s->hb2 = p;  p += CPU_MAX_BATCH * hidden;
	s->att = p;
}

static int cpu_create(const Model *m, const BackendOptions *opt, void **state,
		      InferError *err)
{
	const Config *c = &m->config;
	CpuState *s = pool_alloc(POOL_ACTIVATIONS, sizeof(*s));
	size_t dim = (size_t)c->dim, hidden = (size_t)c->hidden_dim;
	size_t act_floats, kv_floats;

	*state = NULL;
	if (!s)
		return infer_fail(err, "cpu backend: out of memory");
	s->model = m;
	s->c = *c;
	s->head_size = c->dim / c->n_heads;
	s->kv_dim = c->dim * c->n_kv_heads / c->n_heads;
	s->kv_mul = c->n_heads / c->n_kv_heads;

	/* Sizes are bounded by config_validate, so these cannot overflow. */
	act_floats = CPU_MAX_BATCH * (4 * dim + 2 * hidden) + (size_t)c->n_heads * c->seq_len;
	kv_floats = (size_t)c->n_layers * c->seq_len * s->kv_dim;
	s->block_bytes = act_floats * sizeof(float);
	s->kv_bytes = 2 * kv_floats * sizeof(float);
	s->block = pool_alloc(POOL_ACTIVATIONS, s->block_bytes);
	s->kv_block = pool_alloc(POOL_KV_CACHE, s->kv_bytes);
	if (!s->block || !s->kv_block) {
		cpu_destroy(s);
		return infer_fail(err, "cpu backend: cannot allocate %zu bytes of activations "
				  "and %zu bytes of kv cache", s->block_bytes, s->kv_bytes);
	}
	carve_activations(s);
	s->key_cache = s->kv_block;
	s->value_cache = s->kv_block + kv_floats;
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
};
