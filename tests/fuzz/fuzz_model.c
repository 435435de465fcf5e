/* fuzz_model.c - the checkpoint loader: any bytes as a llama2.c .bin file.
 * fuzz-sources: inference/model.c inference/error.c inference/pool.c inference/state.c
 */
#include "fuzz_common.h"
#include "model.h"

/* Every tensor pointer must lie inside the mapping, whole. */
static void check_tensor(const Model *m, const float *p, size_t floats)
{
	const char *lo = m->map, *hi = (const char *)m->map + m->map_size;

	FUZZ_CHECK((const char *)p >= lo + 28);
	FUZZ_CHECK(floats <= (size_t)(hi - (const char *)p) / sizeof(float));
}

static void check_model(const Model *m)
{
	const Config *c = &m->config;
	const Weights *w = &m->weights;
	size_t dim = (size_t)c->dim, hid = (size_t)c->hidden_dim, L = (size_t)c->n_layers;
	size_t kv_dim = dim / (size_t)c->n_heads * (size_t)c->n_kv_heads;

	FUZZ_CHECK(config_validate(c, NULL) == 0);
	check_tensor(m, w->token_embedding_table, (size_t)c->vocab_size * dim);
	check_tensor(m, w->rms_att_weight, L * dim);
	check_tensor(m, w->wq, L * dim * dim);
	check_tensor(m, w->wk, L * kv_dim * dim);
	check_tensor(m, w->wv, L * kv_dim * dim);
	check_tensor(m, w->wo, L * dim * dim);
	check_tensor(m, w->rms_ffn_weight, L * dim);
	check_tensor(m, w->w1, L * hid * dim);
	check_tensor(m, w->w2, L * dim * hid);
	check_tensor(m, w->w3, L * hid * dim);
	check_tensor(m, w->rms_final_weight, dim);
	check_tensor(m, w->wcls, (size_t)c->vocab_size * dim);
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
		FUZZ_CHECK(m.map == NULL && err.msg[0] != '\0' && !strchr(err.msg, '\n'));
	}
	close(fd);
	return 0;
}
