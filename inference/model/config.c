/* config.c - a model's shape, checked before anything is sized from it:
 * every format's loader (model.c's llama2.c checkpoints, model_gguf.c's
 * GGUF files) fills a Config and calls config_validate, so the bounds are
 * written once and no loader calls back into another. */
#include <stdint.h>
#include "model/config.h"

/* Generous bounds: far beyond any model this engine runs, small enough that
 * products of them cannot overflow 64 bits before the explicit checks. */
#define MAX_DIM     (1 << 16)
#define MAX_HIDDEN  (1 << 18)
#define MAX_LAYERS  1024
#define MAX_HEADS   1024
#define MAX_VOCAB   (1 << 22)
#define MAX_SEQ     (1 << 20)

static int check_range(const char *name, int v, int max, InferError *err)
{
	if (v <= 0 || v > max)
		return infer_fail(err, "%s = %d is out of range (1..%d)", name, v, max);
	return 0;
}

int config_validate(const Config *c, InferError *err)
{
	if (check_range("dim", c->dim, MAX_DIM, err) ||
	    check_range("hidden_dim", c->hidden_dim, MAX_HIDDEN, err) ||
	    check_range("n_layers", c->n_layers, MAX_LAYERS, err) ||
	    check_range("n_heads", c->n_heads, MAX_HEADS, err) ||
	    check_range("n_kv_heads", c->n_kv_heads, MAX_HEADS, err) ||
	    check_range("vocab_size", c->vocab_size, MAX_VOCAB, err) ||
	    check_range("seq_len", c->seq_len, MAX_SEQ, err))
		return -1;
	if (c->dim % c->n_heads)
		return infer_fail(err, "dim %d is not a multiple of n_heads %d",
				  c->dim, c->n_heads);
	if (c->n_heads % c->n_kv_heads)
		return infer_fail(err, "n_heads %d is not a multiple of n_kv_heads %d",
				  c->n_heads, c->n_kv_heads);
	if (!(c->norm_eps >= 0 && c->norm_eps < 1e-2f))   /* NaN fails too */
		return infer_fail(err, "RMSNorm epsilon %g is not in [0, 0.01)", (double)c->norm_eps);
	if (!(c->rope_theta == 0 || (c->rope_theta >= 1 && c->rope_theta <= 1e9f)))
		return infer_fail(err, "RoPE base %g is not in [1, 1e9]", (double)c->rope_theta);
	/* RoPE rotates pairs inside a head. */
	if ((c->dim / c->n_heads) % 2)
		return infer_fail(err, "head size %d is odd", c->dim / c->n_heads);
	if (config_weights_bytes(c) == SIZE_MAX)
		return infer_fail(err, "weights of this shape would not fit in memory");
	return 0;
}

/* a += b * c elements, saturating to SIZE_MAX on overflow. */
static void add_elems(size_t *a, size_t b, size_t c)
{
	size_t prod;

	if (*a == SIZE_MAX || __builtin_mul_overflow(b, c, &prod) ||
	    __builtin_add_overflow(*a, prod, a))
		*a = SIZE_MAX;
}

size_t config_layout(const Config *c, size_t off[T_END + 1])
{
	size_t dim = (size_t)c->dim, hidden = (size_t)c->hidden_dim;
	size_t layers = (size_t)c->n_layers, vocab = (size_t)c->vocab_size;
	size_t head_size = dim / (size_t)c->n_heads;
	size_t kv_dim = head_size * (size_t)c->n_kv_heads;
	size_t n = 0;
	size_t count[T_END][2] = {
		[T_EMB] = { vocab, dim },
		[T_RMS_ATT] = { layers, dim },
		[T_WQ] = { layers, dim * dim },
		[T_WK] = { layers, dim * kv_dim },
		[T_WV] = { layers, dim * kv_dim },
		[T_WO] = { layers, dim * dim },
		[T_RMS_FFN] = { layers, dim },
		[T_W1] = { layers, dim * hidden },
		[T_W2] = { layers, hidden * dim },
		[T_W3] = { layers, dim * hidden },
		[T_RMS_FINAL] = { 1, dim },
		/* freq_cis_real and freq_cis_imag, unused: skipped */
		[T_FREQ] = { (size_t)c->seq_len, head_size },
		[T_WCLS] = { c->shared_classifier ? 0 : vocab, dim },
	};

	for (int t = 0; t < T_END; t++) {
		off[t] = n;
		add_elems(&n, count[t][0], count[t][1]);
	}
	off[T_END] = n;
	return n;
}

size_t config_weights_bytes(const Config *c)
{
	size_t off[T_END + 1];
	size_t floats = config_layout(c, off), bytes;

	if (floats == SIZE_MAX || __builtin_mul_overflow(floats, sizeof(float), &bytes))
		return SIZE_MAX;
	return bytes;
}

