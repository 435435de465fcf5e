/* fuzz_gguf.c - the GGUF reader and the tokenizer it carries: any bytes.
 * fuzz-sources: inference/format/gguf.c inference/text/tokenizer.c inference/base/error.c inference/base/pool.c inference/base/state.c inference/base/usdt.c
 */
#include "fuzz_common.h"
#include "format/gguf.h"
#include "text/tokenizer.h"

/* After a successful parse every lookup stays inside the buffer. */
static void check_parsed(const struct gguf *g, const uint8_t *data, size_t size)
{
	FUZZ_CHECK(g->alignment && !(g->alignment & (g->alignment - 1)) && g->data_offset <= size);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->tensors[i];
		const uint8_t *p = t->data;

		FUZZ_CHECK(p >= data + g->data_offset && t->bytes <= (uint64_t)(data + size - p));
		FUZZ_CHECK(t->offset % g->alignment == 0 && strlen(t->name) <= GGUF_NAME_MAX);
		FUZZ_CHECK(gguf_tensor(g, t->name) == t);
	}
	for (uint64_t i = 0; i < g->n_kv; i++)
		FUZZ_CHECK((const uint8_t *)g->kv[i].key >= data && g->kv[i].value <= data + size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gguf g;
	InferError err;
	Tokenizer t;

	if (gguf_parse(&g, data, size, &err)) {
		FUZZ_CHECK(g.kv == NULL && g.tensors == NULL && err.msg[0] && !strchr(err.msg, '\n'));
		return 0;
	}
	check_parsed(&g, data, size);
	if (tokenizer_from_gguf(&t, &g, &err) == 0) {
		int ids[64], n = 0;

		FUZZ_CHECK(t.vocab_size > 0);
		if (tokenizer_encode(&t, "a b", 1, ids, &n, &err) == 0)
			for (int i = 0; i < n; i++)
				FUZZ_CHECK(ids[i] >= 0 && ids[i] < t.vocab_size);
		tokenizer_free(&t);
	} else {
		FUZZ_CHECK(err.msg[0] && !strchr(err.msg, '\n'));
	}
	gguf_free(&g);
	return 0;
}
