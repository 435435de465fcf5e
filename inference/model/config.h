/* config.h - a model's shape (Config), its checks, and the llama2.c
 * checkpoint's fp32 layout that bounds every format's weights. */
#ifndef INFER_CONFIG_H
#define INFER_CONFIG_H

#include <stddef.h>
#include "base/error.h"

typedef struct {
	int dim;        /* transformer width */
	int hidden_dim; /* ffn width */
	int n_layers;
	int n_heads;    /* query heads */
	int n_kv_heads; /* key/value heads; < n_heads means grouped-query attention */
	int vocab_size; /* always positive here; the file's sign is in shared_classifier */
	int seq_len;    /* max positions */
	int shared_classifier; /* 1 when the file's vocab_size was positive */
	/* RMSNorm's epsilon and RoPE's base, as the file states them (GGUF's
	 * llama.attention.layer_norm_rms_epsilon, llama.rope.freq_base); 0:
	 * llama2.c's 1e-5 and 10000 (its checkpoints state neither). Read
	 * them through config_norm_eps and config_rope_theta. */
	float norm_eps;
	float rope_theta;
} Config;

static inline float config_norm_eps(const Config *c)
{
	return c->norm_eps > 0 ? c->norm_eps : 1e-5f;
}

static inline float config_rope_theta(const Config *c)
{
	return c->rope_theta > 0 ? c->rope_theta : 10000.0f;
}

/* Validates header values alone (dims positive, divisible, sizes bounded). */
int config_validate(const Config *c, InferError *err);

/* The tensors of a llama2.c checkpoint, in its order. */
enum { T_EMB, T_RMS_ATT, T_WQ, T_WK, T_WV, T_WO, T_RMS_FFN, T_W1, T_W2, T_W3,
       T_RMS_FINAL, T_FREQ, T_WCLS, T_END };

/* Float offsets of each tensor in that order (off[T_END]: the total, or
 * SIZE_MAX on overflow); returns the total. */
size_t config_layout(const Config *c, size_t off[T_END + 1]);

/* Bytes of fp32 weights the file must hold after the header for c. */
size_t config_weights_bytes(const Config *c);

#endif
