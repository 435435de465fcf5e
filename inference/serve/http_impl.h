/* http_impl.h - what http.c (the connection, the request) and
 * http_body.c (the response body's JSON, chunk by chunk) share: the
 * server, a connection's call and its choices. Not for other callers. */
#ifndef INFER_HTTP_IMPL_H
#define INFER_HTTP_IMPL_H

#include <microhttpd.h>
#include <time.h>
#include "serve/http.h"
#include "serve/reqparse.h"

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

/* One of a request's n choices: its sequence, and what a stream sent. */
typedef struct {
	ServeRequest *req;
	size_t text_sent;      /* bytes of req->text already sent */
	int ids_sent;          /* generated ids already sent */
	int lp_sent;           /* generated tokens whose logprobs a chat stream sent */
	int role_sent;         /* a chat stream's first chunk is out */
	int ended;             /* a stream's finishing chunk is out */
} Choice;

/* One request on a connection. */
typedef struct {
	HttpServer *h;
	struct MHD_Connection *conn;
	char *body;            /* (cap) the upload so far */
	size_t len, cap;
	int too_large;
	Choice ch[REQ_MAX_N];  /* OpenAI's n: a sequence each */
	int n;                 /* submitted */
	int stream;
	int chat;              /* /v1/chat/completions: chat's shapes */
	int include_usage;     /* a chat stream's last chunk carries usage */
	int suspended;         /* under the server lock */
	int finished;          /* the last bytes are out */
	char *out;             /* formatted bytes not yet handed to libmicrohttpd */
	size_t out_len, out_off;
	char id[40];
	time_t created;
} Call;

/* Under the server lock: what the engine added since the last chunk, as
 * the response's next bytes in k->out. 1: some; 0: nothing yet; -1: error. */
int http_next_chunk(Call *k);

#endif
