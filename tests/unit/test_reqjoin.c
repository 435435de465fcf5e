/* test_reqjoin.c - the join of engine requests and HTTP requests: a linked
 * request waits for its http record and then carries the socket's times
 * (the http record first, naming it); an http record that came first joins
 * the later requests of its link, the one open when the engine had each; an
 * unlinked request passes straight on; one whose link's records cannot be
 * its own (they began after the engine had it, or had ended) waits; a request whose http record never comes goes on at
 * the flush, or before a record from 30 s past its end. Requests chosen
 * among identical prompts (REQ_F_TWIN) wait 300 ms past their end, then
 * pair as a group with their group's sockets, whatever the kernel's
 * guesses: each with one that ended after its last token, its events and
 * tokens agreeing, even where one response's writer came late; a socket
 * outside the group is never taken; a link whose socket wrote a token
 * before the engine made one is crossed. */
#include <string.h>
#include "check.h"
#include "core/reqjoin.h"

struct out {
	unsigned types[16];
	struct request_event req[16];
	struct http_event http[16];
	size_t n, nreq, nhttp;
};

static int deliver(void *ctx, const void *data, size_t size)
{
	struct out *o = ctx;
	const struct event_header *h = data;

	if (o->n < 16)
		o->types[o->n++] = h->type;
	if (h->type == EV_REQUEST && o->nreq < 16)
		memcpy(&o->req[o->nreq++], data, sizeof(struct request_event));
	if (h->type == EV_HTTP && o->nhttp < 16)
		memcpy(&o->http[o->nhttp++], data, sizeof(struct http_event));
	return 0;
}

static struct request_event request(uint64_t req, uint64_t ts, uint64_t sock, uint32_t seq)
{
	struct request_event r;

	memset(&r, 0, sizeof(r));
	r.h.type = EV_REQUEST;
	r.h.pid = 10;
	r.h.ts_ns = ts;
	r.req = req;
	r.dur_ns = 500;
	r.ttft_ns = 100;
	r.prompt_tokens = 5;
	r.generated_tokens = 9;
	r.http_sock = sock;
	r.http_seq = seq;
	return r;
}

static struct http_event http(uint64_t start, uint64_t sock, uint32_t seq)
{
	struct http_event h;

	memset(&h, 0, sizeof(h));
	h.h.type = EV_HTTP;
	h.h.pid = 10;
	h.h.ts_ns = start;
	h.start_ns = start;
	h.resp_ns = start + 50;
	h.first_event_ns = start + 150;
	h.end_ns = start + 700;
	h.status = 200;
	h.events = 11;
	h.sock = sock;
	h.seq = seq;
	return h;
}

static void test_request_first(void)
{
	struct out o = { 0 };
	struct reqjoin j;
	struct request_event r = request(1, 1000, 0xabc, 2);
	struct http_event h = http(900, 0xabc, 2);

	reqjoin_init(&j, deliver, &o);
	CHECK(reqjoin_feed(&j, &r, sizeof(r)) == 0 && o.n == 0, "a linked request waits for its http record");
	CHECK(reqjoin_feed(&j, &h, sizeof(h)) == 0 && o.n == 2, "then both go on");
	CHECK(o.types[0] == EV_HTTP && o.types[1] == EV_REQUEST, "the http record first");
	CHECK(o.http[0].req == 1 && o.http[0].prompt_tokens == 5 && o.http[0].generated_tokens == 9,
	      "the http record names its engine request");
	CHECK(o.req[0].from == REQ_FROM_SOCKET && o.req[0].h.ts_ns == 900 && o.req[0].ttft_ns == 150 &&
	      o.req[0].dur_ns == 700, "the request carries the socket's times");
	CHECK(o.req[0].engine_ts_ns == 1000 && o.req[0].engine_ttft_ns == 100 && o.req[0].engine_dur_ns == 500,
	      "and the engine's own beside them");
	CHECK(o.req[0].http_status == 200 && o.req[0].http_events == 11, "status and events");
	CHECK(j.joined == 1 && j.unjoined == 0 && j.nheld == 0, "counted as joined");
	reqjoin_free(&j);
}

static void test_http_first(void)
{
	struct out o = { 0 };
	struct reqjoin j;
	struct http_event h = http(900, 0xdef, 1), other = http(950, 0xdef, 2);
	struct request_event r = request(4, 1000, 0xdef, 1);

	reqjoin_init(&j, deliver, &o);
	reqjoin_feed(&j, &h, sizeof(h));
	reqjoin_feed(&j, &other, sizeof(other));
	CHECK(o.n == 2, "http records go on at once");
	reqjoin_feed(&j, &r, sizeof(r));
	CHECK(o.n == 3 && o.req[0].from == REQ_FROM_SOCKET && o.req[0].h.ts_ns == 900,
	      "a request after its http record joins it (seq 1, not 2)");
	CHECK(o.req[0].flags & REQ_F_HTTP_FIRST, "and says its http record went out first");
	r.req = 5;
	reqjoin_feed(&j, &r, sizeof(r));
	CHECK(o.n == 4 && o.req[1].from == REQ_FROM_SOCKET && j.nheld == 0,
	      "a second engine request of the same HTTP request (a prompt array) joins it too");
	reqjoin_free(&j);
}

static void test_stale_link(void)
{
	struct out o = { 0 };
	struct reqjoin j;
	struct http_event old = http(900, 0x33, 1), newer = http(3000, 0x33, 1);
	struct request_event r = request(8, 3500, 0x33, 1), late = request(9, 5000, 0x33, 1);

	reqjoin_init(&j, deliver, &o);
	reqjoin_feed(&j, &old, sizeof(old));     /* a socket address and seq reused: */
	reqjoin_feed(&j, &newer, sizeof(newer));
	reqjoin_feed(&j, &r, sizeof(r));
	CHECK(o.nreq == 1 && o.req[0].from == REQ_FROM_SOCKET && o.req[0].h.ts_ns == 3000,
	      "of a link's http records, the one open when the engine had it is joined");
	reqjoin_feed(&j, &late, sizeof(late));   /* queued after that request had ended */
	CHECK(o.nreq == 1 && j.nheld == 1, "an http record that had ended is not joined: it waits for its own");
	reqjoin_flush(&j);
	CHECK(o.nreq == 2 && o.req[1].from == REQ_FROM_ENGINE, "and goes on unjoined at the flush");
	reqjoin_free(&j);
}

static void test_unlinked_and_bad(void)
{
	struct out o = { 0 };
	struct reqjoin j;
	struct request_event plain = request(2, 1000, 0, 0), late = request(3, 1000, 0x11, 1);
	struct http_event h = http(1200, 0x11, 1);   /* began after the engine had it */

	reqjoin_init(&j, deliver, &o);
	reqjoin_feed(&j, &plain, sizeof(plain));
	CHECK(o.n == 1 && o.req[0].from == REQ_FROM_ENGINE && o.req[0].h.ts_ns == 1000, "unlinked: straight on");
	reqjoin_feed(&j, &late, sizeof(late));
	reqjoin_feed(&j, &h, sizeof(h));
	CHECK(o.n == 2 && o.http[0].req == 0 && j.nheld == 1,
	      "a link the times contradict is not joined: the request waits for its own");
	reqjoin_flush(&j);
	CHECK(o.n == 3 && o.req[1].from == REQ_FROM_ENGINE && o.req[1].h.ts_ns == 1000, "unjoined at the flush");
	reqjoin_free(&j);
}

static void test_stale(void)
{
	struct out o = { 0 };
	struct reqjoin j;
	struct request_event r = request(5, 1000, 0x22, 1), later = request(6, 40000000000ull, 0, 0);

	reqjoin_init(&j, deliver, &o);
	reqjoin_feed(&j, &r, sizeof(r));
	CHECK(o.n == 0, "held");
	reqjoin_feed(&j, &later, sizeof(later));
	reqjoin_feed(&j, &later, sizeof(later));
	CHECK(j.nheld == 0 && o.nreq == 3 && o.req[0].req == 5 && o.req[0].from == REQ_FROM_ENGINE,
	      "the stale request goes on before the later record");
	CHECK(j.unjoined == 1, "a request 30 s past its end without its http record goes on unjoined");
	reqjoin_free(&j);
}

/* The release at exactly 30 s past the held request's end: a record that
 * ends at 30 s leaves it held, one that ends 1 ns later releases it. */
static void test_stale_boundary(void)
{
	struct out o = { 0 };
	struct reqjoin j;
	uint64_t end = 1000 + 500, hold = 30ull * 1000000000ull;
	struct request_event r = request(5, 1000, 0x22, 1);
	struct request_event at = request(6, end + hold - 500, 0, 0), past = request(7, end + hold - 499, 0, 0);

	reqjoin_init(&j, deliver, &o);
	reqjoin_feed(&j, &r, sizeof(r));
	reqjoin_feed(&j, &at, sizeof(at));
	CHECK(j.nheld == 1 && o.nreq == 1 && o.req[0].req == 6 && j.unjoined == 0,
	      "a record ending 30 s after the held request's end: still held (held %zu, out %zu)",
	      j.nheld, o.nreq);
	reqjoin_feed(&j, &past, sizeof(past));
	CHECK(j.nheld == 0 && o.nreq == 3 && o.req[1].req == 5 && o.req[1].from == REQ_FROM_ENGINE &&
	      j.unjoined == 1, "1 ns past 30 s: released unjoined, before the record (held %zu, out %zu)",
	      j.nheld, o.nreq);
	reqjoin_free(&j);
}

/* Two identical prompts, the kernel's links swapped (the planted cross):
 * A (1000..1500) guessed onto B's socket, B (1010..1900) onto A's. */
static void test_twins(void)
{
	struct out o = { 0 };
	struct reqjoin j;
	struct http_event ha = http(900, 0xa, 1), hb = http(905, 0xb, 1);
	struct request_event a = request(1, 1000, 0xb, 1), b = request(2, 1010, 0xa, 1), c;

	ha.end_ns = 1550;
	hb.end_ns = 1950;
	a.flags = b.flags = REQ_F_TWIN;
	a.ttft_ns = b.ttft_ns = 40;   /* first tokens at 1040 and 1050, the sockets' at 1050 and 1055 */
	b.dur_ns = 890;
	reqjoin_init(&j, deliver, &o);
	reqjoin_feed(&j, &ha, sizeof(ha));
	reqjoin_feed(&j, &hb, sizeof(hb));
	reqjoin_feed(&j, &a, sizeof(a));
	reqjoin_feed(&j, &b, sizeof(b));
	CHECK(o.nreq == 0 && j.ntwins == 2, "twins wait until their sockets' records are sure to be in");
	reqjoin_tick(&j, 1500 + 300000000ull - 1);
	CHECK(o.nreq == 0, "until 300 ms past its end");
	reqjoin_tick(&j, 1500 + 300000000ull);
	CHECK(o.nreq == 1 && j.ntwins == 1, "then A goes, and B waits for its own 300 ms");
	reqjoin_tick(&j, 1900 + 300000000ull);
	CHECK(o.nreq == 2 && o.req[0].from == REQ_FROM_SOCKET && o.req[0].http_sock == 0xa &&
	      o.req[0].dur_ns == 650, "twin A pairs with the socket that ended after its last token (A's)");
	CHECK(o.req[1].from == REQ_FROM_SOCKET && o.req[1].http_sock == 0xb && o.req[1].dur_ns == 1045,
	      "and twin B with B's, not the kernel's guess");
	/* a crossed link: the socket's first event (1050) before the engine's
	 * first token (1010 + 100) */
	c = request(3, 1010, 0xc, 1);
	c.flags = REQ_F_TWIN;
	CHECK(reqjoin_apply(&c, &(struct http_event){ .start_ns = 900, .first_event_ns = 1050, .end_ns = 2000 }) == -1 &&
	      (c.flags & REQ_F_CROSSED) && c.from == REQ_FROM_ENGINE, "a crossed twin link is refused, and says so");
	reqjoin_free(&j);
}

#define MS 1000000ull

/* The run that crossed under load: A (17 tokens, ends at 165 ms) and B
 * (23 tokens, ends at 204 ms), guessed onto each other's sockets; A's
 * writer came 40 ms late, so both sockets ended after both requests, and
 * B's record came before A's; B's queued time is another's. The events (tokens + 2, the framing learnt
 * from a request linked by its tokens) tell them apart. */
static void test_twins_late_writer(void)
{
	struct out o = { 0 };
	struct reqjoin j;
	struct request_event plain = request(9, 10 * MS, 0x9, 1), a = request(1, 100 * MS, 0xb, 1),
			     b = request(2, 101 * MS, 0xa, 1);
	struct http_event hp = http(10 * MS - 50, 0x9, 1), ha = http(99 * MS, 0xa, 1), hb = http(99 * MS + 5, 0xb, 1),
			  other = http(99 * MS + 9, 0xc, 1);

	hp.events = 11;   /* 9 tokens + 2 */
	a.flags = b.flags = REQ_F_TWIN;
	a.twin_group = b.twin_group = 7;
	a.ttft_ns = b.ttft_ns = 20 * MS;
	a.dur_ns = 65 * MS;
	a.generated_tokens = 17;
	/* B's queued time is the twin it was guessed onto (tokenized at 98
	 * ms, before both sockets began); its admission at 101 ms is its own */
	b.h.ts_ns = 98 * MS;
	b.queue_ns = 3 * MS;
	b.ttft_ns = 23 * MS;
	b.dur_ns = 106 * MS;
	b.generated_tokens = 23;
	ha.first_event_ns = hb.first_event_ns = other.first_event_ns = 121 * MS + 100;
	ha.end_ns = 205 * MS;
	ha.events = 19;
	hb.end_ns = 204 * MS + 500000;
	hb.events = 25;
	other.end_ns = 204 * MS + 100000;   /* not the group's: the nearest end, never taken */
	other.events = 25;
	reqjoin_init(&j, deliver, &o);
	reqjoin_feed(&j, &plain, sizeof(plain));
	reqjoin_feed(&j, &hp, sizeof(hp));
	CHECK(o.nreq == 1 && o.req[0].from == REQ_FROM_SOCKET && j.framing == 2, "the framing learnt: 2");
	reqjoin_feed(&j, &a, sizeof(a));
	reqjoin_feed(&j, &other, sizeof(other));
	reqjoin_feed(&j, &hb, sizeof(hb));
	reqjoin_feed(&j, &b, sizeof(b));
	reqjoin_feed(&j, &ha, sizeof(ha));
	reqjoin_tick(&j, 600 * MS);
	CHECK(o.nreq == 3 && o.req[1].req == 1 && o.req[1].http_sock == 0xa && o.req[1].http_events == 19,
	      "A (17 tokens) pairs with its own socket of 19 events, written late (got %#llx)",
	      (unsigned long long)o.req[1].http_sock);
	CHECK(o.req[2].req == 2 && o.req[2].http_sock == 0xb && o.req[2].http_events == 25,
	      "and B (23 tokens) with its 25 events, not the foreign socket that ended nearer");
	CHECK(j.ntwins == 0 && j.joined == 3 && j.unjoined == 0, "all joined, none held");
	reqjoin_free(&j);
}

/* A twin whose socket never shows goes on unjoined at the flush, counted. */
static void test_twin_unpaired(void)
{
	struct out o = { 0 };
	struct reqjoin j;
	struct request_event a = request(1, 1000, 0xa, 1);

	a.flags = REQ_F_TWIN;
	a.twin_group = 3;
	reqjoin_init(&j, deliver, &o);
	reqjoin_feed(&j, &a, sizeof(a));
	reqjoin_tick(&j, 10 * 1000 * MS);
	CHECK(o.nreq == 0 && j.ntwins == 1, "no socket yet: still waiting");
	reqjoin_flush(&j);
	CHECK(o.nreq == 1 && o.req[0].from == REQ_FROM_ENGINE && j.unjoined == 1, "unjoined at the flush");
	reqjoin_free(&j);
}

int main(void)
{
	test_twins();
	test_twins_late_writer();
	test_twin_unpaired();
	test_request_first();
	test_http_first();
	test_unlinked_and_bad();
	test_stale_link();
	test_stale();
	test_stale_boundary();
	printf("reqjoin: %d failures\n", failures);
	return check_report();
}
