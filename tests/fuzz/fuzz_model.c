/* fuzz_model.c - the model loader: any bytes as a llama2.c .bin or GGUF file.
 * fuzz-sources: inference/model/model.c inference/model/config.c inference/model/model_gguf.c inference/format/gguf.c inference/base/error.c inference/base/pool.c inference/base/state.c inference/base/usdt.c
 * fuzz-libs: -lm
 */
#include "fuzz_common.h"
#include "format/gguf.h"
#include "model/model.h"

/* Every tensor must lie inside the mapping, whole, in its type's bytes. */
static void check_tensor(const Model *m, Tensor t, size_t rows, size_t cols)
{
	const char *lo = m->map, *hi = (const char *)m->map + m->map_size, *p = t.data;
	uint64_t bytes = ggml_type_bytes((uint32_t)t.type, (uint64_t)rows * cols);

	FUZZ_CHECK(t.type == WEIGHT_F32 || t.type == WEIGHT_F16 || t.type == WEIGHT_Q8_0 || t.type == WEIGHT_Q4_0 ||
		   t.type == WEIGHT_Q4_K || t.type == WEIGHT_Q6_K);
	FUZZ_CHECK(bytes > 0 && t.name != NULL);
	FUZZ_CHECK(p >= lo + (m->gguf ? 24 : 28));
	FUZZ_CHECK(bytes <= (uint64_t)(hi - p));
}

static void check_model(const Model *m)
{
	const Config *c = &m->config;
	const Weights *w = &m->weights;
	size_t dim = (size_t)c->dim, hid = (size_t)c->hidden_dim;
	size_t kv_dim = dim / (size_t)c->n_heads * (size_t)c->n_kv_heads;

	FUZZ_CHECK(config_validate(c, NULL) == 0);
	check_tensor(m, w->token_embedding_table, (size_t)c->vocab_size, dim);
	check_tensor(m, w->rms_final_weight, 1, dim);
	check_tensor(m, w->wcls, (size_t)c->vocab_size, dim);
	for (int l = 0; l < c->n_layers; l++) {
		const LayerWeights *lw = &w->layers[l];

		check_tensor(m, lw->rms_att, 1, dim);
		check_tensor(m, lw->wq, dim, dim);
		check_tensor(m, lw->wk, kv_dim, dim);
		check_tensor(m, lw->wv, kv_dim, dim);
		check_tensor(m, lw->wo, dim, dim);
		check_tensor(m, lw->rms_ffn, 1, dim);
		check_tensor(m, lw->w1, hid, dim);
		check_tensor(m, lw->w2, dim, hid);
		check_tensor(m, lw->w3, hid, dim);
		FUZZ_CHECK(lw->rms_att.type == WEIGHT_F32 && lw->rms_ffn.type == WEIGHT_F32);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	InferError err;
	Model m;
	int fd = fuzz_memfd(data, size);

	if (fd < 0)
		return 0;
	fuzz_fd_path(fd, path, sizeof(path));
	if (model_load(&m, path, &err) == 0) {
		check_model(&m);
		model_free(&m);
	} else {
		/* A failure leaves m empty and says why in one line. */
		FUZZ_CHECK(m.map == NULL && m.gguf == NULL && err.msg[0] != '\0' && !strchr(err.msg, '\n'));
	}
	close(fd);
	return 0;
}
