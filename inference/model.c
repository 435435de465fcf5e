/* model.c - maps and validates llama2.c checkpoints.
 *
 * The file is a 7 x int32 header followed by fp32 tensors in a fixed order
 * (see model.h). Nothing from the header is trusted: every size is bounded
 * and computed with overflow checks before a pointer is formed. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "model.h"
#include "pool.h"
#include "state.h"

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

static void point_weights(Model *m)
{
	const Config *c = &m->config;
	const float *base = (const float *)((const char *)m->map + HEADER_BYTES);
	size_t off[T_END + 1];
	Weights *w = &m->weights;

	tensor_offsets(c, off);
	w->token_embedding_table = base + off[T_EMB];
	w->rms_att_weight = base + off[T_RMS_ATT];
	w->wq = base + off[T_WQ];
	w->wk = base + off[T_WK];
	w->wv = base + off[T_WV];
	w->wo = base + off[T_WO];
	w->rms_ffn_weight = base + off[T_RMS_FFN];
	w->w1 = base + off[T_W1];
	w->w2 = base + off[T_W2];
	w->w3 = base + off[T_W3];
	w->rms_final_weight = base + off[T_RMS_FINAL];
	w->wcls = c->shared_classifier ? w->token_embedding_table : base + off[T_WCLS];
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
					 POOL_WEIGHTS, 0);
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

int model_load(Model *m, const char *path, InferError *err)
{
	struct stat st;
	size_t need;
	int fd;

	memset(m, 0, sizeof(*m));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return infer_fail(err, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return infer_fail(err, "%s: not a regular file", path);
	}
	if ((uint64_t)st.st_size < HEADER_BYTES) {
		close(fd);
		return infer_fail(err, "%s: %lld bytes is shorter than the 28-byte header",
				  path, (long long)st.st_size);
	}
	m->map_size = (size_t)st.st_size;
	m->map = mmap(NULL, m->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m->map == MAP_FAILED) {
		memset(m, 0, sizeof(*m));
		return infer_fail(err, "%s: mmap failed: %s", path, strerror(errno));
	}
	config_from_header(&m->config, (const int32_t *)m->map);
	if (config_validate(&m->config, err) < 0) {
		char why[sizeof(err->msg)];

		snprintf(why, sizeof(why), "%s", err ? err->msg : "");
		munmap(m->map, m->map_size);
		memset(m, 0, sizeof(*m));
		return infer_fail(err, "%s: bad header: %s", path, why);
	}
	need = config_weights_bytes(&m->config) + HEADER_BYTES;
	if (m->map_size < need) {
		size_t have = m->map_size;

		munmap(m->map, m->map_size);
		memset(m, 0, sizeof(*m));
		return infer_fail(err, "%s: truncated: header needs %zu bytes, file has %zu",
				  path, need, have);
	}
	point_weights(m);
	pool_note_alloc(POOL_WEIGHTS, (uintptr_t)m->map, m->map_size, mapped_bytes(m->map_size));
	register_tensors(&m->config);
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
	memset(m, 0, sizeof(*m));
}
