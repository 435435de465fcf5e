/* forward.c - the CPU backend: the reference forward pass, llama2.c's
 * run.c math.
 *
 * A call handles a batch of tokens from one or more sequences: every phase
 * runs over the whole batch before the next, so one forward fires one span
 * per layer, and each weight row is read once per call for every token.
 * Keys and values live in a paged cache (see kvcache.h); each token finds
 * its sequence's earlier positions through that sequence's block table.
 *
 * backend/cpu/ by role: this file lays the batch out, runs the forward and
 * holds the ops table; phases.c cuts the forward into phases and their
 * tiles, threads.c runs them on the threads, attention.c and ops.c (norms,
 * RoPE, the embedding, f16 conversions) are what tiles compute, matmul.c,
 * matmul_kernel.c and quantize_kernel.c the products and their input;
 * alloc.c creates and destroys the state (state.h); arch.h is what the ISA
 * gets of its own.
 *
 * Batch invariance: each output element of a matrix product is one
 * multiply-add chain over its row, whatever the batch (matmul.h);
 * attention sums over its own positions in order, its dot products in 16
 * vector lanes and then the lanes in a fixed tree. */
#include "backend/cpu/alloc.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/threads.h"
#include "base/trace.h"

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

const BackendOps backend_cpu = {
	.name = "cpu",
	.create = cpu_create,
	.forward = cpu_forward,
	.destroy = cpu_destroy,
	.max_batch = CPU_MAX_BATCH,
	.forward_batch = cpu_forward_batch,
};
