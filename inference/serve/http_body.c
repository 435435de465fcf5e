/* http_body.c - the completions' and chats' response bodies (see
 * http_impl.h): whole, or streamed as Server-Sent Events, choice by
 * choice, in OpenAI's shapes. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve/http_impl.h"
#include "serve/logprobs_json.h"
#include "text/tokenizer.h"

/* ---- completions: the response body, piece by piece ---- */

static const Tokenizer *tokenizer_of(const Call *k)
{
	const Engine *e = &k->h->srv->engine;

	return e->have_tokenizer ? &e->tokenizer : NULL;
}

static int generated(const Choice *c)
{
	return c->req->seq.n_tokens - c->req->seq.n_prompt;
}

/* Choice i's tokens [from, to) and their text, which starts at text. */
static json_object *choice(const Call *k, int i, const char *text, size_t len, int from, int to,
			   const char *finish)
{
	json_object *ch = json_object_new_object(), *ids = json_object_new_array();
	const ServeRequest *r = k->ch[i].req;
	const Seq *q = &r->seq;

	for (int t = from; t < to; t++)
		json_object_array_add(ids, json_object_new_int(q->tokens[q->n_prompt + t]));
	json_object_object_add(ch, "index", json_object_new_int(i));
	json_object_object_add(ch, "text", json_object_new_string_len(text, (int)len));
	json_object_object_add(ch, "logprobs", r->lp_top < 0 ? NULL
				: logprobs_completion(r, tokenizer_of(k), from, to, (size_t)(text - r->text)));
	json_object_object_add(ch, "finish_reason", finish ? json_object_new_string(finish) : NULL);
	/* an extension (as vLLM's): the ids of these tokens, a final BOS included */
	json_object_object_add(ch, "token_ids", ids);
	return ch;
}

/* The prompt once, every choice's completion tokens, as OpenAI counts n. */
static json_object *usage(const Call *k)
{
	json_object *u = json_object_new_object(), *d = json_object_new_object();
	const Seq *q = &k->ch[0].req->seq;
	int gen = 0, cached = q->cached < q->n_prompt ? q->cached : q->n_prompt;

	for (int i = 0; i < k->n; i++)
		gen += generated(&k->ch[i]);
	json_object_object_add(u, "prompt_tokens", json_object_new_int(q->n_prompt));
	json_object_object_add(u, "completion_tokens", json_object_new_int(gen));
	json_object_object_add(u, "total_tokens", json_object_new_int(q->n_prompt + gen));
	/* OpenAI's field: prompt tokens the prefix cache gave, not computed */
	json_object_object_add(d, "cached_tokens", json_object_new_int(cached));
	json_object_object_add(u, "prompt_tokens_details", d);
	return u;
}

/* The response object around choices (an array, or one choice, or NULL). */
static json_object *response(const Call *k, const char *object, json_object *choices, int with_usage)
{
	json_object *o = json_object_new_object();

	if (!choices || !json_object_is_type(choices, json_type_array)) {
		json_object *one = choices;

		choices = json_object_new_array();
		if (one)
			json_object_array_add(choices, one);
	}
	json_object_object_add(o, "id", json_object_new_string(k->id));
	json_object_object_add(o, "object", json_object_new_string(object));
	json_object_object_add(o, "created", json_object_new_int64((int64_t)k->created));
	json_object_object_add(o, "model", json_object_new_string(k->h->opt.model_name));
	json_object_object_add(o, "choices", choices);
	if (with_usage)
		json_object_object_add(o, "usage", usage(k));
	return o;
}

/* Appends the JSON of o (consumed) to k->out, framed as an SSE event or not. */
static int out_json(Call *k, json_object *o, int sse)
{
	size_t len = 0;
	const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN |
							   JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	size_t need = k->out_len + len + 16;
	char *b = s ? realloc(k->out, need) : NULL;

	if (!b) {
		json_object_put(o);
		return -1;
	}
	k->out = b;
	k->out_len += (size_t)snprintf(b + k->out_len, need - k->out_len, sse ? "data: %s\n\n" : "%s", s);
	json_object_put(o);
	return 0;
}

static int out_done(Call *k)
{
	static const char done[] = "data: [DONE]\n\n";
	char *b = realloc(k->out, k->out_len + sizeof(done));

	if (!b)
		return -1;
	k->out = b;
	memcpy(b + k->out_len, done, sizeof(done));
	k->out_len += sizeof(done) - 1;
	return 0;
}

/* ---- chat completions' shapes ---- */

/* message (whole) or delta (streamed) of choice i: role on the first,
 * content if any; lp (consumed) its logprobs, or NULL. */
static json_object *chat_choice(const char *key, int i, int role, const char *text, size_t len,
				const char *finish, json_object *lp)
{
	json_object *ch = json_object_new_object(), *m = json_object_new_object();

	if (role)
		json_object_object_add(m, "role", json_object_new_string("assistant"));
	if (text)
		json_object_object_add(m, "content", json_object_new_string_len(text, (int)len));
	json_object_object_add(ch, "index", json_object_new_int(i));
	json_object_object_add(ch, key, m);
	json_object_object_add(ch, "logprobs", lp);
	json_object_object_add(ch, "finish_reason", finish ? json_object_new_string(finish) : NULL);
	return ch;
}

/* Choice i of a chat stream: the new text as a delta (the first with the
 * role), then at its end a chunk with the finish reason, as OpenAI's API
 * streams. */
static int chat_stream_choice(Call *k, int i, size_t upto, const char *finish)
{
	Choice *c = &k->ch[i];
	ServeRequest *r = c->req;
	int rc = 0;

	if (!c->role_sent || upto > c->text_sent) {
		int gen = generated(c);
		json_object *lp = r->lp_top < 0 ? NULL : logprobs_chat(r, tokenizer_of(k), c->lp_sent, gen);

		rc |= out_json(k, response(k, "chat.completion.chunk",
					   chat_choice("delta", i, !c->role_sent, r->text + c->text_sent,
						       upto - c->text_sent, NULL, lp), 0), 1);
		c->role_sent = 1;
		c->text_sent = upto;
		c->lp_sent = gen;
	}
	if (finish) {
		rc |= out_json(k, response(k, "chat.completion.chunk",
					   chat_choice("delta", i, 0, NULL, 0, finish, NULL), 0), 1);
		c->ended = 1;
	}
	return rc;
}

/* Choice i of a completions stream: its new text and ids; the chunk that
 * ends the last choice carries usage. */
static int completion_stream_choice(Call *k, int i, size_t upto, const char *finish, int last)
{
	Choice *c = &k->ch[i];
	int gen = generated(c), rc;
	json_object *ch = choice(k, i, c->req->text + c->text_sent, upto - c->text_sent, c->ids_sent,
				 gen, finish);

	rc = out_json(k, response(k, "text_completion", ch, last), 1);
	c->text_sent = upto;
	c->ids_sent = gen;
	c->ended = finish != NULL;
	return rc;
}

/* Every choice whole, once all are done. */
static int whole_response(Call *k)
{
	json_object *choices = json_object_new_array();

	for (int i = 0; i < k->n; i++) {
		ServeRequest *r = k->ch[i].req;
		const char *finish = finish_reason_name(r->seq.reason);

		if (k->chat)
			json_object_array_add(choices, chat_choice("message", i, 1, r->text, r->text_len, finish,
				r->lp_top < 0 ? NULL : logprobs_chat(r, tokenizer_of(k), 0, generated(&k->ch[i]))));
		else
			json_object_array_add(choices, choice(k, i, r->text, r->text_len, 0, generated(&k->ch[i]),
							      finish));
	}
	k->finished = 1;
	return out_json(k, response(k, k->chat ? "chat.completion" : "text_completion", choices, 1), 0);
}

/* A stream's step for choice i: 0 nothing new, 1 written, -1 error. */
static int stream_choice(Call *k, int i, int *open)
{
	Choice *c = &k->ch[i];
	ServeRequest *r = c->req;
	size_t upto = r->done ? r->text_len : r->visible;
	const char *finish = r->done ? finish_reason_name(r->seq.reason) : NULL;
	int gen = generated(c);

	if (c->ended)
		return 0;
	/* a chat's first chunk (the role) waits for the first text too, so
	 * its arrival times the first token, as llama-server's does */
	if (!r->done && upto <= c->text_sent && (k->chat || gen <= c->ids_sent))
		return 0;
	if (upto < c->text_sent)
		upto = c->text_sent;
	if (r->done)
		(*open)--;
	if (k->chat)
		return chat_stream_choice(k, i, upto, finish) < 0 ? -1 : 1;
	return completion_stream_choice(k, i, upto, finish, *open == 0) < 0 ? -1 : 1;
}

int http_next_chunk(Call *k)
{
	int open = 0, wrote = 0;

	k->out_len = k->out_off = 0;
	for (int i = 0; i < k->n; i++)
		open += !k->ch[i].ended;
	if (!k->stream) {
		for (int i = 0; i < k->n; i++)
			if (!k->ch[i].req->done)
				return 0;
		return whole_response(k) < 0 ? -1 : 1;
	}
	for (int i = 0; i < k->n; i++) {
		int rc = stream_choice(k, i, &open);

		if (rc < 0)
			return -1;
		wrote |= rc;
	}
	if (open == 0) {
		if (k->chat && k->include_usage &&
		    out_json(k, response(k, "chat.completion.chunk", NULL, 1), 1) < 0)
			return -1;
		if (out_done(k) < 0)
			return -1;
		k->finished = wrote = 1;
	}
	return wrote;
}

