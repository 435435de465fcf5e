/* logprobs_json.c - logprobs in OpenAI's shapes (see logprobs_json.h). */
#include "serve/logprobs_json.h"

#include <string.h>

/* The text token (generated token i's id, or an alternative to it) has
 * where generated token i stands. */
static const char *piece(const ServeRequest *r, const Tokenizer *t, int i, int token)
{
	const Seq *q = &r->seq;

	return t ? tokenizer_decode(t, q->tokens[q->n_prompt + i - 1], token) : "";
}

static float lp_of(const ServeRequest *r, int i, int k)
{
	return r->lp[(size_t)i * (size_t)(1 + r->lp_top) + (size_t)k];
}

static int alt_of(const ServeRequest *r, int i, int k)
{
	return r->lp_ids[(size_t)i * (size_t)r->lp_top + (size_t)k];
}

json_object *logprobs_completion(const ServeRequest *r, const Tokenizer *t, int from, int to,
				 size_t text_offset)
{
	json_object *o = json_object_new_object(), *toks = json_object_new_array(),
		    *lps = json_object_new_array(), *tops = json_object_new_array(),
		    *offs = json_object_new_array();

	for (int i = from; i < to; i++) {
		const char *p = piece(r, t, i, r->seq.tokens[r->seq.n_prompt + i]);
		json_object *top = json_object_new_object();

		json_object_array_add(toks, json_object_new_string(p));
		json_object_array_add(lps, json_object_new_double(lp_of(r, i, 0)));
		for (int k = 0; k < r->lp_top; k++)
			json_object_object_add(top, piece(r, t, i, alt_of(r, i, k)),
					       json_object_new_double(lp_of(r, i, 1 + k)));
		json_object_array_add(tops, top);
		json_object_array_add(offs, json_object_new_int64((int64_t)text_offset));
		text_offset += strlen(p);
	}
	json_object_object_add(o, "tokens", toks);
	json_object_object_add(o, "token_logprobs", lps);
	json_object_object_add(o, "top_logprobs", tops);
	json_object_object_add(o, "text_offset", offs);
	return o;
}

/* {"token", "logprob", "bytes"}: the text's UTF-8 bytes as numbers. */
static json_object *chat_entry(const char *text, float logprob)
{
	json_object *e = json_object_new_object(), *bytes = json_object_new_array();

	for (const unsigned char *b = (const unsigned char *)text; *b; b++)
		json_object_array_add(bytes, json_object_new_int(*b));
	json_object_object_add(e, "token", json_object_new_string(text));
	json_object_object_add(e, "logprob", json_object_new_double(logprob));
	json_object_object_add(e, "bytes", bytes);
	return e;
}

json_object *logprobs_chat(const ServeRequest *r, const Tokenizer *t, int from, int to)
{
	json_object *o = json_object_new_object(), *content = json_object_new_array();

	for (int i = from; i < to; i++) {
		int token = r->seq.tokens[r->seq.n_prompt + i];
		json_object *e, *top;

		if (t && t->control && t->control[token])
			continue;
		e = chat_entry(piece(r, t, i, token), lp_of(r, i, 0));
		top = json_object_new_array();
		for (int k = 0; k < r->lp_top; k++)
			json_object_array_add(top, chat_entry(piece(r, t, i, alt_of(r, i, k)),
							      lp_of(r, i, 1 + k)));
		json_object_object_add(e, "top_logprobs", top);
		json_object_array_add(content, e);
	}
	json_object_object_add(o, "content", content);
	json_object_object_add(o, "refusal", NULL);
	return o;
}
