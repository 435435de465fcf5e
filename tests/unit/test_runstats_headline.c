/* test_runstats_headline.c - the summary's request figures with --http:
 * reqjoin's output fed to runstats, as record does. A served request joined
 * with its socket is in the headline (ttft, e2e) on the socket's clock; one
 * whose link fails (a planted stale link: its socket's request began after
 * the engine had it; a planted crossed one: the socket wrote a token before
 * the engine made one) is not, its engine times are kept apart
 * (unjoined_*) and it is counted. Without --http, or for a request that did
 * not come over HTTP (not served), the engine's figures are the headline. */
#include <string.h>
#include "check.h"
#include "core/reqjoin.h"
#include "analysis/runstats.h"

static int to_stats(void *ctx, const void *data, size_t size)
{
	const struct event_header *h = data;

	(void)size;
	if (h->type == EV_REQUEST)
		return runstats_handlers.request(ctx, data);
	if (h->type == EV_HTTP)
		return runstats_handlers.http(ctx, data);
	return 0;
}

static struct request_event request(uint64_t req, uint64_t ts, uint64_t sock, uint32_t seq, uint32_t flags)
{
	struct request_event r;

	memset(&r, 0, sizeof(r));
	r.h.type = EV_REQUEST;
	r.h.pid = 10;
	r.h.ts_ns = ts;
	r.req = req;
	r.flags = REQ_F_SERVED | flags;
	r.dur_ns = 5000;
	r.ttft_ns = 1000;   /* the engine's: 1 us */
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
	h.resp_ns = start + 100;
	h.first_event_ns = start + 3000;   /* the socket's TTFT: 3 us */
	h.end_ns = start + 9000;
	h.status = 200;
	h.events = 4;
	h.sock = sock;
	h.seq = seq;
	h.flags = HTTP_F_SSE;
	return h;
}

/* joined, stale and crossed requests through reqjoin into runstats */
static void feed(struct runstats *st)
{
	struct reqjoin j;
	struct request_event good = request(1, 1000, 0xa, 1, 0);
	struct http_event hgood = http(500, 0xa, 1);
	/* stale: the socket's request began after the engine had it */
	struct request_event stale = request(2, 20000, 0xb, 1, 0);
	struct http_event hstale = http(30000, 0xb, 1);
	/* crossed: a twin whose socket wrote its first token (50000 + 3000)
	 * before the engine made one (50500 + 9000) */
	struct request_event crossed = request(3, 50500, 0xc, 1, REQ_F_TWIN);
	struct http_event hcrossed = http(50000, 0xc, 1);

	crossed.ttft_ns = 9000;
	reqjoin_init(&j, to_stats, st);
	reqjoin_feed(&j, &good, sizeof(good));
	reqjoin_feed(&j, &hgood, sizeof(hgood));
	reqjoin_feed(&j, &stale, sizeof(stale));
	reqjoin_feed(&j, &hstale, sizeof(hstale));
	reqjoin_feed(&j, &crossed, sizeof(crossed));
	reqjoin_feed(&j, &hcrossed, sizeof(hcrossed));
	reqjoin_flush(&j);
	reqjoin_free(&j);
}

static void test_http_headline(void)
{
	struct runstats st;

	CHECK(runstats_init(&st, NULL) == 0, "runstats_init");
	st.http = 1;
	feed(&st);
	CHECK(st.req_joined == 1 && st.req_engine_only == 2, "1 joined, 2 not: %llu, %llu",
	      (unsigned long long)st.req_joined, (unsigned long long)st.req_engine_only);
	CHECK(st.req_crossed == 1, "the crossed link counted: %llu", (unsigned long long)st.req_crossed);
	CHECK(st.ttft.hist.count == 1 && st.ttft.hist.max == 3000,
	      "the headline TTFT is the joined request's, on the socket's clock (3 us): count %llu max %llu",
	      (unsigned long long)st.ttft.hist.count, (unsigned long long)st.ttft.hist.max);
	CHECK(st.requests.hist.count == 1 && st.requests.hist.max == 9000, "the headline e2e likewise");
	CHECK(st.headline_from_engine == 0, "no headline figure from the engine");
	CHECK(st.unjoined_ttft.hist.count == 2 && st.unjoined_e2e.hist.count == 2,
	      "the failed links' engine times kept apart: %llu", (unsigned long long)st.unjoined_ttft.hist.count);
	CHECK(st.http_ttft.hist.count == 3, "every socket TTFT in http.ttft: %llu",
	      (unsigned long long)st.http_ttft.hist.count);
	runstats_free(&st);
}

static void test_no_http(void)
{
	struct runstats st;
	struct request_event cli = request(7, 100, 0, 0, 0);

	CHECK(runstats_init(&st, NULL) == 0, "runstats_init");
	feed(&st);   /* no --http: the engine's figures are all there is */
	CHECK(st.ttft.hist.count == 3 && st.headline_from_engine == 2, "without --http every request in the headline");
	runstats_free(&st);
	CHECK(runstats_init(&st, NULL) == 0, "runstats_init");
	st.http = 1;
	cli.flags = 0;   /* not served: did not come over HTTP */
	runstats_handlers.request(&st, &cli);
	CHECK(st.ttft.hist.count == 1 && st.headline_from_engine == 1 && st.unjoined_ttft.hist.count == 0,
	      "with --http, a request not served over HTTP keeps the engine's figures as its headline");
	runstats_free(&st);
}

int main(void)
{
	test_http_headline();
	test_no_http();
	return check_report();
}
