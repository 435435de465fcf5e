// SPDX-License-Identifier: GPL-2.0
/* http.bpf.h - --http: HTTP/1.x requests of a traced server, seen on its
 * sockets (http.bpf.c has the programs; spantrace.bpf.c's exit handler
 * ends a process's open requests through http_forget_pid).
 *
 * A connection is keyed by (tgid, fd). It becomes one when a read of a TCP
 * socket starts with an HTTP method, so connections accepted before the
 * attach count too. A request starts when its first bytes reached the
 * socket (raw tracepoint tcp_probe, on the server's listening ports) and
 * ends when its response's last byte is written: Content-Length, the
 * chunked terminator, or the close. Server-sent events are the "data:"
 * lines of a text/event-stream body, across writes. Nothing but the method,
 * the path before any '?', lengths, counts and times leaves the kernel. */
#ifndef SPANTRACE_HTTP_BPF_H
#define SPANTRACE_HTTP_BPF_H

#include "reqlink.bpf.h"

#define HTTP_MAX_CONNS 16384
#define HTTP_SCAN_MAX 4096   /* bytes of one write scanned (less one); the rest only counted */
#define HTTP_IOV_MAX 4       /* iovecs of one writev/sendmsg looked at */

enum http_conn_state {
	HC_IDLE,     /* between requests */
	HC_REQUEST,  /* read, no response byte yet */
	HC_HEADERS,  /* the response's headers being written */
	HC_BODY,     /* its body */
	HC_NOT_HTTP, /* the first bytes were not HTTP/1.x: ignored from then on */
	HC_PREFIX,   /* a request line begun in pieces too short to tell yet */
};

#define HTTP_PRE_MAX 32   /* a request line's start kept across short reads */

struct http_conn_key {
	__u32 tgid;
	__u32 fd;
};

struct http_conn {
	struct http_event e;  /* the request in progress, sent as it is at its end */
	__s64 body_left;      /* Content-Length still to come */
	__u64 tail;           /* the last 8 bytes written, newest lowest */
	__u32 state;          /* enum http_conn_state */
	__u32 line_len;       /* response header line: bytes so far, CR not counted */
	__u32 dmatch;         /* "data:" matched so far on this body line; 6: no match */
	__u32 no_body;        /* HEAD, 1xx, 204, 304: the headers end it */
	__u32 pre_len;        /* HC_PREFIX: bytes in pre */
	char pre[HTTP_PRE_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HTTP_MAX_CONNS);
	__type(key, struct http_conn_key);
	__type(value, struct http_conn);
} http_conns __weak SEC(".maps");

/* The socket's kernel address -> when unread bytes first reached it. LRU:
 * a connection that sends and is never read ages out by itself. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HTTP_MAX_CONNS);
	__type(key, __u64);
	__type(value, __u64);
} http_arrivals __weak SEC(".maps");

/* Local ports the traced servers serve HTTP on (tcp_probe's filter): from
 * userspace's scan of their listening sockets, and from each request seen. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} http_ports __weak SEC(".maps");

/* Processes whose sockets are traced when no single target is
 * (target_tgid 0): the daemon's engines, added as it attaches to them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} http_pids __weak SEC(".maps");

/* A request's end: into the kernel's histograms (what the daemon reads,
 * at once, however idle the server is then), and out as one record. */
static __always_inline void http_send(__u32 tgid, struct http_conn *c, __u32 end, __u64 now)
{
	__u64 first = c->e.first_event_ns ? c->e.first_event_ns : c->e.resp_ns;
	struct http_event *e;

	/* a llama.cpp request linked to it ends first, so that its record
	 * reaches the join (user/core/reqjoin.h) before this one; only on a
	 * response that ended (a client gone may leave the engine a step yet) */
	if (end == HTTP_END_RESPONSE)
		seq_end_request(tgid, c->e.sock, c->e.seq, now);
	agg_add(tgid, AGG_KIND_HTTP_REQUEST, (__s32)c->e.status, now - c->e.start_ns, end != HTTP_END_RESPONSE);
	if (first)
		agg_add(tgid, AGG_KIND_HTTP_TTFT, LAYER_NONE, first - c->e.start_ns, 0);
	if (c->e.flags & HTTP_F_SSE)
		agg_add(tgid, AGG_KIND_HTTP_EVENTS, LAYER_NONE, c->e.events, 0);
	e = reserve(EV_HTTP, sizeof(*e));
	if (!e)
		return;
	__builtin_memcpy(e, &c->e, sizeof(*e));
	e->h.type = EV_HTTP;
	e->h.ts_ns = c->e.start_ns;
	e->end_ns = now;
	e->end = end;
	submit(e);
}

static long http_end_of_pid(struct bpf_map *map, struct http_conn_key *key, struct http_conn *c, void *data)
{
	if (key->tgid != *(__u32 *)data)
		return 0;
	if (c->state == HC_REQUEST || c->state == HC_HEADERS || c->state == HC_BODY)
		http_send(key->tgid, c, HTTP_END_EXIT, bpf_ktime_get_ns());
	bpf_map_delete_elem(map, key);
	return 0;
}

/* A process that exits ends its open requests; its connections go, and
 * its pid is no longer watched (it may come back as another program). */
static __always_inline void http_forget_pid(__u32 tgid)
{
	bpf_for_each_map_elem(&http_conns, http_end_of_pid, &tgid, 0);
	bpf_map_delete_elem(&http_pids, &tgid);
}

#endif
