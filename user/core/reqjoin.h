/* reqjoin.h - the one join of an engine's requests and the HTTP requests
 * they came in on.
 *
 * The BPF side links an engine's request to the HTTP request its server
 * thread read last (bpf/reqlink.bpf.h: request_event http_sock/http_seq).
 * This stage sits between the device-time join and the consumers. An
 * engine request that names an HTTP request is held until that request's
 * http record arrives (the engine finishes before the response's last
 * byte is written, and llama.cpp's are ended just before it), then both
 * go on as one request: the request record's ts_ns, ttft_ns and dur_ns
 * count from the arrival on the socket (from REQ_FROM_SOCKET), with the
 * engine's own beside them, and the http record names the engine's
 * request and its token counts. A link (a socket address and the request's
 * number on it) is reused by later connections, so a request joins the
 * record of its link that was open when the engine had it. A request whose
 * http record went out before it is joined from the recent ones and says so
 * (REQ_F_HTTP_FIRST). Held requests are bounded; one
 * whose http record never comes goes on unjoined, at the session's end or
 * 30 s after its own at the latest. Requests chosen among identical
 * prompts (REQ_F_TWIN: the kernel's link is a guess) are held apart until
 * TWIN_SETTLE past their end, and then paired with the socket records as a
 * group (twinpair.h). */
#ifndef SPANTRACE_REQJOIN_H
#define SPANTRACE_REQJOIN_H

#include <stddef.h>
#include <stdint.h>
#include "spantrace.h"

typedef int (*reqjoin_deliver_fn)(void *ctx, const void *data, size_t size);

#define REQJOIN_RECENT 1024   /* http records remembered for requests that end after them */
#define REQJOIN_TWIN_LINKS 256   /* the kernel's guessed links of recent twins */

/* A twin's guessed link: the group's guesses are its sockets, in some order. */
struct twin_link {
	uint64_t sock;
	uint32_t pid, group, seq;
};

struct reqjoin {
	reqjoin_deliver_fn deliver;
	void *ctx;
	struct request_event *held;   /* in arrival order */
	size_t nheld, cap_held;
	struct request_event *twins;  /* REQ_F_TWIN requests not yet paired */
	size_t ntwins, cap_twins;
	struct twin_link *links;      /* a ring of the last REQJOIN_TWIN_LINKS twins' guesses */
	size_t nlinks, next_link;
	int framing;                  /* events - tokens of framing_pid's joined requests; -1: unknown */
	uint32_t framing_pid;
	struct http_event *recent;    /* a ring of the last REQJOIN_RECENT http records */
	size_t nrecent, next_recent;
	uint64_t newest_ns;           /* the latest end seen: how long a request has waited */
	uint64_t joined;              /* requests given their socket's times */
	uint64_t unjoined;            /* linked requests handed on without them */
};

void reqjoin_init(struct reqjoin *j, reqjoin_deliver_fn deliver, void *ctx);
/* One record: handed on now, or (a linked request) held for its http
 * record. Returns the first non-zero deliver return. */
int reqjoin_feed(struct reqjoin *j, const void *data, size_t size);
/* The time is now (CLOCK_MONOTONIC) although no record came: twins due
 * are paired, and stale requests go on, on an idle server too. */
int reqjoin_tick(struct reqjoin *j, uint64_t now_ns);
/* Hands on every held request, unjoined (the session's end). */
int reqjoin_flush(struct reqjoin *j);
void reqjoin_free(struct reqjoin *j);

/* Joins r with the http record h of its request, in place (the fields
 * above); 0, or -1 when h cannot be r's (it began after r was queued, or
 * had ended by then). */
int reqjoin_apply(struct request_event *r, struct http_event *h);

#endif
