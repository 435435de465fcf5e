/* runstats.c - the run's totals and distributions (see runstats.h). */
#include "analysis/runstats.h"

#include <string.h>

static struct dist *all_dists(struct runstats *r, size_t i)
{
	struct dist *named[] = { &r->tokens, &r->requests, &r->ttft, &r->itl, &r->queue, &r->prefill,
				 &r->decode, &r->steps, &r->step_tokens, &r->http_ttft, &r->http_e2e,
				 &r->unjoined_ttft, &r->unjoined_e2e };

	if (i < SPAN_KINDS)
		return &r->spans[i];
	i -= SPAN_KINDS;
	if (i < SPAN_KIND_COUNT)
		return &r->device[i];
	i -= SPAN_KIND_COUNT;
	if (i < KERNEL_COUNT)
		return &r->kernels[i];
	i -= KERNEL_COUNT;
	return i < sizeof(named) / sizeof(named[0]) ? named[i] : NULL;
}

int runstats_init(struct runstats *r, const struct slo *slo)
{
	struct dist *d;

	memset(r, 0, sizeof(*r));
	if (slo)
		r->slo = *slo;
	for (size_t i = 0; (d = all_dists(r, i)); i++)
		if (dist_init(d, DIST_DEFAULT_CAP))
			return -1;
	return 0;
}

void runstats_free(struct runstats *r)
{
	struct dist *d;

	for (size_t i = 0; (d = all_dists(r, i)); i++)
		dist_free(d);
}

uint64_t runstats_spans(const struct runstats *r)
{
	uint64_t n = 0;

	for (int k = 0; k < SPAN_KINDS; k++)
		n += r->spans[k].hist.count;
	return n;
}

uint64_t runstats_tokens_generated(const struct runstats *r)
{
	return r->tokens.hist.count ? r->tokens.hist.count : r->emits;
}

const char *runstats_tokens_from(const struct runstats *r)
{
	return r->tokens.hist.count ? "token" : r->emits ? "emit" : "none";
}

/* Token spans: all of them over first begin .. last end. Emits are
 * instants: the gaps after the first over first .. last (top's average). */
double runstats_tokens_per_s(const struct runstats *r)
{
	uint64_t n = r->tokens.hist.count;
	double secs;

	if (!n) {
		secs = (r->last_emit_ns - r->first_emit_ns) / 1e9;
		return r->emits > 1 && secs > 0 ? (r->emits - 1) / secs : 0;
	}
	secs = (r->last_token_end_ns - r->first_token_ns) / 1e9;
	return secs > 0 ? n / secs : 0;
}

double runstats_device_utilization(const struct runstats *r)
{
	uint64_t wall = r->last_span_end_ns > r->first_span_ns ? r->last_span_end_ns - r->first_span_ns : 0;

	return wall ? (double)r->device_busy_ns / (double)wall : 0;
}

static int on_span(void *ctx, const struct span_event *e)
{
	struct runstats *r = ctx;

	if (e->kind < SPAN_KIND_COUNT) {
		if (!r->first_span_ns || e->h.ts_ns < r->first_span_ns)
			r->first_span_ns = e->h.ts_ns;
		if (e->h.ts_ns + e->dur_ns > r->last_span_end_ns)
			r->last_span_end_ns = e->h.ts_ns + e->dur_ns;
	}
	dist_add(&r->spans[e->kind], e->dur_ns);
	r->mismatched += !!(e->flags & SPAN_F_MISMATCH);
	if (e->kind < SPAN_KIND_COUNT && e->device_ns == DEVICE_NS_LOST)
		r->device_lost[e->kind]++;
	else if (e->kind < SPAN_KIND_COUNT && e->device_ns != DEVICE_NS_NONE)
		dist_add(&r->device[e->kind], e->device_ns);
	return 0;
}

static int on_token(void *ctx, const struct token_event *e)
{
	struct runstats *r = ctx;

	if (!r->tokens.hist.count || e->h.ts_ns < r->first_token_ns)
		r->first_token_ns = e->h.ts_ns;
	if (e->h.ts_ns + e->dur_ns > r->last_token_end_ns)
		r->last_token_end_ns = e->h.ts_ns + e->dur_ns;
	dist_add(&r->tokens, e->dur_ns);
	return 0;
}

/* Goodput's test: TTFT, and the mean gap after the first token (TPOT). */
static int meets_slo(const struct slo *slo, const struct request_event *e)
{
	if (slo->ttft_ns && (!e->ttft_ns || e->ttft_ns > slo->ttft_ns))
		return 0;
	if (slo->itl_ns && e->itl_count && e->decode_ns / e->itl_count > slo->itl_ns)
		return 0;
	return 1;
}

/* A served request that came over HTTP and was not joined with it: its
 * socket's figures are in the http records, so its engine's stay out of
 * the headline. */
static int unjoined_served(const struct runstats *r, const struct request_event *e)
{
	return r->http && (e->flags & REQ_F_SERVED) && e->from != REQ_FROM_SOCKET;
}

static int on_request(void *ctx, const struct request_event *e)
{
	struct runstats *r = ctx;

	if (e->ttft_ns) {
		dist_add(&r->prefill, e->prefill_ns);
		dist_add(&r->decode, e->decode_ns);
	}
	if (e->flags & REQ_F_SERVED)
		dist_add(&r->queue, e->queue_ns);
	r->preemptions += e->preemptions;
	if (unjoined_served(r, e)) {
		dist_add(&r->unjoined_e2e, e->dur_ns);
		if (e->ttft_ns)
			dist_add(&r->unjoined_ttft, e->ttft_ns);
	} else {
		dist_add(&r->requests, e->dur_ns);
		if (e->ttft_ns)
			dist_add(&r->ttft, e->ttft_ns);
		r->slo_met += meets_slo(&r->slo, e);
		r->headline_from_engine += e->from != REQ_FROM_SOCKET;
	}
	if (e->from == REQ_FROM_SOCKET)
		r->req_joined++;
	else
		r->req_engine_only++;
	r->req_twins_unlinked += (e->flags & REQ_F_UNLINKED) != 0;
	r->req_crossed += (e->flags & REQ_F_CROSSED) != 0;
	return 0;
}

static int on_emit(void *ctx, const struct emit_event *e)
{
	struct runstats *r = ctx;

	if (!r->emits || e->h.ts_ns < r->first_emit_ns)
		r->first_emit_ns = e->h.ts_ns;
	if (e->h.ts_ns > r->last_emit_ns)
		r->last_emit_ns = e->h.ts_ns;
	r->emits++;
	if (!e->first)
		dist_add(&r->itl, e->gap_ns);
	return 0;
}

static int on_http(void *ctx, const struct http_event *e)
{
	struct runstats *r = ctx;
	uint64_t first = http_first_token_ns(e);

	dist_add(&r->http_e2e, e->end_ns - e->start_ns);
	if (first)
		dist_add(&r->http_ttft, first - e->start_ns);
	r->http_events += e->events;
	r->http_streams += !!(e->flags & HTTP_F_SSE);
	return 0;
}

static int on_step(void *ctx, const struct step_event *e)
{
	struct runstats *r = ctx;

	dist_add(&r->steps, e->dur_ns);
	dist_add(&r->step_tokens, (uint64_t)e->prefill_tokens + e->decode_tokens);
	return 0;
}

/* The serving engine's prefix-cache hits (probe rows with no program). */
static int on_probe(void *ctx, const struct probe_event *e)
{
	struct runstats *r = ctx;

	if (e->probe == PROBE_ID_prefix_hit && e->nargs >= 2) {
		r->prefix_hits++;
		r->prefix_cached_tokens += e->args[1];
	}
	return 0;
}

static int on_kernel(void *ctx, const struct kernel_event *e)
{
	struct runstats *r = ctx;
	uint64_t d = e->end_ns > e->start_ns ? e->end_ns - e->start_ns : 0;

	dist_add(&r->kernels[e->kernel_id], d);
	r->device_busy_ns += d;
	return 0;
}

const struct event_handlers runstats_handlers = {
	.span = on_span,
	.token = on_token,
	.request = on_request,
	.kernel = on_kernel,
	.emit = on_emit,
	.step = on_step,
	.probe = on_probe,
	.http = on_http,
};
