/* forward.c - the OpenCL backend: the forward pass on an OpenCL device.
 *
 * Weights are uploaded once, all into one buffer; the key/value cache and
 * every activation stay on the device. One forward enqueues a write of the
 * batch's per-token metadata and its kernels on one in-order queue without
 * blocking, and syncs exactly once: the blocking read of the logits. The
 * KV cache is a pool of blocks per layer (see kvcache.h); attention reads
 * each sequence's positions through its block table.
 *
 * backend/opencl/ by role: this file creates and destroys the state
 * (cl_state.h), lays a batch's metadata out, runs a forward and holds the
 * ops table; device.c picks the device and builds the programs, buffers.c
 * uploads the weights and makes the buffers, enqueue.c enqueues the
 * kernels (kernels/, cl_layout.h) and reads their device times.
 *
 * Two ways to launch (enum cl_launch), chosen per forward:
 * - forward (the default on CPU devices while no tracer wants op detail):
 *   the `forward` kernel runs the whole pass in one launch, its work-groups
 *   taking each phase's tasks from shared counters (10_forward.cl). Each
 *   launch on PoCL wakes its worker threads: 33 launches a token cost more
 *   than the phases' work. A model whose embedding or classifier has
 *   another type than its layers runs the kernel for the layers only,
 *   between the embed and logits kernels of those types' programs (the
 *   span_launch `layers`: three launches).
 * - phases (the default elsewhere, and on CPU devices for every forward
 *   while op_begin is attached): 5 kernels per layer plus embed and
 *   logits, each phase fused so launches stay few:
 *   qkv_rope   = attn rmsnorm + q/k/v projection + RoPE + kv-cache store
 *   attention  = scores + softmax + weighted values
 *   matmul_add = wo (or w2) projection + residual add
 *   ffn_up     = ffn rmsnorm + w1/w3 projection + SwiGLU
 *   logits     = final rmsnorm + classifier (last token only)
 * Both run the same per-task code, so their results are bit-identical.
 * The kernels are built for one matrix type (WTYPE); a model whose
 * embedding or classifier has another type than its layers (llama.cpp's
 * Q4_0 files keep token_embd in Q8_0) gets a program per type, embed and
 * logits from theirs.
 *
 * Spans: on this backend an op span times the host's enqueue of the
 * kernels it launches; their device times come from the kernel records,
 * which the tracer joins to the spans (cl_kernel_span_kind). The host's
 * one wait for the device is a span of its own, sync. Only spans that
 * launch something are fired: a forward launch is forward{sync} and one
 * kernel; phases are forward{embed, layer{qkv, attention, attn_out, ffn},
 * logits, sync}, the norms and RoPE inside the kernels of their phase; a
 * layers launch is forward{embed, logits, sync} and three kernels.
 * The forward's span_end says which (trace_forward_launch). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/opencl/buffers.h"
#include "backend/opencl/device.h"
#include "backend/opencl/enqueue.h"

/* ---- create / destroy ---- */

static void cl_destroy(void *state)
{
	ClState *s = state;

	if (!s)
		return;
	if (s->queue)
		clFinish(s->queue);
	for (int i = 0; i < s->nsubs; i++)
		clReleaseMemObject(s->subs[i]);
	for (int i = 0; i < s->nbufs; i++) {
		clReleaseMemObject(s->bufs[i].mem);
		pool_note_free(s->bufs[i].pool, (uint64_t)(uintptr_t)s->bufs[i].mem,
			       s->bufs[i].bytes, s->bufs[i].bytes);
	}
	for (int i = 0; i < FN_COUNT; i++)
		if (s->fn[i])
			clReleaseKernel(s->fn[i]);
	if (s->prog_cls && s->prog_cls != s->prog_emb && s->prog_cls != s->prog)
		clReleaseProgram(s->prog_cls);
	if (s->prog_emb && s->prog_emb != s->prog)
		clReleaseProgram(s->prog_emb);
	if (s->prog)
		clReleaseProgram(s->prog);
	if (s->queue)
		clReleaseCommandQueue(s->queue);
	if (s->ctx)
		clReleaseContext(s->ctx);
	free(s->bufs);
	free(s->subs);
	free(s->woff);
	free(s->layers);
	free(s->events);
	free(s->recs);
	free(s->host_meta);
	free(s);
}

static int cl_create(const Model *m, const BackendOptions *opt, void **state,
		     InferError *err)
{
	const Config *c = &m->config;
	ClState *s;

	*state = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return infer_fail(err, "out of memory for the opencl backend");
	s->c = c;
	if (model_layer_type(m, &s->wtype, err)) {   /* the layers' kernels are built for one */
		char why[sizeof(err->msg)];

		snprintf(why, sizeof(why), "%s", err ? err->msg : "");
		free(s);
		return infer_fail(err, "opencl backend: %s (the cpu backend, -b cpu, runs any mix)",
				  why);
	}
	s->emb_type = m->weights.token_embedding_table.type;
	s->cls_type = m->weights.wcls.type;
	s->one_type = s->emb_type == s->wtype && s->cls_type == s->wtype;
	backend_kv_shape(c, opt, &s->n_blocks, &s->block_size);
	s->kv_type = opt ? opt->kv_type : KV_F32;
	s->kv_elem = backend_kv_elem_bytes(s->kv_type);
	s->max_out = opt && opt->max_seqs > 0 ? opt->max_seqs : 1;
	if (s->max_out > CL_MAX_BATCH)
		s->max_out = CL_MAX_BATCH;
	s->tab_cap = CL_MAX_BATCH * ((c->seq_len + s->block_size - 1) / s->block_size);
	s->meta_ints = META_OUT + s->max_out + s->tab_cap;
	s->host_meta = calloc((size_t)s->meta_ints, sizeof(int));
	s->cap_bufs = 16;
	s->cap_subs = 8 * c->n_layers + 3;
	s->max_events = 5 * c->n_layers + 2;
	s->bufs = calloc(s->cap_bufs, sizeof(*s->bufs));
	s->subs = calloc(s->cap_subs, sizeof(*s->subs));
	s->layers = calloc(c->n_layers, sizeof(*s->layers));
	s->events = calloc(s->max_events, sizeof(*s->events));
	s->recs = calloc(s->max_events, sizeof(*s->recs));
	if (!s->bufs || !s->subs || !s->layers || !s->events || !s->recs || !s->host_meta) {
		cl_destroy(s);
		return infer_fail(err, "out of memory for the opencl backend");
	}
	if (setup_device(s, opt, err) || upload_model(s, m, err)) {
		cl_destroy(s);
		return -1;
	}
	*state = s;
	return 0;
}

/* Fills the staging copy of meta: per token its id, position, pool row and
 * block-table start; the logits tokens; the tables. Returns the token
 * count; *n_out gets the number of logits rows. */
static int fill_meta(ClState *s, const BatchSeq *seqs, int nseqs, int *n_out)
{
	int *m = s->host_meta, *btab = m + META_OUT + s->max_out;
	int n = 0, tab = 0, bs = s->block_size;

	*n_out = 0;
	for (int i = 0; i < nseqs; i++) {
		const BatchSeq *q = &seqs[i];
		int nb = (q->pos + q->n - 1) / bs + 1;

		memcpy(btab + tab, q->blocks, (size_t)nb * sizeof(int));
		for (int t = 0; t < q->n; t++, n++) {
			int p = q->pos + t;

			m[META_TOKENS + n] = q->tokens[t];
			m[META_POS + n] = p;
			m[META_SLOT + n] = q->blocks[p / bs] * bs + p % bs;
			m[META_TAB + n] = tab;
		}
		tab += nb;
		if (q->want_logits)
			m[META_OUT + (*n_out)++] = n - 1;
	}
	return n;
}

/* Auto runs the forward kernel on CPU devices unless a tracer wants op
 * detail (then every op span must launch its own kernel to have device
 * time of its own): for the whole pass, or for the layers of a model of
 * more than one matrix type (setup_device refuses --cl-launch forward
 * there). The stories110M shape as Q4_0 with a Q8_0 embedding decoded at
 * 162.9 tok/s with layers launches against 117.2 with phases (fwdbench,
 * medians of 5 interleaved rounds, PoCL on a Zen 3). */
static enum span_launch forward_launch(const ClState *s)
{
	int kernel = s->want == CL_LAUNCH_AUTO ? s->cpu_device && !trace_op_detail_wanted()
					       : s->want == CL_LAUNCH_FORWARD;

	if (!kernel)
		return LAUNCH_PHASES;
	return s->one_type ? LAUNCH_FORWARD : LAUNCH_LAYERS;
}

static int cl_forward_batch(void *state, const BatchSeq *seqs, int nseqs,
			    float *logits, InferError *err)
{
	ClState *s = state;
	int rc, n, n_out;

	if (backend_check_batch(s->c, seqs, nseqs, s->max_batch, s->max_out, s->n_blocks,
				s->block_size, err))
		return -1;
	s->profiling = trace_kernels_wanted();
	s->nevents = 0;
	s->launch = forward_launch(s);
	trace_forward_launch(s->launch);
	n = fill_meta(s, seqs, nseqs, &n_out);
	rc = enqueue_forward(s, n, n_out, err);
	if (!rc)
		rc = finish_forward(s, n_out, logits, err);
	if (rc)
		clFinish(s->queue); /* meta must not be read after we return */
	else if (s->profiling)
		report_kernels(s);
	release_events(s);
	return rc;
}

static int cl_forward(void *state, const int *tokens, int n, int pos,
		      float *logits, InferError *err)
{
	ClState *s = state;
	BatchSeq q = { tokens, n, pos, (const int[]){ 0 }, 1 };

	if (s->n_blocks != 1 || s->block_size != s->c->seq_len)
		return infer_fail(err, "opencl: single-stream calls need the single-stream KV layout");
	return cl_forward_batch(state, &q, 1, logits, err);
}

static int cl_batch_limit(const void *state)
{
	return ((const ClState *)state)->max_batch;
}

const BackendOps backend_opencl = {
	.name = "opencl",
	.create = cl_create,
	.forward = cl_forward,
	.destroy = cl_destroy,
	.max_batch = CL_MAX_BATCH,
	.batch_limit = cl_batch_limit,
	.forward_batch = cl_forward_batch,
};
