/* httpd.h - the daemon's HTTP endpoint (libmicrohttpd, one internal thread):
 * GET /metrics (Prometheus text 0.0.4), GET /healthz ("ok"), 404 elsewhere,
 * 405 for methods other than GET/HEAD. */
#ifndef SPANTRACE_HTTPD_H
#define SPANTRACE_HTTPD_H

#include <stddef.h>
#include <sys/socket.h>
#include <netinet/in.h>

#define HTTPD_DEFAULT_LISTEN "127.0.0.1:9464"
#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct listen_addr {
	struct sockaddr_storage ss;
	socklen_t len;
	char text[64];        /* as given, for messages: "127.0.0.1:9464" */
};

/* Parses "IPv4:PORT" or "[IPv6]:PORT" (numeric only, no host names; port
 * 0-65535, 0 = any free port). Returns 0, or -1 with a one-line reason. */
int listen_addr_parse(const char *s, struct listen_addr *out, char *err, size_t errlen);

/* Renders the current metrics into a malloc'd body that httpd frees.
 * Called from the server thread: the callee does its own locking.
 * Returns 0, or -1 (the client gets a 500). */
typedef int (*httpd_render_fn)(void *ctx, char **body, size_t *len);

struct httpd;

/* Binds and listens itself (so "address in use" is reported as such), then
 * serves on libmicrohttpd's thread. NULL with a one-line reason on failure. */
struct httpd *httpd_start(const struct listen_addr *addr, httpd_render_fn render, void *ctx,
			  char *err, size_t errlen);
/* The bound port (useful after asking for port 0). */
unsigned httpd_port(const struct httpd *h);
void httpd_stop(struct httpd *h);

#endif
