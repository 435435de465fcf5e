/* http.h - the OpenAI-compatible HTTP front end of the serving engine
 * (libmicrohttpd, json-c), a drop-in for llama-server's:
 *   POST /v1/completions   completions, streamed as Server-Sent Events with "stream"
 *   POST /v1/chat/completions  chat, the prompt from the model's template (chat.h)
 *   POST /apply-template   that prompt, not run: {"prompt": "..."}
 *   POST /tokenize         {"content", "add_special", "parse_special"} -> {"tokens": [...]}
 *   GET  /v1/models        the one model (also without /v1, as the POST paths)
 *   GET  /health           status and the engine's gauges (running, waiting, KV blocks)
 *   GET  /stats            the engine's --stats JSON, live
 * Errors are OpenAI-shaped JSON: {"error":{"message","type","param","code"}}.
 * Every response carries CORS headers, and OPTIONS (a browser's preflight)
 * is answered on any path, as llama-server does. */
#ifndef INFER_HTTP_H
#define INFER_HTTP_H

#include <stddef.h>
#include "serve/serve.h"

typedef struct {
	const char *addr;    /* IPv4 address to bind; default 127.0.0.1 */
	int port;            /* 0: any free port */
	int max_conns;       /* connections served at once; more get 503 */
	size_t max_body;     /* request bodies above this get 413 */
	const char *model_name;
	const char *cors_origin; /* Access-Control-Allow-Origin; NULL or "*": the
				  * request's Origin echoed, as llama-server */
} HttpOptions;

typedef struct HttpServer HttpServer;

/* Starts listening; the bound port is in *port_out. */
int http_start(HttpServer **out, Server *srv, const HttpOptions *opt, int *port_out,
	       InferError *err);
/* Stops listening and closes every connection (stop the engine first:
 * server_stop wakes every suspended response so it can end). */
void http_stop(HttpServer *h);

#endif
