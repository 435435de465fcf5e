/* enqueue.c - the OpenCL backend's kernels enqueued: each kernel's
 * arguments and work sizes, a forward's launches in their op spans, its
 * one sync, and the kernels' device times after it. */
#include <stdint.h>
#include "backend/opencl/device.h"
#include "backend/opencl/enqueue.h"

/* Work-items per group of the matrix kernels, each a 16-row panel
 * (backend/panels.h): 64 rows a group, as many as the 4-row items had when
 * 16 of them read memory fastest among 1..64 on PoCL's CPU device. */
#define MAT_LOCAL 4
/* With more than one token on a CPU device, each group's staging (all its
 * tokens normed and quantized again) costs as much as its products: groups
 * of 16 items ran an 8-token 65,536 x 768 Q8_0 product at 67-70 GMAC/s
 * against 33-48 with 4 (PoCL on a Zen 3, best of 19 launches), and 8 served
 * streams of the stories110M shape as Q4_0 with a Q8_0 embedding (phases
 * launches) 1.27x faster. Small matrices keep GROUPS_MIN_BATCH groups for
 * the two threads to share. */
#define MAT_LOCAL_BATCH 16
#define EMBED_LOCAL 16 /* work-items of the embed kernel's groups: a column each */

/* Kernel arguments as a list of (size, pointer) pairs; a NULL pointer
 * with a size is a __local buffer of that many bytes. */
struct arg_pair {
	size_t size;
	const void *val;
};
#define ARG(v) sizeof(v), &(v)
#define LOCAL_ARG(bytes) (bytes), NULL
#define SET_ARGS(k, err, ...)                                               \
	set_args((k), (err), (const struct arg_pair[]){ __VA_ARGS__ },       \
		 sizeof((const struct arg_pair[]){ __VA_ARGS__ }) / sizeof(struct arg_pair))

static int set_args(cl_kernel k, InferError *err, const struct arg_pair *a, int n)
{
	for (int i = 0; i < n; i++) {
		cl_int rc = clSetKernelArg(k, i, a[i].size, a[i].val);
		if (rc != CL_SUCCESS)
			return infer_fail(err, "opencl: setting argument %d failed (CL error %d)",
					  i, (int)rc);
	}
	return 0;
}

/* Work-group size for a matrix kernel of `items` work-items: the largest
 * power of two <= max_local that still gives min_groups groups, so PoCL's
 * two threads get near-equal shares (5 groups split 3:2, 18 split 9:9). */
static size_t pick_local(size_t items, size_t max_local, size_t min_groups)
{
	size_t local = max_local;

	while (local > 1 && items / local < min_groups)
		local /= 2;
	return local;
}
/* Every work-group of the matrix kernels re-stages (and re-normalizes) its
 * tokens, so the logits kernel, with ~2000 panels, uses big groups: 512
 * rows a group used ~15% less CPU than 64 on a 32000-row classifier. */
#define GROUPS_MIN 16
#define GROUPS_MIN_BATCH 8
#define LOGITS_LOCAL_MAX 32
#define LOGITS_GROUPS_MIN 32

/* Work-items per group of a matrix kernel over items panels for n tokens. */
static size_t matrix_local(const ClState *s, size_t items, int n)
{
	if (n > 1 && s->cpu_device)
		return pick_local(items, MAT_LOCAL_BATCH, GROUPS_MIN_BATCH);
	return pick_local(items, MAT_LOCAL, GROUPS_MIN);
}

/* Enqueues fn; with profiling on it keeps the event and what it was. */
static int launch(ClState *s, enum cl_fn fn, enum cl_kernel_id id, int layer,
		  cl_uint dims, const size_t *global, const size_t *local,
		  InferError *err)
{
	cl_event *ev = NULL;
	cl_int rc;

	if (s->profiling) {
		if (s->nevents == s->max_events)
			return infer_fail(err, "opencl: more kernels than event slots");
		ev = &s->events[s->nevents];
	}
	rc = clEnqueueNDRangeKernel(s->queue, s->fn[fn], dims, NULL, global, local, 0, NULL, ev);
	if (rc != CL_SUCCESS)
		return infer_fail(err, "opencl: enqueue %s failed (CL error %d)",
				  cl_fn_names[fn], (int)rc);
	if (ev) {
		s->recs[s->nevents] = (struct cl_kernel_record){
			.kernel_id = id, .queue = 0, .layer = layer };
		s->nevents++;
	}
	return 0;
}

static int run_embed(ClState *s, int n, InferError *err)
{
	int dim = s->c->dim;
	size_t global[2] = { round_up(dim, EMBED_LOCAL), n }, local[2] = { EMBED_LOCAL, 1 };

	if (SET_ARGS(s->fn[FN_EMBED], err, { ARG(s->meta) }, { ARG(s->emb) },
		     { ARG(s->x) }, { ARG(dim) }))
		return -1;
	return launch(s, FN_EMBED, KERNEL_EMBED, LAYER_NONE, 2, global, local, err);
}

static int run_qkv(ClState *s, int l, int n, InferError *err)
{
	const Config *c = s->c;
	ClLayer *L = &s->layers[l];
	int dim = c->dim, hs = c->dim / c->n_heads, kv = c->n_kv_heads * hs;
	int pos_off = META_POS, slot_off = META_SLOT;
	size_t items = (dim + 2 * kv + PANEL_ROWS - 1) / PANEL_ROWS;
	size_t local = matrix_local(s, items, n);
	size_t global = round_up(items, local);
	size_t xs = staged_bytes(s->wtype, (size_t)n, dim);

	if (SET_ARGS(s->fn[FN_QKV], err, { ARG(s->x) }, { ARG(L->rms_att) }, { ARG(L->wqkv) },
		     { ARG(s->q) }, { ARG(L->kcache) }, { ARG(L->vcache) }, { ARG(s->rope) },
		     { ARG(s->meta) }, { ARG(pos_off) }, { ARG(slot_off) }, { ARG(n) }, { ARG(dim) },
		     { ARG(kv) }, { ARG(hs) }, { ARG(s->block_size) }, { LOCAL_ARG(xs) }))
		return -1;
	return launch(s, FN_QKV, KERNEL_QKV, l, 1, &global, &local, err);
}

static int run_attention(ClState *s, int l, int n, InferError *err)
{
	const Config *c = s->c;
	ClLayer *L = &s->layers[l];
	int dim = c->dim, hs = c->dim / c->n_heads, kv = c->n_kv_heads * hs;
	int kv_mul = c->n_heads / c->n_kv_heads;
	int pos_off = META_POS, tab_off = META_TAB, btab_off = META_OUT + s->max_out;
	size_t global[2] = { c->n_heads, n }, local[2] = { 1, 1 };
	size_t att = (size_t)c->seq_len * sizeof(float);

	if (SET_ARGS(s->fn[FN_ATTENTION], err, { ARG(s->q) }, { ARG(L->kcache) },
		     { ARG(L->vcache) }, { ARG(s->att_out) }, { ARG(s->meta) }, { ARG(pos_off) },
		     { ARG(tab_off) }, { ARG(btab_off) }, { ARG(s->block_size) }, { ARG(dim) },
		     { ARG(kv) }, { ARG(hs) }, { ARG(kv_mul) }, { LOCAL_ARG(att) }))
		return -1;
	return launch(s, FN_ATTENTION, KERNEL_ATTENTION, l, 2, global, local, err);
}

/* x += w @ in, w is (rows = dim, k). */
static int run_matmul_add(ClState *s, cl_mem in, cl_mem w, int k, enum cl_kernel_id id,
			  int l, int n, InferError *err)
{
	int rows = s->c->dim;
	size_t items = (rows + PANEL_ROWS - 1) / PANEL_ROWS;
	size_t local = matrix_local(s, items, n);
	size_t global = round_up(items, local);
	size_t xs = staged_bytes(s->wtype, (size_t)n, k);

	if (SET_ARGS(s->fn[FN_MATMUL_ADD], err, { ARG(in) }, { ARG(w) }, { ARG(s->x) },
		     { ARG(n) }, { ARG(k) }, { ARG(rows) }, { LOCAL_ARG(xs) }))
		return -1;
	return launch(s, FN_MATMUL_ADD, id, l, 1, &global, &local, err);
}

static int run_ffn_up(ClState *s, int l, int n, InferError *err)
{
	ClLayer *L = &s->layers[l];
	int dim = s->c->dim, hid = s->c->hidden_dim;
	size_t items = (hid + PANEL_ROWS - 1) / PANEL_ROWS; /* a panel of w1 and of w3 each */
	size_t local = matrix_local(s, items, n);
	size_t global = round_up(items, local);
	size_t xs = staged_bytes(s->wtype, (size_t)n, dim);

	if (SET_ARGS(s->fn[FN_FFN_UP], err, { ARG(s->x) }, { ARG(L->rms_ffn) }, { ARG(L->w13) },
		     { ARG(s->hb) }, { ARG(n) }, { ARG(dim) }, { ARG(hid) }, { LOCAL_ARG(xs) }))
		return -1;
	return launch(s, FN_FFN_UP, KERNEL_FFN_UP, l, 1, &global, &local, err);
}

static int run_logits(ClState *s, int n_out, InferError *err)
{
	int dim = s->c->dim, vocab = s->c->vocab_size, out_off = META_OUT;
	size_t items = (vocab + 2 * PANEL_ROWS - 1) / (2 * PANEL_ROWS); /* two panels each */
	size_t local = pick_local(items, LOGITS_LOCAL_MAX, LOGITS_GROUPS_MIN);
	size_t global = round_up(items, local);
	size_t xs = staged_bytes(s->cls_type, (size_t)n_out, dim);

	if (SET_ARGS(s->fn[FN_LOGITS], err, { ARG(s->x) }, { ARG(s->rms_final) }, { ARG(s->wcls) },
		     { ARG(s->logits) }, { ARG(s->meta) }, { ARG(out_off) }, { ARG(n_out) },
		     { ARG(dim) }, { ARG(vocab) }, { LOCAL_ARG(xs) }))
		return -1;
	return launch(s, FN_LOGITS, KERNEL_LOGITS, LAYER_NONE, 1, &global, &local, err);
}

/* The whole forward, logits included, in one launch of `groups` one-item
 * work-groups (10_forward.cl); with embed 0 and n_out 0, its layers only. */
static int run_forward(ClState *s, int n, int n_out, int embed, InferError *err)
{
	const Config *c = s->c;
	int pos_off = META_POS, slot_off = META_SLOT, tab_off = META_TAB, out_off = META_OUT;
	int btab_off = META_OUT + s->max_out;
	cl_ulong kv_stride = s->kv_stride;
	size_t global = s->groups, local = 1;
	size_t width = c->hidden_dim > c->dim ? c->hidden_dim : c->dim;
	size_t xs = staged_bytes(s->wtype, (size_t)n, width);
	size_t att = (size_t)c->seq_len * sizeof(float);

	if (SET_ARGS(s->fn[FN_FORWARD], err, { ARG(s->weights) }, { ARG(s->woff_mem) },
		     { ARG(s->kcache) }, { ARG(s->vcache) }, { ARG(kv_stride) }, { ARG(s->rope) },
		     { ARG(s->meta) }, { ARG(s->x) }, { ARG(s->q) }, { ARG(s->att_out) },
		     { ARG(s->hb) }, { ARG(s->logits) }, { ARG(s->sync) }, { ARG(n) }, { ARG(n_out) },
		     { ARG(c->n_layers) }, { ARG(c->dim) }, { ARG(c->hidden_dim) },
		     { ARG(c->n_heads) }, { ARG(c->n_kv_heads) }, { ARG(c->vocab_size) },
		     { ARG(s->block_size) }, { ARG(pos_off) }, { ARG(slot_off) }, { ARG(tab_off) },
		     { ARG(btab_off) }, { ARG(out_off) }, { ARG(embed) }, { LOCAL_ARG(xs) },
		     { LOCAL_ARG(att) }))
		return -1;
	return launch(s, FN_FORWARD, KERNEL_FORWARD, LAYER_NONE, 1, &global, &local, err);
}

/* One layer's phase kernels, each enqueued inside its op span; every span
 * begun is ended even when an enqueue fails. */
static int run_layer(ClState *s, int l, int n, InferError *err)
{
	ClLayer *L = &s->layers[l];
	int rc;

	trace_span_begin(SPAN_QKV, l);
	rc = run_qkv(s, l, n, err);
	trace_span_end(SPAN_QKV, l);
	if (rc)
		return rc;

	trace_span_begin(SPAN_ATTENTION, l);
	rc = run_attention(s, l, n, err);
	trace_span_end(SPAN_ATTENTION, l);
	if (rc)
		return rc;

	trace_span_begin(SPAN_ATTN_OUT, l);
	rc = run_matmul_add(s, s->att_out, L->wo, s->c->dim, KERNEL_ATTN_OUT, l, n, err);
	trace_span_end(SPAN_ATTN_OUT, l);
	if (rc)
		return rc;

	trace_span_begin(SPAN_FFN, l);
	rc = run_ffn_up(s, l, n, err);
	if (!rc)
		rc = run_matmul_add(s, s->hb, L->w2, s->c->hidden_dim, KERNEL_FFN_DOWN, l, n, err);
	trace_span_end(SPAN_FFN, l);
	return rc;
}

void report_kernels(ClState *s)
{
	for (int i = 0; i < s->nevents; i++) {
		struct cl_kernel_record *r = &s->recs[i];
		cl_ulong t[4] = { 0, 0, 0, 0 };
		const cl_profiling_info what[4] = {
			CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
			CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END,
		};
		for (int j = 0; j < 4; j++)
			clGetEventProfilingInfo(s->events[i], what[j], sizeof(t[j]), &t[j], NULL);
		r->queued_ns = t[0];
		r->submit_ns = t[1];
		r->start_ns = t[2];
		r->end_ns = t[3];
	}
	for (int i = 0; i < s->nevents; i++)
		s->recs[i].forward_kernels = (uint32_t)s->nevents;
	if (s->nevents > 0)
		trace_kernels(s->recs, (uint32_t)s->nevents);
}

void release_events(ClState *s)
{
	for (int i = 0; i < s->nevents; i++)
		clReleaseEvent(s->events[i]);
	s->nevents = 0;
}

int enqueue_forward(ClState *s, int n, int n_out, InferError *err)
{
	int rc;
	cl_int crc = clEnqueueWriteBuffer(s->queue, s->meta, CL_FALSE, 0,
					  (size_t)s->meta_ints * sizeof(int), s->host_meta,
					  0, NULL, NULL);

	if (crc != CL_SUCCESS)
		return cl_fail(err, "clEnqueueWriteBuffer", crc);
	if (s->launch == LAUNCH_FORWARD)
		return run_forward(s, n, n_out, 1, err);
	trace_span_begin(SPAN_EMBED, LAYER_NONE);
	rc = run_embed(s, n, err);
	trace_span_end(SPAN_EMBED, LAYER_NONE);
	if (!rc && s->launch == LAUNCH_LAYERS)
		return run_forward(s, n, 0, 0, err);
	for (int l = 0; !rc && l < s->c->n_layers; l++) {
		trace_span_begin(SPAN_LAYER, l);
		rc = run_layer(s, l, n, err);
		trace_span_end(SPAN_LAYER, l);
	}
	return rc;
}

int finish_forward(ClState *s, int n_out, float *logits, InferError *err)
{
	cl_int crc;

	if (n_out > 0 && s->launch != LAUNCH_FORWARD) {
		int rc;

		trace_span_begin(SPAN_LOGITS, LAYER_NONE);
		rc = run_logits(s, n_out, err);
		trace_span_end(SPAN_LOGITS, LAYER_NONE);
		if (rc)
			return rc;
	}
	trace_span_begin(SPAN_SYNC, LAYER_NONE);
	crc = n_out > 0 ? clEnqueueReadBuffer(s->queue, s->logits, CL_TRUE, 0,
					      (size_t)n_out * s->c->vocab_size * sizeof(float),
					      logits, 0, NULL, NULL)
			: clFinish(s->queue);
	trace_span_end(SPAN_SYNC, LAYER_NONE);
	return crc == CL_SUCCESS ? 0 : cl_fail(err, "clEnqueueReadBuffer", crc);
}
