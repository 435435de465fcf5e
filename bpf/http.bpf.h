// SPDX-License-Identifier: GPL-2.0
/* http.bpf.h - --http: HTTP/1.x requests of traced servers, seen on their
 * sockets (http.bpf.c has the programs; spantrace.bpf.c's exit handler
 * ends a process's open requests through http_forget_pid).
 *
 * A connection is keyed by its socket. It becomes one when a read from it
 * starts with an HTTP method, so connections accepted before the attach
 * count too. Requests are delimited as they are read (the request line,
 * the headers, a Content-Length or chunked body), so several in one read
 * are several; responses are matched to them in order, as HTTP/1.1 says.
 * A request starts when its first bytes reached the socket (sk_data_ready,
 * or tcp_probe before Linux 6.6, on the servers' listening ports) and ends when its response's last byte is
 * sent: Content-Length, the chunked terminator, or the close. Nothing but
 * the method, the path before any '?', lengths, counts and times leaves
 * the kernel. */
#ifndef SPANTRACE_HTTP_BPF_H
#define SPANTRACE_HTTP_BPF_H

/* what http_send calls: agg_add, reserve (core), seq_end_request (engines) */
#include "core.bpf.h"
#include "requests.bpf.h"
#include "engines.bpf.h"
#include "reqlink.bpf.h"

#define HTTP_MAX_CONNS 16384
#define HTTP_WIN 4096        /* bytes of a piece read and scanned at once */
#define HTTP_WINS 4          /* windows scanned of one piece; the rest is counted */
#define HTTP_PIPE_MAX 64     /* requests read ahead of their responses, a connection */
#define HTTP_PRE_MAX 32      /* a request line's start kept across short reads */

enum http_conn_state {
	HC_IDLE,     /* no request waits for a response */
	HC_REQUEST,  /* the oldest request read waits for its response */
	HC_HEADERS,  /* that response's headers being sent */
	HC_BODY,     /* its body */
	HC_NOT_HTTP, /* the first bytes were not HTTP/1.x: ignored from then on */
};

/* Where the reading of requests is. */
enum http_rq_state {
	RQ_START,    /* the next byte starts a request line */
	RQ_PREFIX,   /* a request line begun in pieces too short to tell yet */
	RQ_HEAD,     /* in a request's line or headers */
	RQ_BODY,     /* rq_left bytes of its body to come */
	RQ_CHUNKED,  /* its chunked body (rq_chunk) */
	RQ_LOST,     /* a boundary was not found: nothing more is parsed */
};

/* How a body ends. */
enum http_body { BM_NONE, BM_LENGTH, BM_CHUNKED, BM_CLOSE };

/* A chunked body's framing, parsed byte by byte; chunk data is skipped. */
enum http_chunk_state { CK_SIZE, CK_EXT, CK_DATA, CK_DATA_END, CK_TRAILER, CK_DONE };

struct http_chunker {
	__s64 left;       /* CK_DATA: bytes of the chunk still to come */
	__u32 st;         /* enum http_chunk_state */
	__u32 line_len;   /* CK_TRAILER: bytes of the trailer line so far */
	__u32 digits;     /* CK_SIZE: hex digits so far */
	__u32 pad;
};

/* A request read ahead of its response (pipelining), waiting its turn. */
struct http_slot {
	__u64 start_ns, read_ns, req_bytes;
	__u32 flags, seq, no_body, pad;
	char method[HTTP_METHOD_LEN];
	char path[HTTP_PATH_LEN];
};

struct http_slot_key {
	__u64 sock;
	__u32 idx;   /* its place in the connection's queue, modulo HTTP_PIPE_MAX */
	__u32 pad;
};

struct http_conn {
	struct http_event e;  /* the request being answered, sent as it is at its end */
	__u32 tgid;           /* the process that read it */
	__u32 root;           /* the traced tree's root: the series' pid */
	__u32 state;          /* enum http_conn_state */
	__u32 body;           /* enum http_body of the response */
	__s64 body_left;      /* BM_LENGTH: bytes still to come */
	struct http_chunker chunk;
	__u32 line_len;       /* response headers: bytes of this line so far */
	__u32 dmatch;         /* "data:" matched so far on this body line; 6: no match (headers: 1 on the status line) */
	__u32 no_body;        /* HEAD: the headers end its response */
	__u32 opaque;         /* bytes of the response went out unseen (sendfile before its headers) */
	/* the reading of requests */
	__u32 rq_state;       /* enum http_rq_state */
	__u32 rq_line_len;    /* bytes of the header line so far */
	__u32 rq_first;       /* the request line, not a header, is being read */
	__u32 rq_seq;         /* the number of the request being read */
	__s64 rq_left;        /* RQ_BODY: its body still to come */
	__s64 rq_length;      /* its Content-Length (-1: none) */
	__u32 rq_chunked;     /* its body is chunked */
	__u32 rq_head;        /* the request being read is the one in e */
	struct http_chunker rq_chunk;
	__u32 q_head, q_tail; /* the queue of requests read ahead (http_pending) */
	__u32 pre_len;        /* RQ_PREFIX: bytes in pre */
	__u32 rq_in_buf;      /* RQ_HEAD: the whole piece is in the window already */
	__u64 arrival_ns;     /* unread bytes first reached the socket (sk_data_ready); 0: none */
	char pre[HTTP_PRE_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HTTP_MAX_CONNS);
	__type(key, __u64);   /* the socket's kernel address */
	__type(value, struct http_conn);
} http_conns __weak SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HTTP_MAX_CONNS);
	__type(key, struct http_slot_key);
	__type(value, struct http_slot);
} http_pending __weak SEC(".maps");

/* The socket's kernel address -> when unread bytes first reached it. LRU:
 * a connection that sends and is never read ages out by itself. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HTTP_MAX_CONNS);
	__type(key, __u64);
	__type(value, __u64);
} http_arrivals __weak SEC(".maps");

/* Bit p: local port p serves HTTP for a traced server (the arrival
 * hooks' filter, which run for every socket on the host): from
 * userspace's scan of their listening sockets, and from each request seen.
 * A bit array in global data: one load, not a hash lookup. */
__u64 http_port_bits[HTTP_PORT_BITS / 64] __weak;

static __always_inline int bit_test(const __u64 *bits, __u32 mask, __u32 i)
{
	return (bits[(i >> 6) & mask] >> (i & 63)) & 1;
}

static __always_inline void bit_set(__u64 *bits, __u32 mask, __u32 i, int on)
{
	if (on)
		__sync_fetch_and_or(&bits[(i >> 6) & mask], 1ull << (i & 63));
	else
		__sync_fetch_and_and(&bits[(i >> 6) & mask], ~(1ull << (i & 63)));
}

#define PORT_MASK (HTTP_PORT_BITS / 64 - 1)
#define PID_MASK (HTTP_PID_BITS / 64 - 1)

/* Processes whose sockets are traced: record's -p, -- CMD and --binary,
 * the daemon's engines, and their children (http_fork). Each has its bit
 * in http_pid_bits. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct http_watch);
} http_pids __weak SEC(".maps");

/* A request's end: into the kernel's histograms (what the daemon reads,
 * at once, however idle the server is then), and out as one record. */
static __always_inline void http_send(struct http_conn *c, __u32 end, __u64 now)
{
	__u64 first = c->e.first_event_ns ? c->e.first_event_ns : c->e.resp_ns;
	__u32 root = c->root;
	struct http_event *e;

	COUNT(http_done);
	/* a llama.cpp request linked to it ends first, so that its record
	 * reaches the join (user/core/reqjoin.h) before this one; only on a
	 * response that ended (a client gone may leave the engine a step yet) */
	if (end == HTTP_END_RESPONSE)
		seq_end_request(c->tgid, c->e.sock, c->e.seq, c->e.start_ns, first, now);
	agg_add(root, AGG_KIND_HTTP_REQUEST, (__s32)c->e.status, now - c->e.start_ns, end != HTTP_END_RESPONSE);
	if (first)
		agg_add(root, AGG_KIND_HTTP_TTFT, LAYER_NONE, first - c->e.start_ns, 0);
	if (c->e.flags & HTTP_F_SSE)
		agg_add(root, AGG_KIND_HTTP_EVENTS, LAYER_NONE, c->e.events, 0);
	if (stream_mode != STREAM_ALL)   /* the daemon reads the histograms only */
		return;
	e = reserve(EV_HTTP, sizeof(*e));
	if (!e)
		return;
	__builtin_memcpy(e, &c->e, sizeof(*e));
	e->h.type = EV_HTTP;
	e->h.pid = c->tgid;
	e->h.ts_ns = c->e.start_ns;
	e->end_ns = now;
	e->end = end;
	submit(e);
}

/* The queue of requests read ahead goes with its connection. */
static __always_inline void http_drop_pending(struct http_conn *c)
{
	struct http_slot_key k = { .sock = c->e.sock };

	for (__u32 i = 0; i < HTTP_PIPE_MAX && c->q_head + i != c->q_tail; i++) {
		k.idx = (c->q_head + i) % HTTP_PIPE_MAX;
		bpf_map_delete_elem(&http_pending, &k);
	}
	COUNT_N(http_lost_closed, c->q_tail - c->q_head);
	COUNT_N(http_done, c->q_tail - c->q_head);
	c->q_head = c->q_tail;
}

static long http_end_of_pid(struct bpf_map *map, __u64 *key, struct http_conn *c, void *data)
{
	if (c->tgid != *(__u32 *)data)
		return 0;
	if (c->state == HC_REQUEST || c->state == HC_HEADERS || c->state == HC_BODY)
		http_send(c, HTTP_END_EXIT, bpf_ktime_get_ns());
	http_drop_pending(c);
	bpf_map_delete_elem(map, key);
	return 0;
}

/* A traced process that exits ends its open requests; its connections go,
 * and its pid is no longer watched (it may come back as another program). */
static __always_inline void http_forget_pid(__u32 tgid)
{
	if (!bpf_map_lookup_elem(&http_pids, &tgid))
		return;
	bpf_for_each_map_elem(&http_conns, http_end_of_pid, &tgid, 0);
	bpf_map_delete_elem(&http_pids, &tgid);
	bit_set(http_pid_bits, PID_MASK, tgid, 0);
}

#endif
