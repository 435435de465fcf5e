// SPDX-License-Identifier: GPL-2.0
/* reqlink.bpf.h - which HTTP request an engine's request came in on.
 *
 * The server thread that read a request is the one that hands it to the
 * engine: our engine queues it (req_queued) on libmicrohttpd's thread,
 * llama-server tokenizes its prompt on cpp-httplib's. So the request a
 * thread read last is the one its next hand-over belongs to. http.bpf.c
 * notes each read (http_reading); requests.bpf.c and engines.bpf.h take
 * the link into the engine's request, which carries it out (request_event
 * http_sock/http_seq) for the tracer's join (user/core/reqjoin.h). */
#ifndef SPANTRACE_REQLINK_BPF_H
#define SPANTRACE_REQLINK_BPF_H

#include "spantrace.h"   /* HTTP_PID_BITS */

struct http_link {
	__u64 sock;   /* the socket's kernel address; 0: none */
	__u32 seq;    /* the request's number on it */
	__u32 pad;
};

/* tid -> the request it read last. LRU: threads come and go. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct http_link);
} http_reading __weak SEC(".maps");

/* llama.cpp's requests are sequences, which end only when a later event
 * says so; one linked to an HTTP request ends at its response's end
 * (http.bpf.c). (tgid, socket) -> that engine request. */
struct http_req_key {
	__u32 tgid;
	__u32 pad;
	__u64 sock;
};

struct http_req_val {
	__u64 req;    /* engine_requests' id */
	__u32 seq;    /* the HTTP request's number on the socket */
	__u32 twin_group;   /* the link is a guess among this group's identical prompts; 0: sure */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct http_req_key);
	__type(value, struct http_req_val);
} http_engine_reqs __weak SEC(".maps");

/* While a response's end ends the engine request linked to it for sure
 * (seq_end_request, called from http_send): the socket's times, which
 * that request's headline histograms (e2e, TTFT) take, as the client saw
 * them, instead of the engine's (req_finish). One a CPU: set and read in
 * one program's run. */
struct http_times {
	__u64 req;        /* the engine request they are for; 0: none */
	__u64 start_ns;   /* the request's arrival on the socket */
	__u64 first_ns;   /* its first token written (0: none) */
	__u64 end_ns;     /* the response's end */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct http_times);
} http_ending __weak SEC(".maps");

static __always_inline struct http_times *http_ending_times(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&http_ending, &zero);
}

/* Bit t: process t is in http_pids (http.bpf.h): its sockets are traced.
 * The socket hooks fire for every process's sockets; this is all that a
 * process nobody traces pays. Bits for every pid the kernel can give
 * (PID_MAX_LIMIT, 4M): 512 KiB. */
__u64 http_pid_bits[HTTP_PID_BITS / 64] __weak;

static __always_inline int http_pid_watched(__u32 tgid)
{
	return (http_pid_bits[(tgid >> 6) & (HTTP_PID_BITS / 64 - 1)] >> (tgid & 63)) & 1;
}

/* The request the current thread read last, if any (*l zeroed if none). */
static __always_inline void http_link_of_thread(struct http_link *l)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct http_link *cur = bpf_map_lookup_elem(&http_reading, &tid);

	if (cur)
		*l = *cur;
	else
		__builtin_memset(l, 0, sizeof(*l));
}

#endif
