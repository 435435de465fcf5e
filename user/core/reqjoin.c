/* reqjoin.c - see reqjoin.h. */
#include <stdlib.h>
#include <string.h>
#include "reqjoin.h"
#include "events.h"
#include "grow.h"

/* A request held this long past the newest record's time without its http
 * record gets none: its response was never seen (--no-http, or lost). */
#define HOLD_MAX_NS (30ull * 1000000000ull)
#define HOLD_MAX 4096

void reqjoin_init(struct reqjoin *j, reqjoin_deliver_fn deliver, void *ctx)
{
	memset(j, 0, sizeof(*j));
	j->deliver = deliver;
	j->ctx = ctx;
	j->recent = calloc(REQJOIN_RECENT, sizeof(*j->recent));   /* none: requests wait for theirs */
}

static int same_request(const struct request_event *r, const struct http_event *h)
{
	return r->h.pid == h->h.pid && r->http_sock == h->sock && r->http_seq == h->seq;
}

int reqjoin_apply(struct request_event *r, struct http_event *h)
{
	uint64_t first = http_first_token_ns(h);

	/* the socket's request began before the engine had it, and was still
	 * open then: else the link is stale (a socket address reused) */
	if (h->start_ns > r->h.ts_ns || h->end_ns < r->h.ts_ns)
		return -1;
	/* a link chosen among identical prompts (REQ_F_TWIN) is crossed when
	 * the socket wrote its first token before the engine made one */
	if ((r->flags & REQ_F_TWIN) && r->ttft_ns && first && r->h.ts_ns + r->ttft_ns > first) {
		r->flags |= REQ_F_CROSSED;
		return -1;
	}
	r->from = REQ_FROM_SOCKET;
	r->engine_ts_ns = r->h.ts_ns;
	r->engine_ttft_ns = r->ttft_ns;
	r->engine_dur_ns = r->dur_ns;
	r->h.ts_ns = h->start_ns;
	/* no token from the engine, no first token on the socket either */
	r->ttft_ns = r->engine_ttft_ns && first > h->start_ns ? first - h->start_ns : 0;
	r->dur_ns = h->end_ns - h->start_ns;
	r->http_status = h->status;
	r->http_events = h->events;
	h->req = r->req;
	h->prompt_tokens = r->prompt_tokens;
	h->generated_tokens = r->generated_tokens;
	return 0;
}

static int deliver_request(struct reqjoin *j, struct request_event *r, int joined)
{
	if (joined)
		j->joined++;
	else
		j->unjoined++;
	return j->deliver(j->ctx, r, sizeof(*r));
}

/* Hands on held[i] unjoined and drops it from the list. */
static int release(struct reqjoin *j, size_t i)
{
	struct request_event r = j->held[i];

	memmove(j->held + i, j->held + i + 1, (j->nheld - i - 1) * sizeof(*j->held));
	j->nheld--;
	return deliver_request(j, &r, 0);
}

/* Requests whose http record should have come long ago go on without it. */
static int release_stale(struct reqjoin *j)
{
	int rc = 0;

	while (!rc && j->nheld &&
	       (j->nheld >= HOLD_MAX || j->held[0].h.ts_ns + j->held[0].dur_ns + HOLD_MAX_NS < j->newest_ns))
		rc = release(j, 0);
	return rc;
}

/* The recent http record a request chosen among identical prompts
 * (REQ_F_TWIN: the kernel's choice is a guess) belongs to: of those of its
 * process not yet joined that were open while it ran, the one whose
 * response ended first after its last token. -1: none. */
static long twin_http(const struct reqjoin *j, const struct request_event *r)
{
	uint64_t end = r->h.ts_ns + r->dur_ns, first = r->ttft_ns ? r->h.ts_ns + r->ttft_ns : 0, gap = UINT64_MAX;
	long best = -1;

	for (size_t n = 1; n <= j->nrecent; n++) {
		size_t k = (j->next_recent + REQJOIN_RECENT - n) % REQJOIN_RECENT;
		const struct http_event *h = &j->recent[k];

		if (h->h.pid != r->h.pid || h->req || h->start_ns > r->h.ts_ns || h->end_ns < end ||
		    (first && http_first_token_ns(h) < first))
			continue;
		if (h->end_ns - end < gap) {
			gap = h->end_ns - end;
			best = (long)k;
		}
	}
	return best;
}

static int on_request(struct reqjoin *j, const struct request_event *in)
{
	struct request_event r = *in;
	long k;

	if ((r.flags & REQ_F_TWIN) && (k = twin_http(j, &r)) >= 0) {
		struct http_event h = j->recent[k];

		r.http_sock = h.sock;
		r.http_seq = h.seq;
		if (reqjoin_apply(&r, &h) == 0) {
			j->recent[k].req = r.req;
			r.flags |= REQ_F_HTTP_FIRST;
			return deliver_request(j, &r, 1);
		}
	}

	/* its http record came first (the engine's end was seen late, or the
	 * client left first): of that link's records (a socket address and
	 * its seq are reused by later connections), the one open when the
	 * engine had the request; one record may serve several requests */
	for (size_t n = 1; n <= j->nrecent; n++) {
		struct http_event h = j->recent[(j->next_recent + REQJOIN_RECENT - n) % REQJOIN_RECENT];

		if (same_request(&r, &h) && reqjoin_apply(&r, &h) == 0) {
			r.flags |= REQ_F_HTTP_FIRST;
			return deliver_request(j, &r, 1);
		}
	}
	if (ARRAY_GROW(j->held, j->cap_held, j->nheld))
		return deliver_request(j, &r, 0);
	j->held[j->nheld++] = r;
	return release_stale(j);
}

/* Takes the held requests of h's link that h was open for (a later
 * connection may reuse the link) out of the list, into out (at most max;
 * the rest stay held); the count. */
static size_t take_held(struct reqjoin *j, const struct http_event *h, struct request_event *out, size_t max)
{
	size_t n = 0, i = 0;

	while (i < j->nheld && n < max) {
		if (!same_request(&j->held[i], h) || h->start_ns > j->held[i].h.ts_ns ||
		    h->end_ns < j->held[i].h.ts_ns) {
			i++;
			continue;
		}
		out[n++] = j->held[i];
		memmove(j->held + i, j->held + i + 1, (j->nheld - i - 1) * sizeof(*j->held));
		j->nheld--;
	}
	return n;
}

static int on_http(struct reqjoin *j, const struct http_event *in)
{
	struct http_event h = *in;
	struct request_event taken[8];   /* one HTTP request, several engine requests (a prompt array) */
	int ok[8], rc;
	size_t n = take_held(j, &h, taken, 8);

	for (size_t i = 0; i < n; i++)
		ok[i] = reqjoin_apply(&taken[i], &h) == 0;
	if (j->recent) {   /* for the engine's requests that end after it */
		j->recent[j->next_recent] = h;
		j->next_recent = (j->next_recent + 1) % REQJOIN_RECENT;
		if (j->nrecent < REQJOIN_RECENT)
			j->nrecent++;
	}
	/* the socket's record first: OTLP parents the requests under it */
	rc = j->deliver(j->ctx, &h, sizeof(h));
	for (size_t i = 0; i < n && !rc; i++)
		rc = deliver_request(j, &taken[i], ok[i]);
	return rc;
}

/* The latest time a record says has passed: its begin, or a request's or
 * an http record's end. */
static void note_time(struct reqjoin *j, const struct event_header *h, size_t size)
{
	uint64_t t = h->ts_ns;

	if (h->type == EV_REQUEST && size >= sizeof(struct request_event))
		t += ((const struct request_event *)h)->dur_ns;
	else if (h->type == EV_HTTP && size >= sizeof(struct http_event))
		t = ((const struct http_event *)h)->end_ns;
	if (t > j->newest_ns)
		j->newest_ns = t;
}

int reqjoin_feed(struct reqjoin *j, const void *data, size_t size)
{
	const struct event_header *h = data;
	int rc;

	if (size < sizeof(*h))
		return j->deliver(j->ctx, data, size);
	note_time(j, h, size);
	if ((rc = release_stale(j)))
		return rc;
	if (h->type == EV_REQUEST && size >= sizeof(struct request_event) &&
	    ((const struct request_event *)data)->http_sock)
		return on_request(j, data);
	if (h->type == EV_HTTP && size >= sizeof(struct http_event))
		return on_http(j, data);
	return j->deliver(j->ctx, data, size);
}

int reqjoin_flush(struct reqjoin *j)
{
	int rc = 0;

	while (!rc && j->nheld)
		rc = release(j, 0);
	return rc;
}

void reqjoin_free(struct reqjoin *j)
{
	free(j->held);
	free(j->recent);
	j->held = NULL;
	j->recent = NULL;
	j->nheld = j->cap_held = 0;
}
