/* constrain.h - structured output at the token level (issue 58): a
 * request's JSON schema (jsonschema.h) decides which tokens may come next.
 *
 * The sampler first draws as usual; a token the schema allows is kept,
 * else the logits are masked to the allowed tokens and it draws again.
 * Either way the token comes from the distribution restricted to the
 * allowed ones (a draw kept with probability p_t, else one from the
 * rest renormalized, gives p_t / P_allowed), and greedy decoding gets the
 * most likely allowed token. The mask tries only tokens whose first byte
 * the schema allows, which the vocabulary index groups. Control tokens,
 * EOS among them, never come: the request ends where the value does. */
#ifndef INFER_CONSTRAIN_H
#define INFER_CONSTRAIN_H

#include "base/error.h"
#include "serve/jsonschema.h"
#include "text/tokenizer.h"

/* The vocabulary's text tokens by their text's first byte (after a token
 * that is not BOS, which strips a leading space). */
typedef struct {
	int *ids;
	int start[257];  /* ids[start[b] .. start[b + 1]) start with byte b */
} VocabIndex;

int vocab_index_build(VocabIndex *vi, const Tokenizer *t, InferError *err);
void vocab_index_free(VocabIndex *vi);

typedef struct {
	JsonSchema *schema;
	JsonMatch m;       /* after the tokens taken so far */
} Constraint;

/* Compiles text ("" or NULL: any JSON object) into c. */
int constraint_init(Constraint *c, const char *schema_text, InferError *err);
void constraint_free(Constraint *c);
/* Whether token, after prev, may come next. */
int constraint_allows(const Constraint *c, const Tokenizer *t, int prev, int token);
/* logits = from where allowed, -inf elsewhere (vocab entries). */
void constraint_mask(const Constraint *c, const Tokenizer *t, const VocabIndex *vi, int prev,
		     const float *from, float *logits);
/* The chosen token's text: 0 taken, -1 refused (it was not allowed). */
int constraint_take(Constraint *c, const char *text);

#endif
