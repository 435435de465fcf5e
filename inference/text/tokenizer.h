/* tokenizer.h - llama2.c tokenizer files: byte-pair encode and decode. */
#ifndef INFER_TOKENIZER_H
#define INFER_TOKENIZER_H

#include <stddef.h>
#include "base/error.h"

#define TOKEN_BOS 1
#define TOKEN_EOS 2
#define TOKENIZER_MAX_TURN_ENDS 8

typedef struct {
	char **vocab;          /* NUL-terminated pieces */
	float *scores;         /* merge priority: higher merges first */
	int *sorted;           /* ids ordered by strcmp of their pieces */
	int vocab_size;
	int max_token_length;  /* longest piece actually present */
	void *block;           /* one allocation holding all of the above */
	size_t block_bytes;
	/* Special tokens (unknown, control, user-defined), which
	 * tokenizer_encode_special finds in text, as llama.cpp does: */
	int *special;          /* (n_special) ids, longest text first */
	char **special_text;   /* (n_special) their texts as the vocabulary spells them */
	int n_special;
	unsigned char *control; /* (vocab_size) 1: a control token, which has no text */
	int turn_end[TOKENIZER_MAX_TURN_ENDS]; /* control tokens that end a chat turn, */
	int n_turn_end;                        /* "<|im_end|>" and the like: not EOS */
	void *special_block;   /* one allocation holding the special arrays */
} Tokenizer;

/* Reads every token in path (the file has no count: it runs to EOF). */
int tokenizer_load(Tokenizer *t, const char *path, InferError *err);
/* The tokenizer a GGUF file carries (tokenizer.ggml.*, the llama
 * SentencePiece model), as the llama2.c tokenizer of the same vocabulary. */
struct gguf;
int tokenizer_from_gguf(Tokenizer *t, const struct gguf *g, InferError *err);
void tokenizer_free(Tokenizer *t);

/* The id of piece, or -1. */
int tokenizer_lookup(const Tokenizer *t, const char *piece);

/* Encodes text as run.c does: optional BOS, the dummy-prefix " " token when
 * text is non-empty, UTF-8 codepoints (bytes + 3 when not in the vocab),
 * then greedy merges by score. tokens must hold strlen(text) + 3 ids. */
int tokenizer_encode(const Tokenizer *t, const char *text, int bos,
		     int *tokens, int *n_tokens, InferError *err);

/* tokenizer_encode, but each special token's text in text is that token,
 * as llama.cpp's tokenizer with parse_special: the text between them is
 * encoded piece by piece, each with its dummy-prefix space. tokens must
 * hold 2 * strlen(text) + 3 ids. */
int tokenizer_encode_special(const Tokenizer *t, const char *text, int bos, int *tokens,
			     int *n_tokens, InferError *err);

/* The vocabulary's text of special token id ("<s>"), or NULL. */
const char *tokenizer_special_text(const Tokenizer *t, int id);

/* The text of token after prev: a leading space is dropped after BOS and
 * "<0xNN>" pieces become that byte. Points into t (or static storage). */
const char *tokenizer_decode(const Tokenizer *t, int prev, int token);

/* False for pieces not worth printing: empty, or one ASCII control byte that
 * is not whitespace (run.c's safe_printf). Bytes >= 0x80 are kept because
 * byte-fallback tokens of a UTF-8 character must print to restore it. */
int piece_is_printable(const char *piece);

#endif
