/* alloc.c - the CPU backend's state: cpu_create sizes it for the model and
 * the options, allocates the activations, the KV cache and the attention
 * scratch, and packs the weights; cpu_destroy, the one cleanup path, frees
 * whatever of them it got.
 *
 * Weights: the matrices are packed into panels of 16 rows at create
 * (matmul.h), so 8 tokens share each weight load and no product needs a
 * sum across vector lanes. */
#include <omp.h>
#include <stdint.h>
#include "backend/cpu/alloc.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/phases.h"
#include "base/pool.h"
#include "base/trace.h"

/* Positions an attention tile converts into floats at most: 2 * 4096 * 256
 * floats a thread at the widest head; groups reaching past it read the
 * f16 rows query by query. */
#define ATT_SCRATCH_MAX 4096

void cpu_destroy(void *state)
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

int cpu_create(const Model *m, const BackendOptions *opt, void **state,
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
	s->halves_to_floats = halves_for_cpu();
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
