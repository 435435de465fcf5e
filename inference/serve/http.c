/* http.c - the OpenAI-compatible endpoint (see http.h).
 *
 * libmicrohttpd runs one internal polling thread. A completion's response
 * is produced by a content-reader callback that takes whatever the engine
 * has added since the last call; when there is nothing new it suspends the
 * connection, and the engine's wake callback resumes it. A client that goes
 * away is noticed by libmicrohttpd while writing (the request ends with an
 * error) or by the engine polling the socket each step (serve.c): either
 * way its sequence is cancelled and its blocks freed. */
#include <arpa/inet.h>
#include <json-c/json.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "serve/http.h"
#include "serve/logprobs_json.h"
#include "serve/reqparse.h"
#include "text/tokenizer.h"
#include "base/trace.h"

struct HttpServer {
	struct MHD_Daemon *d;
	Server *srv;
	HttpOptions opt;
	int conns;             /* open connections (atomic) */
	uint64_t started_ns;
	time_t created;
};

typedef enum {
	EP_NONE, EP_COMPLETIONS, EP_CHAT, EP_APPLY_TEMPLATE, EP_TOKENIZE
} Endpoint;

/* One request on a connection. */
typedef struct {
	HttpServer *h;
	struct MHD_Connection *conn;
	char *body;            /* (cap) the upload so far */
	size_t len, cap;
	int too_large;
	ServeRequest *req;
	int stream;
	int chat;              /* /v1/chat/completions: chat's shapes */
	int include_usage;     /* a chat stream's last chunk carries usage */
	int role_sent;         /* a chat stream's first chunk is out */
	int suspended;         /* under the server lock */
	size_t text_sent;      /* bytes of req->text already sent */
	int ids_sent;          /* generated ids already sent */
	int lp_sent;           /* generated tokens whose logprobs a chat stream sent */
	int finished;          /* the last bytes are out */
	char *out;             /* formatted bytes not yet handed to libmicrohttpd */
	size_t out_len, out_off;
	char id[40];
	time_t created;
} Call;

static const char JSON_TYPE[] = "application/json";

/* ---- CORS, and every response queued through it ---- */

/* llama-server's defaults: with --cors-origin "*" (the default) a
 * browser's Origin is echoed, credentials allowed; else the one origin
 * asked for is named, and the browser enforces it. The server is found
 * through the socket context connection_note leaves. */
static void add_cors(struct MHD_Connection *c, struct MHD_Response *r)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	const HttpServer *h = ci ? ci->socket_context : NULL;
	const char *allow = h && h->opt.cors_origin ? h->opt.cors_origin : "*";
	const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");

	if (!strcmp(allow, "*") && origin && *origin) {
		MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, origin);
		MHD_add_response_header(r, "Access-Control-Allow-Credentials", "true");
		MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Origin");
	} else {
		MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, allow);
	}
}

static enum MHD_Result queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *r)
{
	enum MHD_Result rc;

	if (!r)
		return MHD_NO;
	add_cors(c, r);
	rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

/* A browser's preflight: the methods served and the headers it asks for. */
static enum MHD_Result preflight(struct MHD_Connection *c)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	const char *want = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       "Access-Control-Request-Headers");

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
	MHD_add_response_header(r, "Access-Control-Allow-Headers", want && *want ? want : "*");
	MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
	return queue(c, 200, r);
}

/* ---- plain JSON responses ---- */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type,
				 const char *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
								 MHD_RESPMEM_MUST_COPY);

	if (r)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	return queue(c, status, r);
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_object *o)
{
	size_t len = 0;
	const char *s = o ? json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN |
							      JSON_C_TO_STRING_NOSLASHESCAPE, &len)
			  : NULL;
	enum MHD_Result rc = s ? send_text(c, status, JSON_TYPE, s, len) : MHD_NO;

	json_object_put(o);
	return rc;
}

static json_object *error_object(unsigned status, const char *msg)
{
	json_object *e = json_object_new_object(), *o = json_object_new_object();
	const char *type = status == 400 || status == 404 || status == 405 || status == 413
			   ? "invalid_request_error" : "server_error";

	json_object_object_add(e, "message", json_object_new_string(msg));
	json_object_object_add(e, "type", json_object_new_string(type));
	json_object_object_add(e, "param", NULL);
	json_object_object_add(e, "code", json_object_new_int((int)status));
	json_object_object_add(o, "error", e);
	return o;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
	return send_json(c, status, error_object(status, msg));
}

/* ---- GET endpoints ---- */

static enum MHD_Result get_models(HttpServer *h, struct MHD_Connection *c)
{
	json_object *o = json_object_new_object(), *list = json_object_new_array();
	json_object *m = json_object_new_object();

	json_object_object_add(m, "id", json_object_new_string(h->opt.model_name));
	json_object_object_add(m, "object", json_object_new_string("model"));
	json_object_object_add(m, "created", json_object_new_int64((int64_t)h->created));
	json_object_object_add(m, "owned_by", json_object_new_string("spantrace"));
	json_object_array_add(list, m);
	json_object_object_add(o, "object", json_object_new_string("list"));
	json_object_object_add(o, "data", list);
	return send_json(c, 200, o);
}

static enum MHD_Result get_health(HttpServer *h, struct MHD_Connection *c)
{
	json_object *o = json_object_new_object();
	ServerGauges g;
	int failed;

	server_lock(h->srv);
	server_gauges(h->srv, &g);
	failed = h->srv->failed;
	server_unlock(h->srv);
	json_object_object_add(o, "status", json_object_new_string(failed ? "failed" : "ok"));
	json_object_object_add(o, "running", json_object_new_int(g.running));
	json_object_object_add(o, "waiting", json_object_new_int(g.waiting));
	json_object_object_add(o, "kv_blocks_used", json_object_new_int(g.kv_used));
	json_object_object_add(o, "kv_blocks_total", json_object_new_int(g.kv_total));
	json_object_object_add(o, "kv_blocks_cached", json_object_new_int(g.kv_cached));
	json_object_object_add(o, "kv_block_size", json_object_new_int(g.block_size));
	json_object_object_add(o, "steps", json_object_new_int64((int64_t)g.steps));
	json_object_object_add(o, "requests", json_object_new_int64((int64_t)g.requests));
	json_object_object_add(o, "connections",
			       json_object_new_int(__atomic_load_n(&h->conns, __ATOMIC_RELAXED)));
	return send_json(c, failed ? 500 : 200, o);
}

static enum MHD_Result get_stats(HttpServer *h, struct MHD_Connection *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	enum MHD_Result rc;

	if (!f)
		return send_error(c, 500, "out of memory");
	trace_stats_print(f, trace_now_ns() - h->started_ns);
	if (fclose(f) != 0) {
		free(buf);
		return send_error(c, 500, "out of memory");
	}
	rc = send_text(c, 200, JSON_TYPE, buf, len);
	free(buf);
	return rc;
}

/* ---- completions: the response body, piece by piece ---- */

static const Tokenizer *tokenizer_of(const Call *k)
{
	const Engine *e = &k->h->srv->engine;

	return e->have_tokenizer ? &e->tokenizer : NULL;
}

/* Tokens [from, to) of a completion and their text, which starts at text. */
static json_object *choice(const Call *k, const char *text, size_t len, int from, int to,
			   const char *finish)
{
	json_object *ch = json_object_new_object(), *ids = json_object_new_array();
	const ServeRequest *r = k->req;
	const Seq *q = &r->seq;

	for (int i = from; i < to; i++)
		json_object_array_add(ids, json_object_new_int(q->tokens[q->n_prompt + i]));
	json_object_object_add(ch, "index", json_object_new_int(0));
	json_object_object_add(ch, "text", json_object_new_string_len(text, (int)len));
	json_object_object_add(ch, "logprobs", r->lp_top < 0 ? NULL
				: logprobs_completion(r, tokenizer_of(k), from, to, (size_t)(text - r->text)));
	json_object_object_add(ch, "finish_reason", finish ? json_object_new_string(finish) : NULL);
	/* an extension (as vLLM's): the ids of these tokens, a final BOS included */
	json_object_object_add(ch, "token_ids", ids);
	return ch;
}

static json_object *usage(const Seq *q)
{
	json_object *u = json_object_new_object(), *d = json_object_new_object();
	int gen = q->n_tokens - q->n_prompt;
	int cached = q->cached < q->n_prompt ? q->cached : q->n_prompt;

	json_object_object_add(u, "prompt_tokens", json_object_new_int(q->n_prompt));
	json_object_object_add(u, "completion_tokens", json_object_new_int(gen));
	json_object_object_add(u, "total_tokens", json_object_new_int(q->n_tokens));
	/* OpenAI's field: prompt tokens the prefix cache gave, not computed */
	json_object_object_add(d, "cached_tokens", json_object_new_int(cached));
	json_object_object_add(u, "prompt_tokens_details", d);
	return u;
}

static json_object *completion(const Call *k, json_object *ch, int with_usage)
{
	json_object *o = json_object_new_object(), *choices = json_object_new_array();

	json_object_array_add(choices, ch);
	json_object_object_add(o, "id", json_object_new_string(k->id));
	json_object_object_add(o, "object", json_object_new_string("text_completion"));
	json_object_object_add(o, "created", json_object_new_int64((int64_t)k->created));
	json_object_object_add(o, "model", json_object_new_string(k->h->opt.model_name));
	json_object_object_add(o, "choices", choices);
	if (with_usage)
		json_object_object_add(o, "usage", usage(&k->req->seq));
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

static json_object *chat_object(const Call *k, const char *object, json_object *choice)
{
	json_object *o = json_object_new_object(), *choices = json_object_new_array();

	if (choice)
		json_object_array_add(choices, choice);
	json_object_object_add(o, "id", json_object_new_string(k->id));
	json_object_object_add(o, "object", json_object_new_string(object));
	json_object_object_add(o, "created", json_object_new_int64((int64_t)k->created));
	json_object_object_add(o, "model", json_object_new_string(k->h->opt.model_name));
	json_object_object_add(o, "choices", choices);
	return o;
}

/* message (whole) or delta (streamed): role on the first, content if
 * any; lp (consumed) its logprobs, or NULL. */
static json_object *chat_choice(const char *key, int role, const char *text, size_t len,
				const char *finish, json_object *lp)
{
	json_object *ch = json_object_new_object(), *m = json_object_new_object();

	if (role)
		json_object_object_add(m, "role", json_object_new_string("assistant"));
	if (text)
		json_object_object_add(m, "content", json_object_new_string_len(text, (int)len));
	json_object_object_add(ch, "index", json_object_new_int(0));
	json_object_object_add(ch, key, m);
	json_object_object_add(ch, "logprobs", lp);
	json_object_object_add(ch, "finish_reason", finish ? json_object_new_string(finish) : NULL);
	return ch;
}

/* A chat stream: the new text as a delta (the first with the role), then
 * at the end a chunk with the finish reason, one with usage if asked, and
 * [DONE], as OpenAI's API streams. */
static int chat_stream_chunk(Call *k, size_t upto, const char *finish)
{
	ServeRequest *r = k->req;
	int rc = 0;

	if (!k->role_sent || upto > k->text_sent) {
		int gen = r->seq.n_tokens - r->seq.n_prompt;
		json_object *lp = r->lp_top < 0 ? NULL : logprobs_chat(r, tokenizer_of(k), k->lp_sent, gen);
		json_object *ch = chat_choice("delta", !k->role_sent, r->text + k->text_sent,
					      upto - k->text_sent, NULL, lp);

		rc |= out_json(k, chat_object(k, "chat.completion.chunk", ch), 1);
		k->role_sent = 1;
		k->text_sent = upto;
		k->lp_sent = gen;
	}
	if (finish) {
		json_object *u;

		rc |= out_json(k, chat_object(k, "chat.completion.chunk",
					      chat_choice("delta", 0, NULL, 0, finish, NULL)), 1);
		if (k->include_usage) {
			u = chat_object(k, "chat.completion.chunk", NULL);
			json_object_object_add(u, "usage", usage(&r->seq));
			rc |= out_json(k, u, 1);
		}
		rc |= out_done(k);
		k->finished = 1;
	}
	return rc;
}

static int chat_chunk(Call *k, size_t upto, const char *finish)
{
	ServeRequest *r = k->req;
	json_object *o;

	if (k->stream)
		return chat_stream_chunk(k, upto, finish);
	o = chat_object(k, "chat.completion", chat_choice("message", 1, r->text, r->text_len, finish,
			r->lp_top < 0 ? NULL : logprobs_chat(r, tokenizer_of(k), 0,
							     r->seq.n_tokens - r->seq.n_prompt)));
	json_object_object_add(o, "usage", usage(&r->seq));
	k->finished = 1;
	return out_json(k, o, 0);
}

/* Under the server lock: what the engine added since the last chunk.
 * Returns 1 when k->out has bytes, 0 when there is nothing yet, -1 on error. */
static int next_chunk(Call *k)
{
	ServeRequest *r = k->req;
	int gen = r->seq.n_tokens - r->seq.n_prompt;
	size_t upto = r->done ? r->text_len : r->visible;
	const char *finish = r->done ? finish_reason_name(r->seq.reason) : NULL;
	json_object *ch;

	k->out_len = k->out_off = 0;
	if (!k->stream && !r->done)
		return 0;
	/* a chat's first chunk (the role) waits for the first text too, so
	 * its arrival times the first token, as llama-server's does */
	if (k->stream && !r->done && upto <= k->text_sent && (k->chat || gen <= k->ids_sent))
		return 0;
	if (upto < k->text_sent)
		upto = k->text_sent;
	if (k->chat)
		return chat_chunk(k, upto, finish) < 0 ? -1 : 1;
	if (!k->stream) {
		ch = choice(k, r->text, r->text_len, 0, gen, finish);
		k->finished = 1;
		return out_json(k, completion(k, ch, 1), 0) < 0 ? -1 : 1;
	}
	ch = choice(k, r->text + k->text_sent, upto - k->text_sent, k->ids_sent, gen, finish);
	k->text_sent = upto;
	k->ids_sent = gen;
	k->finished = r->done;
	if (out_json(k, completion(k, ch, r->done), 1) < 0 || (r->done && out_done(k) < 0))
		return -1;
	return 1;
}

/* Called under the server lock by the engine thread. */
static void wake(void *ctx)
{
	Call *k = ctx;

	if (k->suspended) {
		k->suspended = 0;
		MHD_resume_connection(k->conn);
	}
}

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	Call *k = cls;
	size_t n;
	int rc;

	(void)pos;
	if (k->out_off == k->out_len) {
		if (k->finished)
			return MHD_CONTENT_READER_END_OF_STREAM;
		server_lock(k->h->srv);
		rc = next_chunk(k);
		if (rc == 0) { /* nothing new: sleep until the engine wakes us */
			k->suspended = 1;
			MHD_suspend_connection(k->conn);
		}
		server_unlock(k->h->srv);
		if (rc <= 0)
			return rc < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : 0;
	}
	n = k->out_len - k->out_off < max ? k->out_len - k->out_off : max;
	memcpy(buf, k->out + k->out_off, n);
	k->out_off += n;
	return (ssize_t)n;
}

/* ---- completions: the request ---- */

static int append_body(Call *k, const char *data, size_t n)
{
	if (k->too_large || k->len + n > k->h->opt.max_body) {
		k->too_large = 1;
		return 0;
	}
	if (k->len + n + 1 > k->cap) {
		size_t cap = (k->len + n + 1) * 2;
		char *b;

		if (cap > k->h->opt.max_body + 1)
			cap = k->h->opt.max_body + 1;
		b = realloc(k->body, cap);
		if (!b)
			return -1;
		k->body = b;
		k->cap = cap;
	}
	memcpy(k->body + k->len, data, n);
	k->len += n;
	return 0;
}

static int client_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci ? ci->connect_fd : -1;
}

static enum MHD_Result start_response(Call *k)
{
	struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
								   read_body, k, NULL);

	if (r) {
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
					k->stream ? "text/event-stream" : JSON_TYPE);
		MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	}
	return queue(k->conn, 200, r);
}

/* A chat request's prompt, rendered from the model's template. */
static int chat_prompt(const Engine *e, CompletionRequest *cr, char *msg, size_t msglen)
{
	const char *bos, *eos;

	if (!e->have_tokenizer) {
		snprintf(msg, msglen, "a chat needs a tokenizer: start infer with -z TOKENIZER, "
			 "or with a GGUF model that carries one");
		return -1;
	}
	if (e->chat.family == CHAT_NONE) {
		snprintf(msg, msglen, "%s: start infer with --chat-template NAME (one of %s), "
			 "or send the prompt itself to /v1/completions", e->chat_missing,
			 chat_family_list());
		return -1;
	}
	bos = tokenizer_special_text(&e->tokenizer, TOKEN_BOS);
	eos = tokenizer_special_text(&e->tokenizer, TOKEN_EOS);
	cr->prompt_text = chat_render(e->chat, cr->messages, cr->n_messages, bos ? bos : "<s>",
				      eos ? eos : "</s>", msg, msglen);
	return cr->prompt_text ? 0 : -1;
}

static enum MHD_Result submit(Call *k, Endpoint ep)
{
	const Engine *e = &k->h->srv->engine;
	CompletionRequest cr;
	ServeParams p;
	InferError err;
	char msg[512];
	int status = 400, rc;

	k->chat = ep == EP_CHAT;
	if ((k->chat ? chat_request_parse : completion_request_parse)(k->body ? k->body : "", k->len,
								      &cr, msg, sizeof(msg)) < 0)
		return send_error(k->conn, 400, msg);
	if (k->chat && chat_prompt(e, &cr, msg, sizeof(msg)) < 0) {
		completion_request_free(&cr);
		return send_error(k->conn, 400, msg);
	}
	completion_request_params(&cr, &p);
	k->stream = cr.stream;
	k->include_usage = cr.include_usage;
	rc = server_submit(k->h->srv, &p, wake, k, client_fd(k->conn), &k->req, &status, &err);
	completion_request_free(&cr);
	if (rc < 0)
		return send_error(k->conn, (unsigned)status, err.msg);
	snprintf(k->id, sizeof(k->id), "%s-%llu", k->chat ? "chatcmpl" : "cmpl",
		 (unsigned long long)k->req->seq.id);
	k->created = time(NULL);
	return start_response(k);
}

/* ---- llama-server's prompt tools: /apply-template, /tokenize ---- */

static enum MHD_Result apply_template(Call *k)
{
	CompletionRequest cr;
	char msg[512];
	json_object *o;

	if (chat_request_parse(k->body ? k->body : "", k->len, &cr, msg, sizeof(msg)) < 0)
		return send_error(k->conn, 400, msg);
	if (chat_prompt(&k->h->srv->engine, &cr, msg, sizeof(msg)) < 0) {
		completion_request_free(&cr);
		return send_error(k->conn, 400, msg);
	}
	o = json_object_new_object();
	json_object_object_add(o, "prompt", json_object_new_string(cr.prompt_text));
	completion_request_free(&cr);
	return send_json(k->conn, 200, o);
}

static enum MHD_Result tokenize(Call *k)
{
	const Server *srv = k->h->srv;
	TokenizeRequest tr;
	InferError err;
	char msg[512];
	int *ids, n = 0, rc;
	json_object *o, *list;

	if (tokenize_request_parse(k->body ? k->body : "", k->len, &tr, msg, sizeof(msg)) < 0)
		return send_error(k->conn, 400, msg);
	if (!srv->engine.have_tokenizer) {
		free(tr.content);
		return send_error(k->conn, 400, "the model has no tokenizer");
	}
	ids = malloc((2 * strlen(tr.content) + 3) * sizeof(int));
	if (!ids) {
		free(tr.content);
		return send_error(k->conn, 500, "out of memory");
	}
	/* the tokenizer is read-only once loaded: no lock */
	rc = (tr.parse_special ? tokenizer_encode_special : tokenizer_encode)(
		&srv->engine.tokenizer, tr.content, tr.add_special, ids, &n, &err);
	free(tr.content);
	if (rc < 0) {
		free(ids);
		return send_error(k->conn, 400, err.msg);
	}
	o = json_object_new_object();
	list = json_object_new_array();
	for (int i = 0; i < n; i++)
		json_object_array_add(list, json_object_new_int(ids[i]));
	json_object_object_add(o, "tokens", list);
	free(ids);
	return send_json(k->conn, 200, o);
}

static enum MHD_Result post(Call *k, Endpoint ep)
{
	if (k->too_large) {
		char msg[128];

		snprintf(msg, sizeof(msg), "the request body is larger than %zu bytes",
			 k->h->opt.max_body);
		return send_error(k->conn, 413, msg);
	}
	switch (ep) {
	case EP_APPLY_TEMPLATE: return apply_template(k);
	case EP_TOKENIZE: return tokenize(k);
	default: return submit(k, ep);
	}
}

static enum MHD_Result first_call(HttpServer *h, Call *k, int is_post)
{
	const char *cl;

	if (!is_post)
		return MHD_YES;
	if (__atomic_load_n(&h->conns, __ATOMIC_RELAXED) > h->opt.max_conns)
		return send_error(k->conn, 503, "too many connections: try again later");
	cl = MHD_lookup_connection_value(k->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > h->opt.max_body) {
		char msg[128];

		snprintf(msg, sizeof(msg), "the request body is larger than %zu bytes",
			 h->opt.max_body);
		return send_error(k->conn, 413, msg);
	}
	return MHD_YES;
}

static enum MHD_Result route_get(HttpServer *h, struct MHD_Connection *c, const char *url)
{
	if (!strcmp(url, "/health"))
		return get_health(h, c);
	if (!strcmp(url, "/v1/models") || !strcmp(url, "/models"))
		return get_models(h, c);
	if (!strcmp(url, "/stats"))
		return get_stats(h, c);
	return send_error(c, 404, "no such endpoint");
}

/* The POST endpoints, llama-server's paths without /v1 included. */
static Endpoint post_endpoint(const char *url)
{
	static const struct {
		const char *path;
		Endpoint ep;
	} paths[] = {
		{ "/v1/completions", EP_COMPLETIONS }, { "/completions", EP_COMPLETIONS },
		{ "/v1/chat/completions", EP_CHAT },   { "/chat/completions", EP_CHAT },
		{ "/apply-template", EP_APPLY_TEMPLATE }, { "/tokenize", EP_TOKENIZE },
	};

	for (size_t i = 0; i < sizeof(paths) / sizeof(*paths); i++)
		if (!strcmp(url, paths[i].path))
			return paths[i].ep;
	return EP_NONE;
}

static int known_path(const char *url)
{
	return !strcmp(url, "/health") || !strcmp(url, "/v1/models") || !strcmp(url, "/models") ||
	       !strcmp(url, "/stats") || post_endpoint(url) != EP_NONE;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *data,
			      size_t *data_size, void **con_cls)
{
	HttpServer *h = cls;
	Call *k = *con_cls;
	Endpoint ep = !strcmp(method, "POST") ? post_endpoint(url) : EP_NONE;
	int is_post = ep != EP_NONE;

	(void)version;
	if (!k) {
		k = calloc(1, sizeof(*k));
		if (!k)
			return MHD_NO;
		k->h = h;
		k->conn = c;
		*con_cls = k;
		if (is_post || !strcmp(method, "GET"))
			return first_call(h, k, is_post);
	}
	if (!is_post) {
		if (!strcmp(method, "GET"))
			return route_get(h, c, url);
		if (!strcmp(method, MHD_HTTP_METHOD_OPTIONS))
			return preflight(c);
		return known_path(url) ? send_error(c, 405, "method not allowed")
				       : send_error(c, 404, "no such endpoint");
	}
	if (*data_size) {
		int rc = append_body(k, data, *data_size);

		*data_size = 0;
		return rc < 0 ? MHD_NO : MHD_YES;
	}
	return post(k, ep);
}

/* The request is over, well or not: a sequence still running is cancelled. */
static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	HttpServer *h = cls;
	Call *k = *con_cls;

	(void)c;
	(void)toe;
	if (!k)
		return;
	if (k->req) {
		server_cancel(h->srv, k->req);
		server_release(h->srv, k->req);
	}
	free(k->body);
	free(k->out);
	free(k);
	*con_cls = NULL;
}

static void connection_note(void *cls, struct MHD_Connection *c, void **socket_context,
			    enum MHD_ConnectionNotificationCode toe)
{
	HttpServer *h = cls;

	(void)c;
	*socket_context = h; /* add_cors finds the server's options here */
	__atomic_fetch_add(&h->conns, toe == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1,
			   __ATOMIC_RELAXED);
}

int http_start(HttpServer **out, Server *srv, const HttpOptions *opt, int *port_out,
	       InferError *err)
{
	HttpServer *h = calloc(1, sizeof(*h));
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)opt->port) };
	const union MHD_DaemonInfo *di;

	*out = NULL;
	if (!h)
		return infer_fail(err, "out of memory");
	if (inet_pton(AF_INET, opt->addr ? opt->addr : "127.0.0.1", &sa.sin_addr) != 1) {
		free(h);
		return infer_fail(err, "--http: '%s' is not an IPv4 address", opt->addr);
	}
	h->srv = srv;
	h->opt = *opt;
	h->created = time(NULL);
	h->started_ns = trace_now_ns();
	/* the hard limit sits above max_conns so the extra ones still get a 503 */
	h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
				MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
				0, NULL, NULL, handle, h,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)(opt->max_conns + 16),
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
				MHD_OPTION_NOTIFY_COMPLETED, completed, h,
				MHD_OPTION_NOTIFY_CONNECTION, connection_note, h,
				MHD_OPTION_END);
	if (!h->d) {
		free(h);
		return infer_fail(err, "--http: cannot listen on %s:%d (in use, or not an address "
				  "of this machine)", opt->addr ? opt->addr : "127.0.0.1", opt->port);
	}
	di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	*port_out = di ? di->port : opt->port;
	*out = h;
	return 0;
}

void http_stop(HttpServer *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d);
	free(h);
}
