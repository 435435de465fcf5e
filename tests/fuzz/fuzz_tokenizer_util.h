/* fuzz_tokenizer_util.h - checks shared by the two tokenizer harnesses. */
#ifndef FUZZ_TOKENIZER_UTIL_H
#define FUZZ_TOKENIZER_UTIL_H

#include "fuzz_common.h"
#include "text/tokenizer.h"

/* Encodes text and checks what tokenizer.h promises: at most strlen + 3 ids
 * (the caller's buffer size), each a valid id. With round_trip, decoding the
 * ids must give the text back (true for a tokenizer with all 256 byte tokens
 * "<0xNN>" at ids 3..258). Returns 0 when encoding failed cleanly. */
static inline int fuzz_encode_check(const Tokenizer *t, const char *text, int round_trip)
{
	size_t len = strlen(text), out_len = 0;
	int *ids = malloc((len + 3) * sizeof(int));
	char *back = malloc(len + 1);
	int n = -1;
	InferError err;

	FUZZ_CHECK(ids && back);
	if (tokenizer_encode(t, text, 1, ids, &n, &err) < 0) {
		FUZZ_CHECK(err.msg[0] != '\0');
		free(ids);
		free(back);
		return 0;
	}
	/* merges may swallow BOS when the file lets them (run.c does the same) */
	FUZZ_CHECK(n >= 1 && (size_t)n <= len + 3 && (!round_trip || ids[0] == TOKEN_BOS));
	for (int i = 0; i < n; i++)
		FUZZ_CHECK(ids[i] >= 0 && ids[i] < t->vocab_size);
	for (int i = 1; i < n && round_trip; i++) {
		const char *piece = tokenizer_decode(t, ids[i - 1], ids[i]);
		size_t pl = strlen(piece);

		/* a "<0x00>" piece decodes to an empty string: text has no NULs */
		FUZZ_CHECK(out_len + pl <= len);
		memcpy(back + out_len, piece, pl);
		out_len += pl;
	}
	if (round_trip) {
		FUZZ_CHECK(out_len == len);
		FUZZ_CHECK(memcmp(back, text, len) == 0);
	}
	free(ids);
	free(back);
	return 1;
}

#endif
