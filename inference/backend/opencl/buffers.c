/* buffers.c - the OpenCL backend's device buffers: every weight packed
 * (backend/panels.h) into one buffer, the sub-buffers the phase kernels
 * take (views, not counted), the RoPE table, the KV cache and the
 * activations; each buffer counted in its pool (pool.h) as it is made. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "backend/opencl/buffers.h"
#include "backend/opencl/cl_layout.h"
#include "format/gguf.h"

/* A device buffer counted in pool, filled from host when src is non-NULL.
 * The KV cache counts in POOL_KV_CACHE, as on the CPU backend, so that pool
 * means the same whatever the backend; everything else in POOL_DEVICE. */
static int dev_buffer_in(ClState *s, enum pool_id pool, size_t bytes, const void *src,
			 cl_mem *out, InferError *err)
{
	cl_int rc;
	cl_mem mem;

	if (s->nbufs == s->cap_bufs)
		return infer_fail(err, "opencl: internal buffer table full");
	mem = clCreateBuffer(s->ctx, CL_MEM_READ_WRITE, bytes, NULL, &rc);
	if (!mem)
		return cl_fail(err, "clCreateBuffer", rc);
	s->bufs[s->nbufs++] = (ClBuffer){ mem, bytes, pool };
	pool_note_alloc(pool, (uint64_t)(uintptr_t)mem, bytes, bytes);
	*out = mem;
	if (src) {
		rc = clEnqueueWriteBuffer(s->queue, mem, CL_TRUE, 0, bytes, src, 0, NULL, NULL);
		if (rc != CL_SUCCESS)
			return cl_fail(err, "clEnqueueWriteBuffer", rc);
	}
	return 0;
}

static int dev_buffer(ClState *s, size_t bytes, const void *src, cl_mem *out,
		      InferError *err)
{
	return dev_buffer_in(s, POOL_DEVICE, bytes, src, out, err);
}

/* Elements off.. (n of them, each elem bytes) of parent as a buffer of its
 * own, for the phase kernels' arguments; off * elem is a multiple of
 * s->align floats. */
static int sub_buffer(ClState *s, cl_mem parent, size_t off, size_t n, size_t elem, cl_mem *out,
		      InferError *err)
{
	cl_buffer_region r = { off * elem, n * elem };
	cl_int rc;

	if (s->nsubs == s->cap_subs)
		return infer_fail(err, "opencl: internal sub-buffer table full");
	*out = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &rc);
	if (!*out)
		return cl_fail(err, "clCreateSubBuffer", rc);
	s->subs[s->nsubs++] = *out;
	return 0;
}

/* A row-major matrix of width n for upload_packed: rows of src, in its
 * stored type. */
typedef struct {
	const void *src;
	int rows;
} MatrixPart;

/* 4-byte words of a packed (d, n) matrix of type t: the weights buffer is
 * counted in floats, and every packed size is a multiple of 4. */
static size_t packed_words(WeightType t, int d, int n)
{
	return packed_bytes(t, d, n) / sizeof(float);
}

/* Bytes of one stored row of n values of type t (GGUF's layout). */
static size_t row_bytes(WeightType t, int n)
{
	return (size_t)ggml_type_bytes((uint32_t)t, (uint64_t)n);
}

/* Writes matrices of type t packed for the panel kernels (backend/panels.h)
 * into the weights buffer at off (floats). fused: the parts' rows are one
 * matrix (wq, wk, wv as wqkv); else each part is packed on its own, one
 * after the other (w1 then w3). */
static int upload_packed(ClState *s, WeightType t, const MatrixPart *parts, int nparts, int n,
			 int fused, size_t off, InferError *err)
{
	size_t rows = 0, words = 0, rb = row_bytes(t, n);
	float *packed;
	char *concat = NULL;
	cl_int rc;

	for (int i = 0; i < nparts; i++) {
		rows += parts[i].rows;
		words += packed_words(t, parts[i].rows, n);
	}
	if (fused)
		words = packed_words(t, (int)rows, n);
	packed = malloc(words * sizeof(float));
	if (fused && packed)
		concat = malloc(rows * rb);
	if (!packed || (fused && !concat)) {
		free(packed);
		return infer_fail(err, "opencl: out of memory packing %zu rows", rows);
	}
	if (fused) {
		char *p = concat;

		for (int i = 0; i < nparts; p += (size_t)parts[i].rows * rb, i++)
			memcpy(p, parts[i].src, (size_t)parts[i].rows * rb);
		pack_matrix_typed(packed, t, concat, (int)rows, n);
	} else {
		float *p = packed;

		for (int i = 0; i < nparts; p += packed_words(t, parts[i].rows, n), i++)
			pack_matrix_typed(p, t, parts[i].src, parts[i].rows, n);
	}
	rc = clEnqueueWriteBuffer(s->queue, s->weights, CL_TRUE, off * sizeof(float),
				  words * sizeof(float), packed, 0, NULL, NULL);
	free(concat);
	free(packed);
	return rc == CL_SUCCESS ? 0 : cl_fail(err, "clEnqueueWriteBuffer", rc);
}

static int upload_vector(ClState *s, const float *src, size_t n, size_t off, InferError *err)
{
	cl_int rc = clEnqueueWriteBuffer(s->queue, s->weights, CL_TRUE, off * sizeof(float),
					 n * sizeof(float), src, 0, NULL, NULL);

	return rc == CL_SUCCESS ? 0 : cl_fail(err, "clEnqueueWriteBuffer", rc);
}

/* Floats of each weight as the kernels hold it, by woff index. */
static void weight_sizes(const ClState *s, size_t global[W_GLOBAL], size_t layer[W_PER_LAYER])
{
	const Config *c = s->c;
	int kv = c->n_kv_heads * (c->dim / c->n_heads);

	global[W_EMB] = packed_words(s->emb_type, c->vocab_size, c->dim);
	global[W_RMS_FINAL] = c->dim;
	global[W_CLS] = c->shared_classifier ? 0 : packed_words(s->cls_type, c->vocab_size, c->dim);
	layer[W_RMS_ATT] = layer[W_RMS_FFN] = c->dim;
	layer[W_QKV] = packed_words(s->wtype, c->dim + 2 * kv, c->dim);
	layer[W_WO] = packed_words(s->wtype, c->dim, c->dim);
	layer[W_W13] = 2 * packed_words(s->wtype, c->hidden_dim, c->dim);
	layer[W_W2] = packed_words(s->wtype, c->dim, c->hidden_dim);
}

/* Places every weight in the weights buffer (s->woff, s->weight_floats),
 * each at a multiple of s->align; a shared classifier is the embedding. */
static int plan_weights(ClState *s, InferError *err)
{
	const Config *c = s->c;
	size_t g[W_GLOBAL], l[W_PER_LAYER], at = 0;

	s->woff = calloc(W_GLOBAL + (size_t)c->n_layers * W_PER_LAYER, sizeof(*s->woff));
	if (!s->woff)
		return infer_fail(err, "out of memory for the opencl weight table");
	weight_sizes(s, g, l);
	for (int i = 0; i < W_GLOBAL; at += round_up(g[i], s->align), i++)
		s->woff[i] = at;
	if (c->shared_classifier)
		s->woff[W_CLS] = s->woff[W_EMB];
	for (int j = 0; j < c->n_layers; j++)
		for (int i = 0; i < W_PER_LAYER; at += round_up(l[i], s->align), i++)
			s->woff[W_GLOBAL + j * W_PER_LAYER + i] = at;
	s->weight_floats = at;
	return 0;
}

static size_t layer_off(const ClState *s, int l, int which)
{
	return s->woff[W_GLOBAL + l * W_PER_LAYER + which];
}

static int upload_layer(ClState *s, const Weights *w, int l, InferError *err)
{
	const Config *c = s->c;
	size_t dim = c->dim, hid = c->hidden_dim;
	size_t kv = (size_t)c->n_kv_heads * (c->dim / c->n_heads);
	const LayerWeights *lw = &w->layers[l];
	MatrixPart wo = { lw->wo.data, dim }, w2 = { lw->w2.data, dim };
	MatrixPart qkv[] = { { lw->wq.data, dim }, { lw->wk.data, kv }, { lw->wv.data, kv } };
	MatrixPart w13[] = { { lw->w1.data, hid }, { lw->w3.data, hid } };

	return upload_vector(s, tensor_f32(lw->rms_att), dim, layer_off(s, l, W_RMS_ATT), err) ||
	       upload_vector(s, tensor_f32(lw->rms_ffn), dim, layer_off(s, l, W_RMS_FFN), err) ||
	       upload_packed(s, s->wtype, qkv, 3, dim, 1, layer_off(s, l, W_QKV), err) ||
	       upload_packed(s, s->wtype, &wo, 1, dim, 0, layer_off(s, l, W_WO), err) ||
	       upload_packed(s, s->wtype, w13, 2, dim, 0, layer_off(s, l, W_W13), err) ||
	       upload_packed(s, s->wtype, &w2, 1, hid, 0, layer_off(s, l, W_W2), err);
}

/* The phase kernels take each weight, and each layer's KV cache, as a
 * buffer of its own: sub-buffers of the shared ones (not made when the
 * forward kernel, which takes the shared ones, is forced for every forward). */
static int split_buffers(ClState *s, InferError *err)
{
	const Config *c = s->c;
	size_t g[W_GLOBAL], lw[W_PER_LAYER];
	size_t kv_n = (size_t)s->n_blocks * s->block_size * c->n_kv_heads * (c->dim / c->n_heads);
	size_t f = sizeof(float);

	weight_sizes(s, g, lw);
	if (sub_buffer(s, s->weights, s->woff[W_EMB], g[W_EMB], f, &s->emb, err) ||
	    sub_buffer(s, s->weights, s->woff[W_RMS_FINAL], g[W_RMS_FINAL], f, &s->rms_final, err))
		return -1;
	if (c->shared_classifier)
		s->wcls = s->emb;
	else if (sub_buffer(s, s->weights, s->woff[W_CLS], g[W_CLS], f, &s->wcls, err))
		return -1;
	for (int l = 0; l < c->n_layers; l++) {
		ClLayer *L = &s->layers[l];
		cl_mem *part[W_PER_LAYER] = { &L->rms_att, &L->rms_ffn, &L->wqkv, &L->wo, &L->w13,
					      &L->w2 };

		for (int i = 0; i < W_PER_LAYER; i++)
			if (sub_buffer(s, s->weights, layer_off(s, l, i), lw[i], f, part[i], err))
				return -1;
		if (sub_buffer(s, s->kcache, l * s->kv_stride, kv_n, s->kv_elem, &L->kcache, err) ||
		    sub_buffer(s, s->vcache, l * s->kv_stride, kv_n, s->kv_elem, &L->vcache, err))
			return -1;
	}
	return 0;
}

/* RoPE (cos, sin) per position and head pair, with the reference's libm
 * calls so the device rotates by exactly the host's angles. */
static int upload_rope(ClState *s, InferError *err)
{
	const Config *c = s->c;
	int hs = c->dim / c->n_heads, pairs = hs / 2;
	size_t bytes = (size_t)c->seq_len * pairs * 2 * sizeof(float);
	float *tab = malloc(bytes ? bytes : 1);
	int rc;

	if (!tab)
		return infer_fail(err, "opencl: out of memory for the rope table");
	for (int p = 0; p < c->seq_len; p++)
		for (int i = 0; i < pairs; i++) {
			float freq = 1.0f / powf(config_rope_theta(c), (2 * i) / (float)hs);
			float val = p * freq;
			tab[((size_t)p * pairs + i) * 2] = cosf(val);
			tab[((size_t)p * pairs + i) * 2 + 1] = sinf(val);
		}
	rc = dev_buffer(s, bytes, tab, &s->rope, err);
	free(tab);
	return rc;
}

static int upload_weights(ClState *s, const Model *m, InferError *err)
{
	const Config *c = &m->config;
	MatrixPart emb = { m->weights.token_embedding_table.data, c->vocab_size };
	MatrixPart wcls = { m->weights.wcls.data, c->vocab_size };

	if (plan_weights(s, err) ||
	    dev_buffer(s, s->weight_floats * sizeof(float), NULL, &s->weights, err) ||
	    dev_buffer(s, (W_GLOBAL + (size_t)c->n_layers * W_PER_LAYER) * sizeof(cl_ulong),
		       s->woff, &s->woff_mem, err))
		return -1;
	/* the embedding is packed too, so a shared classifier is one copy */
	if (upload_packed(s, s->emb_type, &emb, 1, c->dim, 0, s->woff[W_EMB], err) ||
	    upload_vector(s, tensor_f32(m->weights.rms_final_weight), c->dim, s->woff[W_RMS_FINAL], err))
		return -1;
	if (!c->shared_classifier &&
	    upload_packed(s, s->cls_type, &wcls, 1, c->dim, 0, s->woff[W_CLS], err))
		return -1;
	for (int l = 0; l < c->n_layers; l++)
		if (upload_layer(s, &m->weights, l, err))
			return -1;
	return 0;
}

static int upload_weights_span(ClState *s, const Model *m, InferError *err)
{
	int rc;

	trace_span_begin(SPAN_PACK, LAYER_NONE);
	rc = upload_weights(s, m, err);
	trace_span_end(SPAN_PACK, LAYER_NONE);
	return rc;
}

/* The forward kernel's task counters, zeroed (the kernel leaves them so). */
static int sync_buffer(ClState *s, InferError *err)
{
	size_t bytes = SYNC_INTS(s->c->n_layers) * sizeof(int);
	int *zero = calloc(1, bytes);
	int rc;

	if (!zero)
		return infer_fail(err, "out of memory for the opencl sync counters");
	rc = dev_buffer(s, bytes, zero, &s->sync, err);
	free(zero);
	return rc;
}

int upload_model(ClState *s, const Model *m, InferError *err)
{
	const Config *c = &m->config;
	size_t f = sizeof(float), dim = c->dim, hid = c->hidden_dim;
	size_t kv = (size_t)c->n_kv_heads * (c->dim / c->n_heads);

	/* the KV cache counts in POOL_KV_CACHE, as on the cpu backend; a
	 * layer's part starts where a sub-buffer may */
	s->kv_stride = round_up((size_t)s->n_blocks * s->block_size * kv, s->align * f / s->kv_elem);
	if (upload_weights_span(s, m, err) || upload_rope(s, err) ||
	    dev_buffer_in(s, POOL_KV_CACHE, c->n_layers * s->kv_stride * s->kv_elem, NULL, &s->kcache, err) ||
	    dev_buffer_in(s, POOL_KV_CACHE, c->n_layers * s->kv_stride * s->kv_elem, NULL, &s->vcache, err) ||
	    (s->want != CL_LAUNCH_FORWARD && split_buffers(s, err)))
		return -1;
	return dev_buffer(s, (size_t)s->meta_ints * sizeof(int), NULL, &s->meta, err) ||
	       dev_buffer(s, CL_MAX_BATCH * dim * f, NULL, &s->x, err) ||
	       dev_buffer(s, CL_MAX_BATCH * dim * f, NULL, &s->q, err) ||
	       dev_buffer(s, CL_MAX_BATCH * dim * f, NULL, &s->att_out, err) ||
	       dev_buffer(s, CL_MAX_BATCH * hid * f, NULL, &s->hb, err) ||
	       dev_buffer(s, (size_t)s->max_out * c->vocab_size * f, NULL, &s->logits, err) ||
	       sync_buffer(s, err);
}
