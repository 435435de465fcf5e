/* fuzz_tokenizer_encode.c - byte-pair encoding of arbitrary bytes (valid and
 * broken UTF-8) with a fixed tokenizer built here: the special tokens, all
 * 256 byte tokens, printable ASCII and a few merges including multi-byte
 * codepoints. Decoding must give the text back exactly.
 * fuzz-sources: inference/text/tokenizer.c inference/format/gguf.c inference/base/error.c inference/base/pool.c inference/base/state.c inference/base/usdt.c
 */
#include "fuzz_tokenizer_util.h"

static Tokenizer tok;

/* Appends one token record (score, length, bytes) to buf at *off. */
static void put_token(unsigned char *buf, size_t cap, size_t *off, float score, const char *piece)
{
	int32_t len = (int32_t)strlen(piece);

	FUZZ_CHECK(*off + 8 + (size_t)len <= cap);
	memcpy(buf + *off, &score, 4);
	memcpy(buf + *off + 4, &len, 4);
	memcpy(buf + *off + 8, piece, (size_t)len);
	*off += 8 + (size_t)len;
}

static void build_tokenizer(void)
{
	static const char *merges[] = {
		" t", "th", "he", "the", " the", "in", "ng", "ing", " a", "an", "and",
		"\xc3\xa9", "\xe6\x97\xa5", "\xe6\x9c\xac", "\xe6\x97\xa5\xe6\x9c\xac",
		"\xf0\x9f\x98\x80", " \xe6\x97\xa5\xe6\x9c\xac", "  ", "    ", "\n\n",
	};
	static unsigned char buf[16384];
	size_t off = 4;
	int32_t max_len = 16;
	char piece[8];
	InferError err;
	int fd;
	char path[64];

	memcpy(buf, &max_len, 4);
	put_token(buf, sizeof(buf), &off, 0, "<unk>");
	put_token(buf, sizeof(buf), &off, 0, "<s>");
	put_token(buf, sizeof(buf), &off, 0, "</s>");
	for (int b = 0; b < 256; b++) {
		snprintf(piece, sizeof(piece), "<0x%02X>", b);
		put_token(buf, sizeof(buf), &off, 0, piece);
	}
	for (int c = 0x20; c < 0x7f; c++) {
		piece[0] = (char)c;
		piece[1] = '\0';
		put_token(buf, sizeof(buf), &off, -1000.0f, piece);
	}
	put_token(buf, sizeof(buf), &off, -1000.0f, "\n");
	for (size_t i = 0; i < sizeof(merges) / sizeof(merges[0]); i++)
		put_token(buf, sizeof(buf), &off, -(float)i, merges[i]);
	fd = fuzz_memfd(buf, off);
	FUZZ_CHECK(fd >= 0);
	fuzz_fd_path(fd, path, sizeof(path));
	if (tokenizer_load(&tok, path, &err) < 0) {
		fprintf(stderr, "fuzz_tokenizer_encode: %s\n", err.msg);
		abort();
	}
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;

	if (!tok.vocab)
		build_tokenizer();
	text = fuzz_strdup(data, size);
	if (!text)
		return 0;
	/* this tokenizer can encode everything: failure is a bug */
	FUZZ_CHECK(fuzz_encode_check(&tok, text, 1) == 1);
	free(text);
	return 0;
}
