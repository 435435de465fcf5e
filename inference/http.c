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
#include "http.h"
#include "reqparse.h"
#include "trace.h"

struct HttpServer {
	struct MHD_Daemon *d;
	Server *srv;
	HttpOptions opt;
	int conns;             /* open connections (atomic) */
	uint64_t started_ns;
	time_t created;
};

/* One request on a connection. */
typedef struct {
	HttpServer *h;
	struct MHD_Connection *conn;
	char *body;            /* (cap) the upload so far */
	size_t len, cap;
	int too_large;
	ServeRequest *req;
	int stream;
	int suspended;         /* under the server lock */
	size_t text_sent;      /* bytes of req->text already sent */
	int ids_sent;          /* generated ids already sent */
	int finished;          /* the last bytes are out */
	char *out;             /* formatted bytes not yet handed to libmicrohttpd */
	size_t out_len, out_off;
	char id[40];
	time_t created;
} Call;

static const char JSON_TYPE[] = "application/json";

/* ---- plain JSON responses ---- */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type,
				 const char *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
								 MHD_RESPMEM_MUST_COPY);
	enum MHD_Result rc;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
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

static json_object *choice(const Call *k, const char *text, size_t len, int from, int to,
			   const char *finish)
{
	json_object *ch = json_object_new_object(), *ids = json_object_new_array();
	const Seq *q = &k->req->seq;

	for (int i = from; i < to; i++)
		json_object_array_add(ids, json_object_new_int(q->tokens[q->n_prompt + i]));
	json_object_object_add(ch, "index", json_object_new_int(0));
	json_object_object_add(ch, "text", json_object_new_string_len(text, (int)len));
	json_object_object_add(ch, "logprobs", NULL);
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

/* Replaces k->out with the JSON of o, framed as an SSE event or not. */
static int set_out(Call *k, json_object *o, int sse, int done)
{
	size_t len = 0;
	const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN |
							   JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	size_t cap = len + 32;

	free(k->out);
	k->out = malloc(cap);
	if (!k->out || !s) {
		json_object_put(o);
		return -1;
	}
	k->out_len = sse ? (size_t)snprintf(k->out, cap, "data: %s\n\n%s", s,
					   done ? "data: [DONE]\n\n" : "")
			 : (size_t)snprintf(k->out, cap, "%s", s);
	k->out_off = 0;
	json_object_put(o);
	return 0;
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

	if (!k->stream) {
		if (!r->done)
			return 0;
		ch = choice(k, r->text, r->text_len, 0, gen, finish);
		k->finished = 1;
		return set_out(k, completion(k, ch, 1), 0, 0) < 0 ? -1 : 1;
	}
	if (upto <= k->text_sent && gen <= k->ids_sent && !r->done)
		return 0;
	if (upto < k->text_sent)
		upto = k->text_sent;
	ch = choice(k, r->text + k->text_sent, upto - k->text_sent, k->ids_sent, gen, finish);
	k->text_sent = upto;
	k->ids_sent = gen;
	k->finished = r->done;
	return set_out(k, completion(k, ch, r->done), 1, r->done) < 0 ? -1 : 1;
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
	enum MHD_Result rc;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				k->stream ? "text/event-stream" : JSON_TYPE);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	rc = MHD_queue_response(k->conn, 200, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result submit(Call *k)
{
	CompletionRequest cr;
	ServeParams p;
	InferError err;
	char msg[512];
	int status = 400, rc;

	if (k->too_large) {
		snprintf(msg, sizeof(msg), "the request body is larger than %zu bytes",
			 k->h->opt.max_body);
		return send_error(k->conn, 413, msg);
	}
	if (completion_request_parse(k->body ? k->body : "", k->len, &cr, msg, sizeof(msg)) < 0)
		return send_error(k->conn, 400, msg);
	completion_request_params(&cr, &p);
	k->stream = cr.stream;
	rc = server_submit(k->h->srv, &p, wake, k, client_fd(k->conn), &k->req, &status, &err);
	completion_request_free(&cr);
	if (rc < 0)
		return send_error(k->conn, (unsigned)status, err.msg);
	snprintf(k->id, sizeof(k->id), "cmpl-%llu", (unsigned long long)k->req->seq.id);
	k->created = time(NULL);
	return start_response(k);
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
	if (!strcmp(url, "/v1/models"))
		return get_models(h, c);
	if (!strcmp(url, "/stats"))
		return get_stats(h, c);
	return send_error(c, 404, "no such endpoint");
}

static int known_path(const char *url)
{
	return !strcmp(url, "/health") || !strcmp(url, "/v1/models") || !strcmp(url, "/stats") ||
	       !strcmp(url, "/v1/completions");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *data,
			      size_t *data_size, void **con_cls)
{
	HttpServer *h = cls;
	Call *k = *con_cls;
	int is_post = !strcmp(method, "POST") && !strcmp(url, "/v1/completions");

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
		return known_path(url) ? send_error(c, 405, "method not allowed")
				       : send_error(c, 404, "no such endpoint");
	}
	if (*data_size) {
		int rc = append_body(k, data, *data_size);

		*data_size = 0;
		return rc < 0 ? MHD_NO : MHD_YES;
	}
	return submit(k);
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
	(void)socket_context;
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
