/* fuzz_tokenizer.c - the tokenizer file loader on arbitrary bytes, then
 * encode, decode, lookup and piece_is_printable on whatever it accepted.
 * fuzz-sources: inference/text/tokenizer.c inference/format/gguf.c inference/base/error.c inference/base/pool.c inference/base/state.c inference/base/usdt.c
 */
#include "fuzz_tokenizer_util.h"

static const char *texts[] = {
	"", "a", "hello world", "Once upon a time", " \n\t", "\xc3\xa9t\xc3\xa9",
	"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "\xf0\x9f\x98\x80!", "\xff\xfe\x80", "\xe6\x97",
};

static void check_loaded(const Tokenizer *t)
{
	FUZZ_CHECK(t->vocab_size > 0);
	for (int i = 0; i < t->vocab_size; i++) {
		const char *piece = t->vocab[i];
		int id = tokenizer_lookup(t, piece);

		FUZZ_CHECK(strlen(piece) <= (size_t)t->max_token_length);
		/* duplicates are allowed; the id found must carry the same piece */
		FUZZ_CHECK(id >= 0 && id < t->vocab_size && !strcmp(t->vocab[id], piece));
		(void)piece_is_printable(tokenizer_decode(t, TOKEN_BOS, i));
		(void)piece_is_printable(tokenizer_decode(t, 0, i));
	}
	FUZZ_CHECK(tokenizer_decode(t, 0, -1)[0] == '\0');
	FUZZ_CHECK(tokenizer_decode(t, 0, t->vocab_size)[0] == '\0');
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
		fuzz_encode_check(t, texts[i], 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	InferError err;
	Tokenizer t;
	int fd = fuzz_memfd(data, size);

	if (fd < 0)
		return 0;
	fuzz_fd_path(fd, path, sizeof(path));
	if (tokenizer_load(&t, path, &err) == 0) {
		check_loaded(&t);
		tokenizer_free(&t);
	} else {
		FUZZ_CHECK(t.block == NULL && err.msg[0] != '\0' && !strchr(err.msg, '\n'));
	}
	close(fd);
	return 0;
}
