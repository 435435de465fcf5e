/* constrain.c - structured output at the token level (see constrain.h). */
#include "serve/constrain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The token's text, or NULL for one that never comes (control, empty). */
static const char *text_of(const Tokenizer *t, int prev, int token)
{
	const char *p;

	if (token < 0 || token >= t->vocab_size || (t->control && t->control[token]))
		return NULL;
	p = tokenizer_decode(t, prev, token);
	return *p ? p : NULL;
}

int vocab_index_build(VocabIndex *vi, const Tokenizer *t, InferError *err)
{
	int count[256] = { 0 }, at[256];

	memset(vi, 0, sizeof(*vi));
	vi->ids = malloc((size_t)(t->vocab_size ? t->vocab_size : 1) * sizeof(int));
	if (!vi->ids)
		return infer_fail(err, "out of memory for the vocabulary index");
	for (int i = 0; i < t->vocab_size; i++) {
		const char *p = text_of(t, -1, i);

		if (p)
			count[(unsigned char)p[0]]++;
	}
	for (int b = 0; b < 256; b++) {
		vi->start[b + 1] = vi->start[b] + count[b];
		at[b] = vi->start[b];
	}
	for (int i = 0; i < t->vocab_size; i++) {
		const char *p = text_of(t, -1, i);

		if (p)
			vi->ids[at[(unsigned char)p[0]]++] = i;
	}
	return 0;
}

void vocab_index_free(VocabIndex *vi)
{
	free(vi->ids);
	memset(vi, 0, sizeof(*vi));
}

int constraint_init(Constraint *c, const char *schema_text, InferError *err)
{
	char msg[200];

	memset(c, 0, sizeof(*c));
	if (json_schema_compile_text(schema_text, &c->schema, msg, sizeof(msg)) < 0)
		return infer_fail(err, "response_format: %s", msg);
	json_match_init(&c->m, c->schema);
	return 0;
}

void constraint_free(Constraint *c)
{
	json_schema_free(c->schema);
	c->schema = NULL;
}

/* m's frames in use only: the rest is never read. */
static void copy_match(JsonMatch *to, const JsonMatch *from)
{
	to->depth = from->depth;
	to->done = from->done;
	memcpy(to->f, from->f, (size_t)from->depth * sizeof(from->f[0]));
}

int constraint_allows(const Constraint *c, const Tokenizer *t, int prev, int token)
{
	const char *p = text_of(t, prev, token);
	JsonMatch m;

	if (!p)
		return 0;
	copy_match(&m, &c->m);
	return json_match_bytes(&m, c->schema, p, strlen(p));
}

void constraint_mask(const Constraint *c, const Tokenizer *t, const VocabIndex *vi, int prev,
		     const float *from, float *logits)
{
	JsonMatch first, m;

	for (int i = 0; i < t->vocab_size; i++)
		logits[i] = -INFINITY;
	if (prev == TOKEN_BOS) { /* texts lose a leading space: the index does not hold */
		for (int i = 0; i < t->vocab_size; i++)
			if (constraint_allows(c, t, prev, i))
				logits[i] = from[i];
		return;
	}
	for (int b = 1; b < 256; b++) {
		char byte = (char)b;

		if (vi->start[b] == vi->start[b + 1])
			continue;
		copy_match(&first, &c->m);
		if (!json_match_bytes(&first, c->schema, &byte, 1))
			continue;
		for (int k = vi->start[b]; k < vi->start[b + 1]; k++) {
			int id = vi->ids[k];
			const char *p = tokenizer_decode(t, prev, id);

			copy_match(&m, &first);
			if (json_match_bytes(&m, c->schema, p + 1, strlen(p + 1)))
				logits[id] = from[id];
		}
	}
}

int constraint_take(Constraint *c, const char *text)
{
	return json_match_bytes(&c->m, c->schema, text, strlen(text)) ? 0 : -1;
}
