/* topview_refresh.c - the refresh of `spantrace top`'s model (see
 * topview.h): each row's window into the numbers on screen (counts,
 * rates, quantiles, device times, %FWD) and the header's tok/s. The rows
 * fill in topview.c, whose refresh tick calls this; topview_tree.c lays
 * them out. */
#include "top/topview_model.h"

static uint64_t u64_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The time the window covers now, shortened to the time since start/reset
 * so early rates are not diluted by time nobody watched. */
static double window_seconds_since(const struct topview *tv, uint64_t now, uint64_t since)
{
	struct window geometry = { .nslots = tv->nslots, .slot_ns = tv->slot_ns };
	uint64_t span = window_span_ns(&geometry, now);
	uint64_t watched = now > since ? now - since : 0;
	return (double)u64_min(span, watched) / 1e9;
}

static double window_seconds(const struct topview *tv, uint64_t now)
{
	return window_seconds_since(tv, now, tv->base_ns);
}

/* tok/s now: tokens in the window over the window's time since generation
 * began; average: all tokens over first token begin .. last token end (the
 * engine's own tok/s for one run). */
static void compute_emit_rates(struct topview *tv, uint64_t now)
{
	const struct tv_row *first = &tv->req_rows[RR_TTFT], *next = &tv->req_rows[RR_ITL];
	uint64_t since = tv->first_emit_ns > tv->base_ns ? tv->first_emit_ns : tv->base_ns;
	double secs = window_seconds_since(tv, now, since);

	if (secs > 0)
		tv->tok_now = (double)(first->st.wcount + next->st.wcount) / secs;
	if (tv->last_emit_ns > tv->first_emit_ns)
		tv->tok_avg = (double)(tv->emits - 1) * 1e9 / (double)(tv->last_emit_ns - tv->first_emit_ns);
}

static void compute_token_rates(struct topview *tv, uint64_t now)
{
	tv->tok_now = tv->tok_avg = 0;
	if (!tv->have_token) {
		if (tv->emits)
			compute_emit_rates(tv, now);
		return;
	}
	uint64_t since = tv->first_token_ns > tv->base_ns ? tv->first_token_ns : tv->base_ns;
	double secs = window_seconds_since(tv, now, since);
	if (secs > 0)
		tv->tok_now = (double)tv->token.st.wcount / secs;
	uint64_t busy = tv->last_token_end_ns - tv->first_token_ns;
	if (busy)
		tv->tok_avg = (double)tv->token.count * 1e9 / (double)busy;
}

static void stats_from_hist(struct tv_row *r, const struct hist *h, double secs)
{
	r->st.wcount = h->count;
	r->st.rate = secs > 0 ? (double)h->count / secs : 0.0;
	r->st.mean_ns = hist_mean(h);
	r->st.p50_ns = hist_quantile(h, 0.50);
	r->st.p95_ns = hist_quantile(h, 0.95);
	r->st.p99_ns = hist_quantile(h, 0.99);
	r->st.max_ns = h->max;
	r->st.count = r->count;
	r->st.last_ns = r->last;
	r->st.share = -1.0;
	r->wsum = h->sum;
}

static void device_from_hist(struct tv_row *r, const struct hist *h)
{
	r->st.dev_wcount = h->count;
	r->st.dev_p50_ns = hist_quantile(h, 0.50);
	r->st.dev_p99_ns = hist_quantile(h, 0.99);
}

static void refresh_leaf(struct topview *tv, struct tv_row *r, uint64_t now, double secs)
{
	hist_reset(tv->scratch);
	if (r->win.slots)
		window_snapshot(&r->win, now, tv->scratch);
	stats_from_hist(r, tv->scratch, secs);
	hist_reset(tv->scratch);
	if (r->dwin.slots)
		window_snapshot(&r->dwin, now, tv->scratch);
	device_from_hist(r, tv->scratch);
}

/* An aggregate row: the merge of its members' windows, their summed
 * counts, and the last value of the member that ended last. */
static void refresh_aggregate(struct topview *tv, struct tv_row *agg, struct tv_row **members,
			      size_t n, uint64_t now, double secs)
{
	hist_reset(tv->scratch);
	agg->count = agg->last = agg->last_ts = 0;
	for (size_t i = 0; i < n; i++) {
		struct tv_row *m = members[i];
		if (m->win.slots)
			window_snapshot(&m->win, now, tv->scratch);
		agg->count += m->count;
		if (m->count && m->last_ts >= agg->last_ts) {
			agg->last_ts = m->last_ts;
			agg->last = m->last;
		}
	}
	stats_from_hist(agg, tv->scratch, secs);
	hist_reset(tv->scratch);
	for (size_t i = 0; i < n; i++)
		if (members[i]->dwin.slots)
			window_snapshot(&members[i]->dwin, now, tv->scratch);
	device_from_hist(agg, tv->scratch);
}

static void set_share(struct tv_row *r, uint64_t forward_sum)
{
	r->st.share = forward_sum ? (double)r->wsum / (double)forward_sum : -1.0;
}

/* A kind outside any layer that runs outside forward (mostly with no parent
 * span): its row goes at the root, beside forward, with no %FWD. */
int tv_runs_outside_forward(const struct topview *tv, unsigned k)
{
	return k != SPAN_FORWARD && k < SPAN_KIND_COUNT && tv->rooted[k] > tv->nested[k];
}

void tv_compute_rows(struct topview *tv, uint64_t now)
{
	double secs = window_seconds(tv, now);
	struct tv_row *members[TOPVIEW_MAX_LAYERS > KERNEL_COUNT ? TOPVIEW_MAX_LAYERS : KERNEL_COUNT];

	refresh_leaf(tv, &tv->request, now, secs);
	refresh_leaf(tv, &tv->token, now, secs);
	for (unsigned r = 0; r < TV_REQ_ROWS; r++)
		refresh_leaf(tv, &tv->req_rows[r], now, secs);
	for (unsigned r = 0; r < TV_CL_ROWS; r++) {
		refresh_leaf(tv, &tv->cl_rows[r], now, secs);
		tv->cl_rows[r].st.share = -1.0;   /* not part of a forward pass */
	}
	for (unsigned k = 0; k < SPAN_KINDS; k++)
		refresh_leaf(tv, &tv->none[k], now, secs);
	for (unsigned l = 0; l < tv->nlayers; l++)
		for (unsigned k = 0; k < SPAN_KINDS; k++)
			refresh_leaf(tv, &tv->layers[l].kind[k], now, secs);
	for (unsigned k = 0; k < SPAN_KINDS; k++) {
		for (unsigned l = 0; l < tv->nlayers; l++)
			members[l] = &tv->layers[l].kind[k];
		struct tv_row *agg = k == SPAN_LAYER ? &tv->layers_agg : &tv->phase_agg[k];
		refresh_aggregate(tv, agg, members, tv->nlayers, now, secs);
	}
	for (unsigned k = 0; k < KERNEL_COUNT; k++) {
		refresh_leaf(tv, &tv->kernel[k], now, secs);
		members[k] = &tv->kernel[k];
	}
	refresh_aggregate(tv, &tv->kernels_agg, members, KERNEL_COUNT, now, secs);

	uint64_t fwd = tv->none[SPAN_FORWARD].wsum;
	for (unsigned k = 0; k < SPAN_KINDS; k++) {
		set_share(&tv->none[k], tv_runs_outside_forward(tv, k) ? 0 : fwd);
		set_share(k == SPAN_LAYER ? &tv->layers_agg : &tv->phase_agg[k], fwd);
		for (unsigned l = 0; l < tv->nlayers; l++)
			set_share(&tv->layers[l].kind[k], fwd);
	}
	for (unsigned k = 0; k < KERNEL_COUNT; k++)
		set_share(&tv->kernel[k], fwd);
	set_share(&tv->kernels_agg, fwd);
	compute_token_rates(tv, now);
}
