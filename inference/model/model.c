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
#include "model/model_gguf.h"
#include "base/pool.h"
#include "base/state.h"

#define HEADER_BYTES (7 * sizeof(int32_t))

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

/* Float counts of each tensor, llama2.c order; out[] gets the offsets. */
enum { T_EMB, T_RMS_ATT, T_WQ, T_WK, T_WV, T_WO, T_RMS_FFN, T_W1, T_W2, T_W3,
       T_RMS_FINAL, T_FREQ, T_WCLS, T_END };

static size_t tensor_offsets(const Config *c, size_t off[T_END + 1])
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
	size_t floats = tensor_offsets(c, off), bytes;

	if (floats == SIZE_MAX || __builtin_mul_overflow(floats, sizeof(float), &bytes))
		return SIZE_MAX;
	return bytes;
}

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
	tensor_offsets(c, off);
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

	tensor_offsets(c, off);
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
