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
#include "serve/http_impl.h"
#include "serve/reqparse.h"
#include "text/tokenizer.h"
#include "base/trace.h"


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
		rc = http_next_chunk(k);
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

/* Lets go of the sequences submitted so far (cancelled if still running). */
static void release_choices(Call *k)
{
	for (int i = 0; i < k->n; i++) {
		server_cancel(k->h->srv, k->ch[i].req);
		server_release(k->h->srv, k->ch[i].req);
	}
	k->n = 0;
}

/* n sequences of one request; with a seed, choice i draws with seed + i,
 * so that each is the reply a single request with that seed gets. */
static int submit_choices(Call *k, ServeParams *p, int n, int *status, InferError *err)
{
	uint64_t seed = p->seed;

	for (int i = 0; i < n; i++) {
		p->seed = seed + (uint64_t)i;
		if (server_submit(k->h->srv, p, wake, k, client_fd(k->conn), &k->ch[i].req, status,
				  err) < 0) {
			release_choices(k);
			return -1;
		}
		k->n = i + 1;
	}
	return 0;
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
	rc = submit_choices(k, &p, cr.n, &status, &err);
	completion_request_free(&cr);
	if (rc < 0)
		return send_error(k->conn, (unsigned)status, err.msg);
	snprintf(k->id, sizeof(k->id), "%s-%llu", k->chat ? "chatcmpl" : "cmpl",
		 (unsigned long long)k->ch[0].req->seq.id);
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
	(void)h;
	release_choices(k);
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
