/* backend.c - what every backend shares: the KV cache's shape and types,
 * a batch's checks. The backends call it; it calls none of them
 * (registry.c names them). */
#include "backend/backend.h"

const char *backend_kv_type_name(enum kv_type t)
{
	return t == KV_F16 ? "f16" : "f32";
}

size_t backend_kv_elem_bytes(enum kv_type t)
{
	return t == KV_F16 ? 2 : sizeof(float);
}

size_t backend_kv_pos_bytes(const Config *c, enum kv_type t)
{
	size_t kv_dim = (size_t)c->dim / c->n_heads * c->n_kv_heads;

	return (size_t)c->n_layers * kv_dim * 2 * backend_kv_elem_bytes(t);
}

void backend_kv_shape(const Config *c, const BackendOptions *opt, int *n_blocks,
		      int *block_size)
{
	if (opt && opt->kv_blocks > 0) {
		*n_blocks = opt->kv_blocks;
		*block_size = opt->kv_block_size > 0 ? opt->kv_block_size : 16;
	} else { /* the single-stream layout: position p is row p */
		*n_blocks = 1;
		*block_size = c->seq_len;
	}
}

static int check_seq(const Config *c, const BatchSeq *q, int n_blocks, int block_size,
		     InferError *err)
{
	int last;

	if (q->n < 1 || q->pos < 0 || q->pos > c->seq_len - q->n)
		return infer_fail(err, "forward: %d tokens at position %d do not fit seq_len %d",
				  q->n, q->pos, c->seq_len);
	for (int i = 0; i < q->n; i++)
		if (q->tokens[i] < 0 || q->tokens[i] >= c->vocab_size)
			return infer_fail(err, "token id %d is outside the model's vocabulary (%d)",
					  q->tokens[i], c->vocab_size);
	last = (q->pos + q->n - 1) / block_size;
	for (int b = 0; b <= last; b++)
		if (q->blocks[b] < 0 || q->blocks[b] >= n_blocks)
			return infer_fail(err, "forward: block %d of the table is %d, outside the "
					  "pool of %d", b, q->blocks[b], n_blocks);
	return 0;
}

int backend_check_batch(const Config *c, const BatchSeq *seqs, int nseqs, int max_tokens,
			int max_out, int n_blocks, int block_size, InferError *err)
{
	long tokens = 0;
	int out = 0;

	/* sizes first: nothing is read past a batch that is too big */
	for (int i = 0; i < nseqs; i++) {
		tokens += seqs[i].n > 0 ? seqs[i].n : 0;
		out += seqs[i].want_logits != 0;
	}
	if (nseqs < 1 || tokens > max_tokens)
		return infer_fail(err, "forward: a batch of %ld tokens (1..%d allowed)", tokens,
				  max_tokens);
	if (out > max_out)
		return infer_fail(err, "forward: %d sequences want logits (at most %d)", out, max_out);
	for (int i = 0; i < nseqs; i++)
		if (check_seq(c, &seqs[i], n_blocks, block_size, err))
			return -1;
	return 0;
}

int backend_max_batch(const BackendOps *ops, const void *state)
{
	int n = ops->batch_limit ? ops->batch_limit(state) : ops->max_batch;

	return n > 0 ? n : 1;
}
