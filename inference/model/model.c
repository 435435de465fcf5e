/* model.c - maps a model file and validates it: llama2.c checkpoints here,
 * GGUF files through model_gguf.c (by the file's magic).
 *
 * The file is a 7 x int32 header followed by fp32 tensors in a fixed order
 * (see model.h). Nothing from the header is trusted: every size is bounded
 * and computed with overflow checks before a pointer is formed. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "model/model.h"
#include "model/config.h"
#include "model/model_gguf.h"
#include "base/pool.h"
#include "base/state.h"

#define HEADER_BYTES (7 * sizeof(int32_t))

static Tensor f32_tensor(const float *p, const char *name)
{
	return (Tensor){ .data = p, .type = WEIGHT_F32, .name = name };
}

/* Every tensor of a llama2.c checkpoint, stacked over layers: layer l's is
 * l tensors on. */
static int point_weights(Model *m, InferError *err)
{
	const Config *c = &m->config;
	const float *base = (const float *)((const char *)m->map + HEADER_BYTES);
	size_t off[T_END + 1], dim = c->dim, hid = c->hidden_dim;
	size_t kv = dim / c->n_heads * c->n_kv_heads;
	Weights *w = &m->weights;

	w->layers = calloc((size_t)c->n_layers, sizeof(*w->layers));
	if (!w->layers)
		return infer_fail(err, "out of memory for %d layers", c->n_layers);
	config_layout(c, off);
	w->token_embedding_table = f32_tensor(base + off[T_EMB], "tok_embeddings");
	w->rms_final_weight = f32_tensor(base + off[T_RMS_FINAL], "rms_final");
	w->wcls = c->shared_classifier ? w->token_embedding_table : f32_tensor(base + off[T_WCLS], "classifier");
	for (size_t l = 0; l < (size_t)c->n_layers; l++) {
		LayerWeights *lw = &w->layers[l];

		lw->rms_att = f32_tensor(base + off[T_RMS_ATT] + l * dim, "layers.rms_att");
		lw->wq = f32_tensor(base + off[T_WQ] + l * dim * dim, "layers.wq");
		lw->wk = f32_tensor(base + off[T_WK] + l * kv * dim, "layers.wk");
		lw->wv = f32_tensor(base + off[T_WV] + l * kv * dim, "layers.wv");
		lw->wo = f32_tensor(base + off[T_WO] + l * dim * dim, "layers.wo");
		lw->rms_ffn = f32_tensor(base + off[T_RMS_FFN] + l * dim, "layers.rms_ffn");
		lw->w1 = f32_tensor(base + off[T_W1] + l * hid * dim, "layers.w1");
		lw->w2 = f32_tensor(base + off[T_W2] + l * dim * hid, "layers.w2");
		lw->w3 = f32_tensor(base + off[T_W3] + l * hid * dim, "layers.w3");
	}
	return 0;
}

/* The first of the layers' matrices whose type is (is_type) or is not
 * (!is_type) `type`, or NULL. */
static const Tensor *layer_matrix_typed(const Model *m, WeightType type, int is_type)
{
	for (int l = 0; l < m->config.n_layers; l++) {
		const LayerWeights *lw = &m->weights.layers[l];
		const Tensor *mats[] = { &lw->wq, &lw->wk, &lw->wv, &lw->wo, &lw->w1, &lw->w2, &lw->w3 };

		for (size_t i = 0; i < sizeof(mats) / sizeof(mats[0]); i++)
			if ((mats[i]->type == type) == is_type)
				return mats[i];
	}
	return NULL;
}

static const Tensor *layer_type_differs(const Model *m, WeightType type)
{
	return layer_matrix_typed(m, type, 0);
}

int model_layers_have(const Model *m, WeightType type)
{
	return layer_matrix_typed(m, type, 1) != NULL;
}

static int types_differ(const Tensor *t, const Tensor *first, const char *scope, InferError *err)
{
	return infer_fail(err, "tensor %s is %s but %s is %s: %s", t->name,
			  weight_type_name(t->type), first->name, weight_type_name(first->type), scope);
}

int model_layer_type(const Model *m, WeightType *type, InferError *err)
{
	const Tensor *first = &m->weights.layers[0].wq, *t = layer_type_differs(m, first->type);

	if (t)
		return types_differ(t, first, "the layers' matrices share one type here", err);
	*type = first->type;
	return 0;
}

int model_matrix_type(const Model *m, WeightType *type, InferError *err)
{
	const Weights *w = &m->weights;
	const Tensor *first = &w->token_embedding_table, *t = &w->wcls;

	if (t->type == first->type)
		t = layer_type_differs(m, first->type);
	if (t)
		return types_differ(t, first, "one matrix type per model here", err);
	*type = first->type;
	return 0;
}

int model_require_f32(const Model *m, const char *who, InferError *err)
{
	WeightType type;

	if (model_matrix_type(m, &type, err))
		return infer_prefix(err, "%s", who);
	if (type != WEIGHT_F32)
		return infer_fail(err, "%s: tensor %s is %s; F32 weights only", who,
				  m->weights.token_embedding_table.name, weight_type_name(type));
	return 0;
}

/* The weight tree for tracers that attach late (state.h): each tensor of
 * the checkpoint, stacked over layers, with its shape, in the weights pool. */
static void register_tensors(const Config *c)
{
	static const char *const names[T_END] = {
		"tok_embeddings", "layers.rms_att", "layers.wq", "layers.wk", "layers.wv", "layers.wo",
		"layers.rms_ffn", "layers.w1", "layers.w2", "layers.w3", "rms_final", NULL, "classifier",
	};
	uint32_t L = (uint32_t)c->n_layers, d = (uint32_t)c->dim, h = (uint32_t)c->hidden_dim;
	uint32_t v = (uint32_t)c->vocab_size, kv = d / (uint32_t)c->n_heads * (uint32_t)c->n_kv_heads;
	const uint32_t shapes[T_END][4] = {
		[T_EMB] = { v, d }, [T_RMS_ATT] = { L, d }, [T_WQ] = { L, d, d }, [T_WK] = { L, kv, d },
		[T_WV] = { L, kv, d }, [T_WO] = { L, d, d }, [T_RMS_FFN] = { L, d }, [T_W1] = { L, h, d },
		[T_W2] = { L, d, h }, [T_W3] = { L, h, d }, [T_RMS_FINAL] = { d }, [T_WCLS] = { v, d },
	};
	size_t off[T_END + 1];

	config_layout(c, off);
	for (int t = 0; t < T_END; t++)
		if (names[t] && off[t + 1] > off[t])
			state_add_tensor(names[t], shapes[t], (off[t + 1] - off[t]) * sizeof(float),
					 POOL_WEIGHTS, 0, WEIGHT_F32);
}

/* A mapping holds whole pages: what the weights pool reserves. */
static size_t mapped_bytes(size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (len + page - 1) / page * page;
}

static void config_from_header(Config *c, const int32_t h[7])
{
	c->dim = h[0];
	c->hidden_dim = h[1];
	c->n_layers = h[2];
	c->n_heads = h[3];
	c->n_kv_heads = h[4];
	c->shared_classifier = h[5] > 0;
	/* -INT32_MIN overflows; leave it negative so validation rejects it. */
	c->vocab_size = h[5] < 0 && h[5] != INT32_MIN ? -h[5] : h[5];
	c->seq_len = h[6];
}

/* The llama2.c checkpoint in m->map: its header, then the weights. */
static int legacy_model(Model *m, const char *path, InferError *err)
{
	size_t need;

	if (m->map_size < HEADER_BYTES)
		return infer_fail(err, "%s: %zu bytes is shorter than the 28-byte header", path, m->map_size);
	config_from_header(&m->config, (const int32_t *)m->map);
	if (config_validate(&m->config, err) < 0)
		return infer_prefix(err, "%s: bad header", path);
	need = config_weights_bytes(&m->config) + HEADER_BYTES;
	if (m->map_size < need)
		return infer_fail(err, "%s: truncated: header needs %zu bytes, file has %zu",
				  path, need, m->map_size);
	if (point_weights(m, err))
		return -1;
	register_tensors(&m->config);
	return 0;
}

static int map_file(Model *m, const char *path, InferError *err)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return infer_fail(err, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return infer_fail(err, "%s: not a regular file", path);
	}
	if (st.st_size < 4) {
		close(fd);
		return infer_fail(err, "%s: %lld bytes is shorter than any model header", path,
				  (long long)st.st_size);
	}
	m->map_size = (size_t)st.st_size;
	m->map = mmap(NULL, m->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m->map == MAP_FAILED) {
		m->map = NULL;
		return infer_fail(err, "%s: mmap failed: %s", path, strerror(errno));
	}
	return 0;
}

int model_load(Model *m, const char *path, InferError *err)
{
	int rc;

	memset(m, 0, sizeof(*m));
	if (map_file(m, path, err))
		return -1;
	rc = memcmp(m->map, "GGUF", 4) ? legacy_model(m, path, err) : gguf_model(m, path, err);
	if (rc) {
		munmap(m->map, m->map_size);
		state_forget_tensors(POOL_WEIGHTS);
		free(m->weights.layers);
		model_gguf_free(m);
		memset(m, 0, sizeof(*m));
		return -1;
	}
	pool_note_alloc(POOL_WEIGHTS, (uintptr_t)m->map, m->map_size, mapped_bytes(m->map_size));
	return 0;
}

void model_free(Model *m)
{
	if (m->map) {
		pool_note_free(POOL_WEIGHTS, (uintptr_t)m->map, m->map_size,
			       mapped_bytes(m->map_size));
		munmap(m->map, m->map_size);
		state_forget_tensors(POOL_WEIGHTS);
	}
	free(m->weights.layers);
	model_gguf_free(m);
	memset(m, 0, sizeof(*m));
}
