/* httpd.c - the daemon's /metrics and /healthz endpoint on libmicrohttpd. */
#include "output/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct httpd {
	struct MHD_Daemon *mhd;
	httpd_render_fn render;
	void *ctx;
	unsigned port;
};

/* ---- listen address ---- */

static int parse_port(const char *s, unsigned *port)
{
	char *end;
	if (*s < '0' || *s > '9')  /* strtoul would take "+1", " 1", "-1" */
		return -1;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v > 65535 || end - s > 5)
		return -1;
	*port = (unsigned)v;
	return 0;
}

int listen_addr_parse(const char *s, struct listen_addr *out, char *err, size_t errlen)
{
	char host[64];
	const char *port_s;
	unsigned port;
	int v6 = s[0] == '[';

	memset(out, 0, sizeof(*out));
	if (v6) {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':' || (size_t)(close - s - 1) >= sizeof(host))
			goto bad;
		memcpy(host, s + 1, (size_t)(close - s - 1));
		host[close - s - 1] = '\0';
		port_s = close + 2;
	} else {
		const char *colon = strrchr(s, ':');
		if (!colon || (size_t)(colon - s) >= sizeof(host))
			goto bad;
		memcpy(host, s, (size_t)(colon - s));
		host[colon - s] = '\0';
		port_s = colon + 1;
	}
	if (parse_port(port_s, &port) < 0) {
		snprintf(err, errlen, "bad listen address '%s': port must be 0-65535", s);
		return -1;
	}
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&out->ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
			goto bad;
		out->len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&out->ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
			goto bad;
		out->len = sizeof(*a);
	}
	snprintf(out->text, sizeof(out->text), "%s", s);
	return 0;
bad:
	snprintf(err, errlen, "bad listen address '%s': want IPv4:PORT or [IPv6]:PORT, numeric", s);
	return -1;
}

/* ---- requests ---- */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
			     char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status, const char *text)
{
	return reply(conn, status, "text/plain; charset=utf-8", (char *)text, strlen(text),
		     MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	struct httpd *h = cls;

	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
	if (!strcmp(url, "/healthz"))
		return reply_text(conn, MHD_HTTP_OK, "ok\n");
	if (strcmp(url, "/metrics"))
		return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n");

	char *body = NULL;
	size_t len = 0;
	if (h->render(h->ctx, &body, &len) < 0 || !body)
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "could not render metrics\n");
	return reply(conn, MHD_HTTP_OK, PROM_CONTENT_TYPE, body, len, MHD_RESPMEM_MUST_FREE);
}

/* ---- lifecycle ---- */

/* Our own socket, so bind's errno (EADDRINUSE, EADDRNOTAVAIL) reaches the user. */
static int open_listener(const struct listen_addr *a, unsigned *port, char *err, size_t errlen)
{
	int one = 1;
	int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "listen %s: socket: %s", a->text, strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (a->ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0 || listen(fd, 64) < 0) {
		snprintf(err, errlen, "listen %s: %s", a->text, strerror(errno));
		close(fd);
		return -1;
	}
	struct sockaddr_storage bound;
	socklen_t blen = sizeof(bound);
	if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
		*port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
							  : ((struct sockaddr_in *)&bound)->sin_port);
	return fd;
}

struct httpd *httpd_start(const struct listen_addr *addr, httpd_render_fn render, void *ctx,
			  char *err, size_t errlen)
{
	struct httpd *h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(err, errlen, "httpd: out of memory");
		return NULL;
	}
	h->render = render;
	h->ctx = ctx;
	int fd = open_listener(addr, &h->port, err, errlen);
	if (fd < 0) {
		free(h);
		return NULL;
	}
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
	if (addr->ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* A scrape endpoint needs few connections; cap them and time out idle
	 * ones so a stuck client cannot pin the daemon. */
	h->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h,
				  MHD_OPTION_LISTEN_SOCKET, fd,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned)32,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
				  MHD_OPTION_END);
	if (!h->mhd) {
		snprintf(err, errlen, "listen %s: libmicrohttpd failed to start", addr->text);
		close(fd);
		free(h);
		return NULL;
	}
	return h;
}

unsigned httpd_port(const struct httpd *h)
{
	return h->port;
}

void httpd_stop(struct httpd *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->mhd);  /* also closes the listening socket */
	free(h);
}
