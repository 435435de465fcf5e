/* model_gguf.c - GGUF files of the llama architecture as Models.
 *
 * The shape comes from the llama.* metadata, the vocabulary size from the
 * embedding. Every tensor the engine needs must be there with its exact
 * shape and a type it computes with; norms are F32, matrices F32, F16,
 * Q8_0, Q4_0, Q4_K or Q6_K, each as stored (nothing is converted here).
 * RMSNorm's epsilon and RoPE's base are the file's (Llama-3 says 1e-5 and
 * 500000); RoPE turns adjacent pairs of the whole head, unscaled, so a file
 * that asks for partial or scaled RoPE is refused, not run wrong. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "format/gguf.h"
#include "model/config.h"
#include "model/model_gguf.h"
#include "base/pool.h"
#include "base/state.h"

#define MAX_INT (1u << 30)

static int get_int(const struct gguf *g, const char *key, int required, int *out, InferError *err)
{
	uint64_t v = (uint64_t)*out;

	if (gguf_get_uint(g, key, required, MAX_INT, &v, err))
		return -1;
	*out = (int)v;
	return 0;
}

static int check_arch(const struct gguf *g, InferError *err)
{
	const char *arch;
	uint32_t len;

	if (gguf_get_str(g, "general.architecture", &arch, &len, err))
		return -1;
	if (len != 5 || memcmp(arch, "llama", 5)) {
		char name[65];

		return infer_fail(err, "architecture '%s' is not supported (only llama)",
				  gguf_clean(arch, len, name, sizeof(name)));
	}
	return 0;
}

/* RoPE scaling as llama.cpp reads it: type "none" never scales; "linear"
 * (also what an absent type means) divides positions by
 * llama.rope.scaling.factor, or, that key absent, by the older
 * llama.rope.scale_linear, 0 meaning none; other types (yarn, longrope)
 * are refused. The attention factor multiplies RoPE's cos and sin in any
 * type, and a rope_freqs tensor (Llama 3.1's frequency factors) changes
 * every angle: the engine runs with none of these. */
static int check_rope_scaling(const struct gguf *g, InferError *err)
{
	const char *key = "llama.rope.scaling.factor", *type = "linear";
	uint32_t len = 6;
	float factor = 0.0f, attn = 1.0f;
	int linear;

	if (gguf_find(g, "llama.rope.scaling.type") &&
	    gguf_get_str(g, "llama.rope.scaling.type", &type, &len, err))
		return -1;
	linear = len == 6 && !memcmp(type, "linear", 6);
	if (!linear && !(len == 4 && !memcmp(type, "none", 4)))
		return infer_fail(err, "llama.rope.scaling.type is '%.*s'; the engine has no RoPE scaling",
				  (int)len, type);
	if (!gguf_find(g, key))
		key = "llama.rope.scale_linear";
	if (gguf_get_f32(g, key, 0, &factor, err) ||
	    gguf_get_f32(g, "llama.rope.scaling.attn_factor", 0, &attn, err))
		return -1;
	if (linear && factor != 0.0f && factor != 1.0f)
		return infer_fail(err, "%s is %g; the engine has no RoPE scaling", key, (double)factor);
	if (attn != 1.0f)
		return infer_fail(err, "llama.rope.scaling.attn_factor is %g; the engine has no RoPE scaling",
				  (double)attn);
	if (gguf_tensor(g, "rope_freqs.weight"))
		return infer_fail(err, "tensor rope_freqs.weight scales RoPE's frequencies; the engine has "
				  "no RoPE scaling");
	return 0;
}

/* The norm's epsilon and RoPE's base are read (llama.cpp's defaults where
 * the file is silent); what the engine cannot compute is refused. */
static int read_constants(const struct gguf *g, Config *c, InferError *err)
{
	int head_size = c->dim / c->n_heads, rope_dims = head_size;

	c->norm_eps = 1e-5f;
	c->rope_theta = 10000.0f;
	if (gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", 0, &c->norm_eps, err) ||
	    gguf_get_f32(g, "llama.rope.freq_base", 0, &c->rope_theta, err) ||
	    get_int(g, "llama.rope.dimension_count", 0, &rope_dims, err))
		return -1;
	if (!(c->norm_eps > 0))
		return infer_fail(err, "llama.attention.layer_norm_rms_epsilon is %g, not above 0", (double)c->norm_eps);
	if (rope_dims != head_size)
		return infer_fail(err, "llama.rope.dimension_count %d is not the head size %d (partial RoPE "
				  "is not supported)", rope_dims, head_size);
	return check_rope_scaling(g, err);
}

static int read_config(const struct gguf *g, Config *c, InferError *err)
{
	const struct gguf_tensor *emb = gguf_tensor(g, "token_embd.weight");
	int vocab = 0;

	memset(c, 0, sizeof(*c));
	if (check_arch(g, err) || get_int(g, "llama.embedding_length", 1, &c->dim, err) ||
	    get_int(g, "llama.feed_forward_length", 1, &c->hidden_dim, err) ||
	    get_int(g, "llama.block_count", 1, &c->n_layers, err) ||
	    get_int(g, "llama.attention.head_count", 1, &c->n_heads, err) ||
	    get_int(g, "llama.context_length", 1, &c->seq_len, err))
		return -1;
	c->n_kv_heads = c->n_heads;
	if (get_int(g, "llama.attention.head_count_kv", 0, &c->n_kv_heads, err))
		return -1;
	if (!emb)
		return infer_fail(err, "tensor token_embd.weight is missing");
	if (emb->n_dims != 2 || emb->ne[1] > MAX_INT)
		return infer_fail(err, "tensor token_embd.weight is not a (vocab, dim) matrix");
	c->vocab_size = (int)emb->ne[1];
	if (get_int(g, "llama.vocab_size", 0, &vocab, err))
		return -1;
	if (vocab && vocab != c->vocab_size)
		return infer_fail(err, "llama.vocab_size %d differs from token_embd.weight's %d rows", vocab,
				  c->vocab_size);
	c->shared_classifier = gguf_tensor(g, "output.weight") == NULL;
	if (c->n_heads <= 0 || read_constants(g, c, err))
		return -1;
	return config_validate(c, err);
}

static int type_ok(const struct gguf_tensor *t, int matrix)
{
	if (t->type == GGML_F32)
		return 1;
	return matrix && (t->type == GGML_F16 || t->type == GGML_Q8_0 || t->type == GGML_Q4_0 ||
			  t->type == GGML_Q4_K || t->type == GGML_Q6_K);
}

/* The tensor called name, with rows x cols elements (rows 0: a vector of
 * cols), of a type the engine computes with. */
static int find(const struct gguf *g, const char *name, uint64_t rows, uint64_t cols, Tensor *out,
		InferError *err)
{
	const struct gguf_tensor *t = gguf_tensor(g, name);
	int matrix = rows != 0;

	if (!t)
		return infer_fail(err, "tensor %s is missing", name);
	if (t->n_dims != (matrix ? 2u : 1u) || t->ne[0] != cols || (matrix && t->ne[1] != rows))
		return infer_fail(err, "tensor %s has shape [%llu, %llu], expected [%llu, %llu]", name,
				  (unsigned long long)t->ne[0], (unsigned long long)(t->n_dims > 1 ? t->ne[1] : 1),
				  (unsigned long long)cols, (unsigned long long)(matrix ? rows : 1));
	if (!type_ok(t, matrix))
		return infer_fail(err, "tensor %s has type %s, which the engine does not compute with "
				  "(%s)", name, ggml_type_name(t->type), matrix ? "F32, F16, Q8_0, Q4_0, Q4_K, Q6_K" : "F32");
	*out = (Tensor){ .data = t->data, .type = (WeightType)t->type, .name = t->name };
	return 0;
}

static int find_layer(const struct gguf *g, const Config *c, int l, LayerWeights *lw, InferError *err)
{
	uint64_t dim = c->dim, hid = c->hidden_dim, kv = dim / c->n_heads * c->n_kv_heads;
	struct { const char *suffix; uint64_t rows, cols; Tensor *dst; } want[] = {
		{ "attn_norm", 0, dim, &lw->rms_att }, { "attn_q", dim, dim, &lw->wq },
		{ "attn_k", kv, dim, &lw->wk },        { "attn_v", kv, dim, &lw->wv },
		{ "attn_output", dim, dim, &lw->wo },  { "ffn_norm", 0, dim, &lw->rms_ffn },
		{ "ffn_gate", hid, dim, &lw->w1 },     { "ffn_down", dim, hid, &lw->w2 },
		{ "ffn_up", hid, dim, &lw->w3 },
	};
	char name[GGUF_NAME_MAX + 1];

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		snprintf(name, sizeof(name), "blk.%d.%s.weight", l, want[i].suffix);
		if (find(g, name, want[i].rows, want[i].cols, want[i].dst, err))
			return -1;
	}
	return 0;
}

static int find_weights(const struct gguf *g, const Config *c, Weights *w, InferError *err)
{
	if (find(g, "token_embd.weight", c->vocab_size, c->dim, &w->token_embedding_table, err) ||
	    find(g, "output_norm.weight", 0, c->dim, &w->rms_final_weight, err))
		return -1;
	if (c->shared_classifier)
		w->wcls = w->token_embedding_table;
	else if (find(g, "output.weight", c->vocab_size, c->dim, &w->wcls, err))
		return -1;
	w->layers = calloc((size_t)c->n_layers, sizeof(*w->layers));
	if (!w->layers)
		return infer_fail(err, "out of memory for %d layers", c->n_layers);
	for (int l = 0; l < c->n_layers; l++)
		if (find_layer(g, c, l, &w->layers[l], err))
			return -1;
	return 0;
}

/* The weight tree for tracers that attach late (state.h): every tensor of
 * the file as stored: (rows, cols), its type and its bytes in that type. */
static void register_tensors(const struct gguf *g)
{
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->tensors[i];
		uint32_t shape[4] = { 0 };

		for (uint32_t d = 0; d < t->n_dims; d++)   /* outermost first, as the tree shows */
			shape[d] = (uint32_t)t->ne[t->n_dims - 1 - d];
		state_add_tensor(t->name, shape, t->bytes, POOL_WEIGHTS, 0, t->type);
	}
}

int gguf_model(Model *m, const char *path, InferError *err)
{
	m->gguf = calloc(1, sizeof(*m->gguf));
	if (!m->gguf)
		return infer_fail(err, "%s: out of memory", path);
	if (gguf_parse(m->gguf, m->map, m->map_size, err) || read_config(m->gguf, &m->config, err) ||
	    find_weights(m->gguf, &m->config, &m->weights, err))
		return infer_prefix(err, "%s", path);
	register_tensors(m->gguf);
	return 0;
}

void model_gguf_free(Model *m)
{
	if (m->gguf) {
		gguf_free(m->gguf);
		free(m->gguf);
		m->gguf = NULL;
	}
}
