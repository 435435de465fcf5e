/* reqjoin.c - see reqjoin.h. */
#include <stdlib.h>
#include <string.h>
#include "reqjoin.h"
#include "events.h"
#include "grow.h"
#include "twinpair.h"

/* A request held this long past the newest record's time without its http
 * record gets none: its response was never seen (--no-http, or lost). */
#define HOLD_MAX_NS (30ull * 1000000000ull)
#define HOLD_MAX 4096
/* A twin's socket record comes within this of its end (its response's
 * last write, from a thread that may wait for a core): then it is paired. */
#define TWIN_SETTLE_NS (300ull * 1000000ull)

void reqjoin_init(struct reqjoin *j, reqjoin_deliver_fn deliver, void *ctx)
{
	memset(j, 0, sizeof(*j));
	j->deliver = deliver;
	j->ctx = ctx;
	j->recent = calloc(REQJOIN_RECENT, sizeof(*j->recent));   /* none: requests wait for theirs */
	j->links = calloc(REQJOIN_TWIN_LINKS, sizeof(*j->links));
	j->framing = -1;
}

static int same_request(const struct request_event *r, const struct http_event *h)
{
	return r->h.pid == h->h.pid && r->http_sock == h->sock && r->http_seq == h->seq;
}

int reqjoin_apply(struct request_event *r, struct http_event *h)
{
	uint64_t first = http_first_token_ns(h), had = request_engine_had_ns(r);

	/* the socket's request began before the engine had it, and was still
	 * open then: else the link is stale (a socket address reused) */
	if (h->start_ns > had || h->end_ns < had)
		return -1;
	/* a link chosen among identical prompts (REQ_F_TWIN) is crossed when
	 * the socket wrote its first token before the engine made one */
	if ((r->flags & REQ_F_TWIN) && request_token_before_engine(r, h)) {
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
	if (joined && !(r->flags & REQ_F_TWIN) && r->http_events >= r->generated_tokens) {
		j->framing = (int)(r->http_events - r->generated_tokens);   /* a link by its tokens: sure */
		j->framing_pid = r->h.pid;
	}
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

/* ---- identical prompts' requests, paired as a group ---- */

static uint64_t twin_end(const struct request_event *r)
{
	return r->h.ts_ns + r->dur_ns;
}

static int twin_due(const struct reqjoin *j, const struct request_event *r, int all)
{
	return all || twin_end(r) + TWIN_SETTLE_NS <= j->newest_ns;
}

/* One group's pairing: the due twins of rs[0]'s pid and group (at most
 * TWINPAIR_MAX, in arrival order, which is their ends' order) and the
 * recent unjoined records of the group's guessed links that any of them
 * could have come on (the guesses are the group's sockets, in some order;
 * another request's socket is none of them). Each
 * paired one joins its record; one left unpaired waits for a later record
 * unless all must go or it is stale. Returns the deliver's. */
struct twin_round {
	size_t idx[TWINPAIR_MAX], n;
	const struct request_event *rs[TWINPAIR_MAX];
	size_t hk[TWINPAIR_CANDS], m;
	const struct http_event *hs[TWINPAIR_CANDS];
	long out[TWINPAIR_MAX];
};

/* h is the guessed link of a twin of r's group. */
static int group_link(const struct reqjoin *j, const struct request_event *r, const struct http_event *h)
{
	for (size_t n = 0; n < j->nlinks; n++) {
		const struct twin_link *l = &j->links[n];

		if (l->pid == r->h.pid && l->group == r->twin_group && l->sock == h->sock && l->seq == h->seq)
			return 1;
	}
	return 0;
}

static void round_candidates(struct reqjoin *j, struct twin_round *t)
{
	int framing = t->rs[0]->h.pid == j->framing_pid ? j->framing : -1;

	for (size_t n = 1; n <= j->nrecent && t->m < TWINPAIR_CANDS; n++) {
		size_t k = (j->next_recent + REQJOIN_RECENT - n) % REQJOIN_RECENT;
		size_t i;

		if (j->recent[k].req || !group_link(j, t->rs[0], &j->recent[k]))
			continue;
		for (i = 0; i < t->n && twinpair_cost(t->rs[i], &j->recent[k], framing) == TWINPAIR_NONE; i++)
			;
		if (i < t->n) {
			t->hk[t->m] = k;
			t->hs[t->m++] = &j->recent[k];
		}
	}
	twinpair_solve(t->rs, t->n, t->hs, t->m, framing, t->out);
}

/* Takes twins[i] out of the list: its copy. */
static struct request_event take_twin(struct reqjoin *j, size_t i)
{
	struct request_event r = j->twins[i];

	memmove(j->twins + i, j->twins + i + 1, (j->ntwins - i - 1) * sizeof(*j->twins));
	j->ntwins--;
	return r;
}

/* A twin going on unpaired: its kernel's guess is crossed (REQ_F_CROSSED)
 * if that socket wrote its first token before the engine made one. */
static void mark_crossed(const struct reqjoin *j, struct request_event *r)
{
	for (size_t n = 1; n <= j->nrecent; n++) {
		const struct http_event *h = &j->recent[(j->next_recent + REQJOIN_RECENT - n) % REQJOIN_RECENT];

		if (same_request(r, h) && request_token_before_engine(r, h)) {
			r->flags |= REQ_F_CROSSED;
			return;
		}
	}
}

static int settle_round(struct reqjoin *j, struct twin_round *t, int all)
{
	struct request_event got[TWINPAIR_MAX];
	int joined[TWINPAIR_MAX], rc = 0;
	size_t ngot = 0;

	round_candidates(j, t);
	for (size_t q = t->n; q-- > 0;) {   /* from the last, so earlier indexes hold */
		struct request_event *r = &j->twins[t->idx[q]];
		long c = t->out[q];

		if (c >= 0) {
			struct http_event h = *t->hs[c];

			r->http_sock = h.sock;
			r->http_seq = h.seq;
			if (reqjoin_apply(r, &h) == 0) {
				j->recent[t->hk[c]].req = r->req;
				r->flags |= REQ_F_HTTP_FIRST;
				joined[ngot] = 1;
				got[ngot++] = take_twin(j, t->idx[q]);
				continue;
			}
		}
		if (all || twin_end(r) + HOLD_MAX_NS < j->newest_ns) {
			mark_crossed(j, r);
			joined[ngot] = 0;
			got[ngot++] = take_twin(j, t->idx[q]);
		}
	}
	while (!rc && ngot--)   /* in end order again */
		rc = deliver_request(j, &got[ngot], joined[ngot]);
	return rc;
}

/* twins[first]'s group was tried in this pass already: a due twin of it
 * sits before (a round that paired none leaves all of them in place). */
static int group_tried(const struct reqjoin *j, size_t first, int all)
{
	const struct request_event *r0 = &j->twins[first];

	for (size_t k = 0; k < first; k++)
		if (j->twins[k].h.pid == r0->h.pid && j->twins[k].twin_group == r0->twin_group &&
		    twin_due(j, &j->twins[k], all))
			return 1;
	return 0;
}

/* Pairs every group with a due twin, each once a pass; all: the session's
 * end, every twin. */
static int settle_twins(struct reqjoin *j, int all)
{
	int rc = 0;

	for (size_t first = 0; !rc && first < j->ntwins;) {
		const struct request_event *r0 = &j->twins[first];
		struct twin_round t = { 0 };
		size_t before;

		if (!twin_due(j, r0, all) || group_tried(j, first, all)) {
			first++;
			continue;
		}
		for (size_t i = first; i < j->ntwins && t.n < TWINPAIR_MAX; i++) {
			const struct request_event *r = &j->twins[i];

			if (r->h.pid == r0->h.pid && r->twin_group == r0->twin_group && twin_due(j, r, all)) {
				t.idx[t.n] = i;
				t.rs[t.n++] = r;
			}
		}
		before = j->ntwins;
		rc = settle_round(j, &t, all);
		if (j->ntwins == before)
			first++;   /* none could go yet: the next group */
	}
	return rc;
}

static int on_request(struct reqjoin *j, const struct request_event *in)
{
	struct request_event r = *in;

	if (r.flags & REQ_F_TWIN) {
		if (j->links) {
			j->links[j->next_link] = (struct twin_link){ .sock = r.http_sock, .pid = r.h.pid,
								     .group = r.twin_group, .seq = r.http_seq };
			j->next_link = (j->next_link + 1) % REQJOIN_TWIN_LINKS;
			if (j->nlinks < REQJOIN_TWIN_LINKS)
				j->nlinks++;
		}
		if (ARRAY_GROW(j->twins, j->cap_twins, j->ntwins))
			return deliver_request(j, &r, 0);
		j->twins[j->ntwins++] = r;
		return settle_twins(j, 0);
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
	return rc ? rc : settle_twins(j, 0);
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

int reqjoin_tick(struct reqjoin *j, uint64_t now_ns)
{
	int rc;

	if (now_ns > j->newest_ns)
		j->newest_ns = now_ns;
	if ((rc = release_stale(j)))
		return rc;
	return settle_twins(j, 0);
}

int reqjoin_flush(struct reqjoin *j)
{
	int rc = settle_twins(j, 1);

	while (!rc && j->nheld)
		rc = release(j, 0);
	return rc;
}

void reqjoin_free(struct reqjoin *j)
{
	free(j->held);
	free(j->twins);
	free(j->links);
	free(j->recent);
	j->twins = NULL;
	j->links = NULL;
	j->ntwins = j->cap_twins = 0;
	j->held = NULL;
	j->recent = NULL;
	j->nheld = j->cap_held = 0;
}
