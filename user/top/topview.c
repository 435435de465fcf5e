/* topview.c - the model of `spantrace top` (see topview.h): ingest,
 * windows, refresh, the visible tree and keys. Its text is format.c, the
 * curses screen top/screen.c, and the loop the one run loop
 * (commands/top.c); nothing here touches the terminal. */
#include "top/topview_impl.h"

#include <curses.h> /* key codes only */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/rssattr.h"
#include <unistd.h>
#include "core/grow.h"
#include "core/userspans.h"

/* ---- small helpers ---- */

static uint64_t u64_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static void row_free(struct tv_row *r)
{
	if (r->win.slots)
		window_free(&r->win);
	if (r->dwin.slots)
		window_free(&r->dwin);
}

static void row_add(struct topview *tv, struct tv_row *r, uint64_t t, uint64_t v)
{
	if (!r->win.slots && window_init(&r->win, tv->nslots, tv->slot_ns) != 0)
		tv->oom++; /* totals still count; the window is missing */
	if (r->win.slots)
		window_add(&r->win, t, v);
	r->count++;
	r->last = v;
	r->last_ts = t;
}

/* A span's device time (device clock), or a count of the spans whose
 * kernel records were lost: never a guessed value. */
static void row_add_device(struct topview *tv, struct tv_row *r, uint64_t t, uint64_t device_ns)
{
	if (device_ns == DEVICE_NS_NONE)
		return;
	if (device_ns == DEVICE_NS_LOST) {
		r->dlost++;
		tv->device_lost++;
		return;
	}
	if (!r->dwin.slots && window_init(&r->dwin, tv->nslots, tv->slot_ns) != 0)
		tv->oom++;
	if (r->dwin.slots)
		window_add(&r->dwin, t, device_ns);
	r->dcount++;
	tv->device_spans++;
}

/* ---- lifecycle ---- */

struct topview *topview_new(uint64_t refresh_ns, unsigned nslots, uint64_t start_ns)
{
	if (refresh_ns == 0 || nslots == 0)
		return NULL;
	struct topview *tv = calloc(1, sizeof(*tv));
	if (!tv)
		return NULL;
	tv->scratch = malloc(sizeof(*tv->scratch));
	if (!tv->scratch) {
		free(tv);
		return NULL;
	}
	tv->slot_ns = refresh_ns;
	tv->nslots = nslots;
	tv->start_ns = tv->base_ns = tv->now_ns = tv->prev_refresh_ns = start_ns;
	tv->none[SPAN_FORWARD].expanded = 1;
	tv->layers_agg.expanded = 1;
	tv->kernels_agg.expanded = 1;
	tv->page = 10;
	tv->procs.max = TOPVIEW_MAX_PIDS;
	return tv;
}

void topview_free(struct topview *tv)
{
	if (!tv)
		return;
	row_free(&tv->request);
	row_free(&tv->token);
	for (unsigned r = 0; r < TV_REQ_ROWS; r++)
		row_free(&tv->req_rows[r]);
	for (unsigned r = 0; r < TV_CL_ROWS; r++)
		row_free(&tv->cl_rows[r]);
	for (unsigned k = 0; k < SPAN_KINDS; k++)
		row_free(&tv->none[k]);
	for (unsigned k = 0; k < KERNEL_COUNT; k++)
		row_free(&tv->kernel[k]);
	for (unsigned l = 0; l < tv->nlayers; l++)
		for (unsigned k = 0; k < SPAN_KINDS; k++)
			row_free(&tv->layers[l].kind[k]);
	free(tv->layers);
	free(tv->binary);
	free(tv->level);
	free(tv->vis);
	free(tv->scratch);
	proc_table_free(&tv->procs);
	free(tv);
}

int topview_set_target(struct topview *tv, const char *binary, const char *level)
{
	char *b = binary ? strdup(binary) : NULL;
	char *l = level ? strdup(level) : NULL;
	if ((binary && !b) || (level && !l)) {
		free(b);
		free(l);
		return -1;
	}
	free(tv->binary);
	free(tv->level);
	tv->binary = b;
	tv->level = l;
	return 0;
}

void topview_set_drops(struct topview *tv, uint64_t dropped)
{
	tv->dropped = dropped;
}

void topview_set_invalid(struct topview *tv, uint64_t invalid)
{
	tv->invalid = invalid;
}

void topview_set_http(struct topview *tv, int traced, uint64_t in_flight)
{
	tv->http_traced = traced;
	tv->http_in_flight = in_flight;
}

void topview_set_ended(struct topview *tv, int ended)
{
	tv->ended = ended;
}

/* ---- ingest ---- */

/* Grows the layer table to hold layer; NULL when it can't. */
static struct tv_layer *layer_at(struct topview *tv, int layer)
{
	if (layer < 0 || layer >= TOPVIEW_MAX_LAYERS)
		return NULL;
	if ((unsigned)layer >= tv->nlayers) {
		unsigned n = (unsigned)layer + 1;
		struct tv_layer *grown = realloc(tv->layers, n * sizeof(*grown));
		if (!grown) {
			tv->oom++;
			return NULL;
		}
		memset(grown + tv->nlayers, 0, (n - tv->nlayers) * sizeof(*grown));
		tv->layers = grown;
		tv->nlayers = n;
	}
	return &tv->layers[layer];
}

static void note_pid(struct topview *tv, const struct event_header *h)
{
	tv->events++;
	proc_table_get(&tv->procs, h->pid);
}

void topview_on_span(struct topview *tv, const struct span_event *ev)
{
	note_pid(tv, &ev->h);
	if (!span_kind_known(ev->kind)) {
		tv->bad_events++;
		return;
	}
	if (ev->flags & SPAN_F_MISMATCH)
		tv->span_errors++;
	struct tv_row *row;
	if (ev->layer == LAYER_NONE) {
		row = &tv->none[ev->kind];
		if (ev->parent_kind < SPAN_KIND_COUNT)
			tv->nested[ev->kind]++;
		else
			tv->rooted[ev->kind]++;
	} else {
		struct tv_layer *l = layer_at(tv, ev->layer);
		if (!l) {
			tv->bad_events++;
			return;
		}
		row = &l->kind[ev->kind];
	}
	if (ev->kind == SPAN_FORWARD)
		tv->forwards_by_launch[span_launch_of(ev->flags)]++;
	row_add(tv, row, ev->h.ts_ns + ev->dur_ns, ev->dur_ns);
	row_add_device(tv, row, ev->h.ts_ns + ev->dur_ns, ev->device_ns);
}

void topview_on_token(struct topview *tv, const struct token_event *ev)
{
	note_pid(tv, &ev->h);
	if (!tv->have_token || ev->h.ts_ns < tv->first_token_ns)
		tv->first_token_ns = ev->h.ts_ns;
	if (!tv->have_token || ev->h.ts_ns + ev->dur_ns > tv->last_token_end_ns)
		tv->last_token_end_ns = ev->h.ts_ns + ev->dur_ns;
	tv->have_token = 1;
	row_add(tv, &tv->token, ev->h.ts_ns + ev->dur_ns, ev->dur_ns);
}

static struct tv_req *active_find(struct topview *tv, __u32 pid, __u64 req)
{
	for (unsigned i = 0; i < tv->nactive; i++)
		if (tv->active[i].pid == pid && tv->active[i].req == req)
			return &tv->active[i];
	return NULL;
}

static void active_remove(struct topview *tv, __u32 pid, __u64 req)
{
	struct tv_req *r = active_find(tv, pid, req);

	if (r)
		*r = tv->active[--tv->nactive];
}

void topview_on_request(struct topview *tv, const struct request_event *ev)
{
	uint64_t end = ev->h.ts_ns + ev->dur_ns;

	note_pid(tv, &ev->h);
	row_add(tv, &tv->request, end, ev->dur_ns);
	if (ev->flags & REQ_F_SERVED) {
		row_add(tv, &tv->req_rows[RR_QUEUE], end, ev->queue_ns);
		if (tv->gauges_seen) {   /* an engine that tells its queue (req_state); llama.cpp does not */
			tv->running = ev->running;
			tv->waiting = ev->waiting;
		}
	}
	active_remove(tv, ev->h.pid, ev->req);
}

void topview_on_emit(struct topview *tv, const struct emit_event *ev)
{
	struct tv_req *r = active_find(tv, ev->h.pid, ev->req);

	note_pid(tv, &ev->h);
	row_add(tv, &tv->req_rows[ev->first ? RR_TTFT : RR_ITL], ev->h.ts_ns, ev->gap_ns);
	if (!tv->emits || ev->h.ts_ns < tv->first_emit_ns)
		tv->first_emit_ns = ev->h.ts_ns;
	if (ev->h.ts_ns > tv->last_emit_ns)
		tv->last_emit_ns = ev->h.ts_ns;
	tv->emits++;
	if (r)
		r->tokens++;
}

void topview_on_http(struct topview *tv, const struct http_event *ev)
{
	uint64_t first = http_first_token_ns(ev);

	note_pid(tv, &ev->h);
	if (first)
		row_add(tv, &tv->req_rows[RR_HTTP_TTFT], first, first - ev->start_ns);
	row_add(tv, &tv->req_rows[RR_HTTP_E2E], ev->end_ns, ev->end_ns - ev->start_ns);
}

void topview_on_step(struct topview *tv, const struct step_event *ev)
{
	note_pid(tv, &ev->h);
	row_add(tv, &tv->req_rows[RR_STEP], ev->h.ts_ns + ev->dur_ns, ev->dur_ns);
	tv->last_step = *ev;
	tv->serving_seen = 1;
}

void topview_on_req_state(struct topview *tv, const struct req_state_event *ev)
{
	struct tv_req *r = active_find(tv, ev->h.pid, ev->req);

	note_pid(tv, &ev->h);
	tv->serving_seen = tv->gauges_seen = 1;
	tv->running = ev->running;
	tv->waiting = ev->waiting;
	if (!r && ev->state == REQ_QUEUED) {
		if (tv->nactive == TOPVIEW_MAX_ACTIVE) {
			tv->active_untracked++;
			return;
		}
		r = &tv->active[tv->nactive++];
		*r = (struct tv_req){ .pid = ev->h.pid, .req = ev->req, .queued_ns = ev->h.ts_ns };
	}
	if (!r)
		return; /* queued before we attached */
	r->running = ev->state == REQ_ADMITTED;
	r->preemptions += ev->state == REQ_PREEMPTED;
}

void topview_on_kernel(struct topview *tv, const struct kernel_event *ev)
{
	note_pid(tv, &ev->h);
	if (ev->kernel_id >= KERNEL_COUNT || ev->end_ns < ev->start_ns) {
		tv->bad_events++;
		return;
	}
	/* Device times are on the device clock: only their difference is
	 * used; the window takes the batch's host time. */
	row_add(tv, &tv->kernel[ev->kernel_id], ev->h.ts_ns, ev->end_ns - ev->start_ns);
}

static void on_pool_event(struct topview *tv, const struct alloc_event *ev)
{
	note_pid(tv, &ev->h);
	if (ev->pool >= POOL_COUNT) {
		tv->bad_events++;
		return;
	}
	if (proc_table_find(&tv->procs, ev->h.pid))   /* else counted untracked once */
		proc_table_handlers.alloc(&tv->procs, ev);
}

void topview_on_alloc(struct topview *tv, const struct alloc_event *ev)
{
	if (ev->unknown == 2)
		tv->at_attach++;   /* not an allocation made while watching */
	else
		tv->allocs++;
	on_pool_event(tv, ev);
}

void topview_on_free(struct topview *tv, const struct alloc_event *ev)
{
	tv->frees++;
	if (ev->unknown)
		tv->unknown_frees++;
	on_pool_event(tv, ev);
}

void topview_on_kv(struct topview *tv, const struct kv_event *ev)
{
	note_pid(tv, &ev->h);
	if (proc_table_find(&tv->procs, ev->h.pid))
		proc_table_handlers.kv(&tv->procs, ev);
}

/* ---- --opencl: one row per kind of loader call ---- */
static int on_cl_kernel(void *ctx, const struct cl_kernel_event *e)
{
	struct topview *tv = ctx;

	note_pid(tv, &e->h);
	row_add(tv, &tv->cl_rows[CLR_ENQUEUE], e->h.ts_ns, e->host_ns);
	return 0;
}

static int on_cl_call(void *ctx, const struct cl_call_event *e)
{
	struct topview *tv = ctx;
	unsigned r = e->h.type == EV_CL_WAIT ? CLR_WAIT : e->h.type == EV_CL_TRANSFER ? CLR_TRANSFER : CLR_BUILD;

	note_pid(tv, &e->h);
	row_add(tv, &tv->cl_rows[r], e->h.ts_ns, e->host_ns);
	return 0;
}

static int on_cl_devtime(void *ctx, const struct cl_devtime_event *e)
{
	struct topview *tv = ctx;

	note_pid(tv, &e->h);
	/* only a kernel whose START and END were both read has a duration */
	if ((e->mask & (CL_T_START | CL_T_END)) == (CL_T_START | CL_T_END) && e->t[3] >= e->t[2])
		row_add(tv, &tv->cl_rows[CLR_DEVICE], e->h.ts_ns, e->t[3] - e->t[2]);
	return 0;
}

static int on_cl_mem(void *ctx, const struct cl_mem_event *e)
{
	note_pid(ctx, &e->h);
	return 0;
}

static int on_span(void *tv, const struct span_event *e) { topview_on_span(tv, e); return 0; }
static int on_token(void *tv, const struct token_event *e) { topview_on_token(tv, e); return 0; }
static int on_request(void *tv, const struct request_event *e) { topview_on_request(tv, e); return 0; }
static int on_http(void *tv, const struct http_event *e) { topview_on_http(tv, e); return 0; }
static int on_emit(void *tv, const struct emit_event *e) { topview_on_emit(tv, e); return 0; }
static int on_step(void *tv, const struct step_event *e) { topview_on_step(tv, e); return 0; }
static int on_req_state(void *tv, const struct req_state_event *e) { topview_on_req_state(tv, e); return 0; }
static int on_kernel(void *tv, const struct kernel_event *e) { topview_on_kernel(tv, e); return 0; }
static int on_alloc(void *tv, const struct alloc_event *e) { topview_on_alloc(tv, e); return 0; }
static int on_free(void *tv, const struct alloc_event *e) { topview_on_free(tv, e); return 0; }
static int on_kv(void *tv, const struct kv_event *e) { topview_on_kv(tv, e); return 0; }

/* The serving engine's prefix cache: its hits as they happen, and its size
 * from every change and from the state dump of a late attach. */
static int on_probe(void *ctx, const struct probe_event *e)
{
	struct topview *tv = ctx;

	note_pid(tv, &e->h);
	if (e->probe == PROBE_ID_prefix_hit && e->nargs >= 2) {
		tv->prefix_hits++;
		tv->prefix_cached_tokens += e->args[1];
	} else if ((e->probe == PROBE_ID_prefix_cache || e->probe == PROBE_ID_state_prefix_cache) &&
		   e->nargs >= 2) {
		tv->prefix_entries = (uint32_t)e->args[0];
		tv->prefix_blocks = (uint32_t)e->args[1];
	} else {
		return 0;
	}
	tv->prefix_seen = tv->serving_seen = 1;
	return 0;
}

/* A dump repeats the tree: count each name once per process and dump. */
static int on_tensor(void *ctx, const struct tensor_event *e)
{
	struct topview *tv = ctx;

	note_pid(tv, &e->h);
	if (!strcmp(e->name, "tok_embeddings"))   /* the first of a dump */
		tv->tensors = tv->tensor_bytes = 0;
	tv->tensors++;
	tv->tensor_bytes += e->bytes;
	return 0;
}

/* profile-mode samples: nothing for top to show, but they are events */
static int on_sample(void *tv, const struct sample_event *e)
{
	((struct topview *)tv)->events++;
	return 0;
}

const struct event_handlers topview_handlers = {
	.span = on_span,
	.token = on_token,
	.request = on_request,
	.emit = on_emit,
	.http = on_http,
	.step = on_step,
	.req_state = on_req_state,
	.alloc = on_alloc,
	.free = on_free,
	.kv = on_kv,
	.kernel = on_kernel,
	.sample = on_sample,
	.cl_kernel = on_cl_kernel,
	.cl_call = on_cl_call,
	.cl_mem = on_cl_mem,
	.cl_devtime = on_cl_devtime,
	.tensor = on_tensor,
	.probe = on_probe,
};

int topview_on_record(void *ctx, const void *data, size_t size)
{
	struct topview *tv = ctx;
	struct event_sink sink = { &topview_handlers, tv };
	enum event_verdict v;

	event_dispatch(data, size, &sink, 1, &v);
	if (v != EVENT_OK) {
		tv->events++;
		tv->bad_events++;
	}
	return 0;
}

int topview_read_rss(__u32 pid, uint64_t *bytes)
{
	return rss_read((pid_t)pid, bytes);
}

int topview_poll_proc(struct topview *tv)
{
	int gone = 0;
	for (size_t i = 0; i < tv->procs.n; i++) {
		struct tv_rss *r = &tv->rss[i];
		r->ok = topview_read_rss(tv->procs.procs[i].pid, &r->bytes) == 0;
		gone += !r->ok;
	}
	return gone;
}

/* ---- refresh: windows -> numbers ---- */

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
static int runs_outside_forward(const struct topview *tv, unsigned k)
{
	return k != SPAN_FORWARD && k < SPAN_KIND_COUNT && tv->rooted[k] > tv->nested[k];
}

static void compute_rows(struct topview *tv, uint64_t now)
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
		set_share(&tv->none[k], runs_outside_forward(tv, k) ? 0 : fwd);
		set_share(k == SPAN_LAYER ? &tv->layers_agg : &tv->phase_agg[k], fwd);
		for (unsigned l = 0; l < tv->nlayers; l++)
			set_share(&tv->layers[l].kind[k], fwd);
	}
	for (unsigned k = 0; k < KERNEL_COUNT; k++)
		set_share(&tv->kernel[k], fwd);
	set_share(&tv->kernels_agg, fwd);
	compute_token_rates(tv, now);
}

static void layout(struct topview *tv);

void topview_refresh(struct topview *tv, uint64_t now_ns)
{
	if (tv->paused)
		return;
	uint64_t dt = now_ns > tv->prev_refresh_ns ? now_ns - tv->prev_refresh_ns : 0;
	if (dt > 0)
		tv->events_rate = (double)(tv->events - tv->events_prev) * 1e9 / (double)dt;
	tv->events_prev = tv->events;
	tv->prev_refresh_ns = now_ns;
	tv->now_ns = now_ns;
	compute_rows(tv, now_ns);
	layout(tv);
}

/* ---- layout: the visible tree ---- */

/* ttft: queued .. first token; itl: each gap after it; queue: queued ..
 * admitted; step: one serving engine step; http ttft and http e2e: from a
 * request's arrival on the server's socket to its first event (or byte)
 * written, and to its response's end. Where the socket's rows have data
 * they are the request's ttft and e2e, first, and the engine's ttft is
 * its part (socket_first_names): one TTFT, the one the client felt. */
static const char *const req_row_names[TV_REQ_ROWS] = { "ttft", "itl", "queue", "step", "http ttft",
							"http e2e" };
static const char *const socket_first_names[TV_REQ_ROWS] = { "engine ttft", "itl", "queue", "step", "ttft",
							     "e2e" };
static const unsigned socket_first_order[TV_REQ_ROWS] = { RR_HTTP_TTFT, RR_TTFT, RR_QUEUE, RR_ITL, RR_STEP,
							  RR_HTTP_E2E };

static int socket_first(const struct topview *tv)
{
	return tv->req_rows[RR_HTTP_TTFT].count || tv->req_rows[RR_HTTP_E2E].count;
}
static const char *const cl_row_names[TV_CL_ROWS] = { "cl enqueue", "cl wait", "cl transfer", "cl build",
						      "cl device" };

static struct tv_row *node_row(struct topview *tv, const struct tv_node *n)
{
	switch (n->type) {
	case N_REQUEST: return &tv->request;
	case N_TOKEN: return &tv->token;
	case N_REQ_ROW: return &tv->req_rows[n->kind];
	case N_CL_ROW: return &tv->cl_rows[n->kind];
	case N_FORWARD: return &tv->none[SPAN_FORWARD];
	case N_SPAN: return &tv->none[n->kind];
	case N_LAYERS: return &tv->layers_agg;
	case N_PHASE_AGG: return &tv->phase_agg[n->kind];
	case N_LAYER: return &tv->layers[n->layer].kind[SPAN_LAYER];
	case N_LAYER_PHASE: return &tv->layers[n->layer].kind[n->kind];
	case N_KERNELS: return &tv->kernels_agg;
	default: return &tv->kernel[n->kind];
	}
}

static int node_expandable(const struct tv_node *n)
{
	return n->type == N_FORWARD || n->type == N_LAYERS || n->type == N_LAYER ||
	       n->type == N_KERNELS;
}

static int node_equal(const struct tv_node *a, const struct tv_node *b)
{
	return a->type == b->type && a->kind == b->kind && a->layer == b->layer;
}

static int layer_has_data(const struct topview *tv, unsigned l)
{
	for (unsigned k = 0; k < SPAN_KINDS; k++)
		if (tv->layers[l].kind[k].count)
			return 1;
	return 0;
}

static unsigned layers_with_data(const struct topview *tv)
{
	unsigned n = 0;
	for (unsigned l = 0; l < tv->nlayers; l++)
		n += layer_has_data(tv, l);
	return n;
}

/* The engine's own spans (user-defined ones are rows of their own). */
static int any_span(const struct topview *tv)
{
	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++)
		if (tv->none[k].count)
			return 1;
	return layers_with_data(tv) > 0;
}

static void node_name(const struct topview *tv, const struct tv_node *n, char *buf, size_t size)
{
	switch (n->type) {
	case N_REQUEST: snprintf(buf, size, "request"); break;
	case N_TOKEN: snprintf(buf, size, "token"); break;
	case N_REQ_ROW:
		snprintf(buf, size, "%s", (socket_first(tv) ? socket_first_names : req_row_names)[n->kind]);
		break;
	case N_CL_ROW: snprintf(buf, size, "%s", cl_row_names[n->kind]); break;
	case N_LAYERS: snprintf(buf, size, "layers (%u)", layers_with_data(tv)); break;
	case N_LAYER: snprintf(buf, size, "layer %d", (int)n->layer); break;
	case N_KERNELS: snprintf(buf, size, "opencl kernels"); break;
	case N_KERNEL: snprintf(buf, size, "%s", cl_kernel_name(n->kind)); break;
	default: snprintf(buf, size, "%s", span_kind_name(n->kind)); break;
	}
}

#define MAX_KIDS (TOPVIEW_MAX_LAYERS + SPAN_KINDS + KERNEL_COUNT + TV_CL_ROWS + 4)

struct kid {
	struct tv_node node;
	double key;
	unsigned order;
};

static size_t push_kid(struct kid *kids, size_t n, uint8_t type, unsigned kind, int layer)
{
	kids[n].node = (struct tv_node){ .type = type, .kind = (uint16_t)kind, .layer = layer };
	kids[n].order = (unsigned)n;
	return n + 1;
}

static size_t children_of(const struct topview *tv, const struct tv_node *parent, struct kid *kids)
{
	size_t n = 0;
	if (!parent) {
		if (tv->request.count)
			n = push_kid(kids, n, N_REQUEST, 0, LAYER_NONE);
		if (tv->token.count)
			n = push_kid(kids, n, N_TOKEN, 0, LAYER_NONE);
		for (unsigned i = 0; i < TV_REQ_ROWS; i++) {
			unsigned r = socket_first(tv) ? socket_first_order[i] : i;

			if (tv->req_rows[r].count)
				n = push_kid(kids, n, N_REQ_ROW, r, LAYER_NONE);
		}
		if (any_span(tv))
			n = push_kid(kids, n, N_FORWARD, SPAN_FORWARD, LAYER_NONE);
		for (unsigned k = 0; k < SPAN_KIND_COUNT; k++)
			if (tv->none[k].count && runs_outside_forward(tv, k))
				n = push_kid(kids, n, N_SPAN, k, LAYER_NONE);
		if (tv->kernels_agg.count)
			n = push_kid(kids, n, N_KERNELS, 0, LAYER_NONE);
		for (unsigned r = 0; r < TV_CL_ROWS; r++)
			if (tv->cl_rows[r].count)
				n = push_kid(kids, n, N_CL_ROW, r, LAYER_NONE);
		for (unsigned k = USER_SPAN_BASE; k < SPAN_KINDS; k++)   /* --span */
			if (tv->none[k].count)
				n = push_kid(kids, n, N_SPAN, k, LAYER_NONE);
		return n;
	}
	switch (parent->type) {
	case N_FORWARD:
		for (unsigned k = 0; k < SPAN_KIND_COUNT; k++) {
			if (k == SPAN_LAYER && layers_with_data(tv))
				n = push_kid(kids, n, N_LAYERS, SPAN_LAYER, LAYER_NONE);
			if (k != SPAN_FORWARD && tv->none[k].count && !runs_outside_forward(tv, k))
				n = push_kid(kids, n, N_SPAN, k, LAYER_NONE);
		}
		break;
	case N_LAYERS:
		if (tv->split_layers) {
			for (unsigned l = 0; l < tv->nlayers; l++)
				if (layer_has_data(tv, l))
					n = push_kid(kids, n, N_LAYER, SPAN_LAYER, (int)l);
		} else {
			for (unsigned k = 0; k < SPAN_KINDS; k++)
				if (k != SPAN_LAYER && tv->phase_agg[k].count)
					n = push_kid(kids, n, N_PHASE_AGG, k, LAYER_NONE);
		}
		break;
	case N_LAYER:
		for (unsigned k = 0; k < SPAN_KINDS; k++)
			if (k != SPAN_LAYER && tv->layers[parent->layer].kind[k].count)
				n = push_kid(kids, n, N_LAYER_PHASE, k, parent->layer);
		break;
	case N_KERNELS:
		for (unsigned k = 0; k < KERNEL_COUNT; k++)
			if (tv->kernel[k].count)
				n = push_kid(kids, n, N_KERNEL, k, LAYER_NONE);
		break;
	default:
		break;
	}
	return n;
}

static double sort_key(const struct topview_row *st, enum topview_sort s)
{
	switch (s) {
	case TOPVIEW_SORT_COUNT: return (double)st->count;
	case TOPVIEW_SORT_RATE: return st->rate;
	case TOPVIEW_SORT_MEAN: return st->mean_ns;
	case TOPVIEW_SORT_P50: return (double)st->p50_ns;
	case TOPVIEW_SORT_P95: return (double)st->p95_ns;
	case TOPVIEW_SORT_P99: return (double)st->p99_ns;
	case TOPVIEW_SORT_MAX: return (double)st->max_ns;
	case TOPVIEW_SORT_SHARE: return st->share;
	default: return 0.0;
	}
}

/* Largest first; ties (and the tree order) keep the natural order. */
static int cmp_kid(const void *a, const void *b)
{
	const struct kid *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? 1 : -1;
	return (x->order > y->order) - (x->order < y->order);
}

static int vis_push(struct topview *tv, const struct tv_node *n)
{
	if (ARRAY_GROW(tv->vis, tv->cap_vis, tv->nvis)) {
		tv->oom++;
		return -1;
	}
	struct tv_vis *v = &tv->vis[tv->nvis++];
	v->node = *n;
	node_name(tv, n, v->name, sizeof(v->name));
	return 0;
}

static void emit(struct topview *tv, const struct tv_node *parent, int depth)
{
	struct kid kids[MAX_KIDS];
	size_t n = children_of(tv, parent, kids);
	for (size_t i = 0; i < n; i++)
		kids[i].key = sort_key(&node_row(tv, &kids[i].node)->st, tv->sort);
	if (tv->sort != TOPVIEW_SORT_TREE)
		qsort(kids, n, sizeof(kids[0]), cmp_kid);
	for (size_t i = 0; i < n; i++) {
		kids[i].node.depth = (uint8_t)depth;
		if (vis_push(tv, &kids[i].node) != 0)
			return;
		if (node_expandable(&kids[i].node) && node_row(tv, &kids[i].node)->expanded)
			emit(tv, &kids[i].node, depth + 1);
	}
}

/* Rebuilds the visible rows and keeps the selection on the same row. */
static void layout(struct topview *tv)
{
	int had = tv->nvis > 0;
	tv->nvis = 0;
	emit(tv, NULL, 0);
	if (had) {
		for (size_t i = 0; i < tv->nvis; i++) {
			if (node_equal(&tv->vis[i].node, &tv->sel_node)) {
				tv->sel = i;
				return;
			}
		}
	}
	if (tv->sel >= tv->nvis)
		tv->sel = tv->nvis ? tv->nvis - 1 : 0;
	if (tv->nvis)
		tv->sel_node = tv->vis[tv->sel].node;
}

/* ---- rows ---- */

size_t topview_nrows(const struct topview *tv)
{
	return tv->nvis;
}

int topview_row_at(const struct topview *tv, size_t i, struct topview_row *out)
{
	if (i >= tv->nvis)
		return -1;
	const struct tv_vis *v = &tv->vis[i];
	const struct tv_row *r = node_row((struct topview *)tv, &v->node);
	*out = r->st;
	out->name = v->name;
	out->depth = v->node.depth;
	out->expandable = node_expandable(&v->node);
	out->expanded = out->expandable && r->expanded;
	return 0;
}

long topview_find_row(const struct topview *tv, const char *name)
{
	for (size_t i = 0; i < tv->nvis; i++)
		if (strcmp(tv->vis[i].name, name) == 0)
			return (long)i;
	return -1;
}

size_t topview_selected(const struct topview *tv)
{
	return tv->sel;
}

enum topview_sort topview_sort_column(const struct topview *tv)
{
	return tv->sort;
}

int topview_paused(const struct topview *tv)
{
	return tv->paused;
}

int topview_help_shown(const struct topview *tv)
{
	return tv->help;
}

void topview_set_page(struct topview *tv, int rows)
{
	tv->page = rows > 1 ? rows : 1;
}

uint64_t topview_slot_ns(const struct topview *tv)
{
	return tv->slot_ns;
}

/* ---- keys ---- */

static void select_row(struct topview *tv, long i)
{
	if (tv->nvis == 0)
		return;
	if (i < 0)
		i = 0;
	if ((size_t)i >= tv->nvis)
		i = (long)tv->nvis - 1;
	tv->sel = (size_t)i;
	tv->sel_node = tv->vis[i].node;
}

static int set_expanded(struct topview *tv, int want)
{
	if (tv->nvis == 0 || !node_expandable(&tv->vis[tv->sel].node))
		return 0;
	struct tv_row *r = node_row(tv, &tv->vis[tv->sel].node);
	r->expanded = want < 0 ? !r->expanded : want;
	layout(tv);
	return 1;
}

static void row_reset(struct tv_row *r)
{
	if (r->win.slots)
		window_reset(&r->win);
	if (r->dwin.slots)
		window_reset(&r->dwin);
}

static void reset_windows(struct topview *tv)
{
	struct tv_row *fixed[] = { &tv->request, &tv->token, &tv->req_rows[RR_TTFT], &tv->req_rows[RR_ITL],
				   &tv->req_rows[RR_QUEUE], &tv->req_rows[RR_STEP] };
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		row_reset(fixed[i]);
	for (unsigned k = 0; k < SPAN_KINDS; k++) {
		row_reset(&tv->none[k]);
		for (unsigned l = 0; l < tv->nlayers; l++)
			row_reset(&tv->layers[l].kind[k]);
	}
	for (unsigned k = 0; k < KERNEL_COUNT; k++)
		row_reset(&tv->kernel[k]);
	for (unsigned r = 0; r < TV_CL_ROWS; r++)
		row_reset(&tv->cl_rows[r]);
	tv->base_ns = tv->now_ns;
	compute_rows(tv, tv->now_ns);
	layout(tv);
}

enum topview_key_result topview_key(struct topview *tv, int ch)
{
	if (ch == 'q' || ch == 'Q')
		return TOPVIEW_KEY_QUIT;
	if (tv->help) { /* any key closes the help */
		tv->help = 0;
		return TOPVIEW_KEY_REDRAW;
	}
	switch (ch) {
	case KEY_UP: case 'k': select_row(tv, (long)tv->sel - 1); break;
	case KEY_DOWN: case 'j': select_row(tv, (long)tv->sel + 1); break;
	case KEY_PPAGE: select_row(tv, (long)tv->sel - tv->page); break;
	case KEY_NPAGE: select_row(tv, (long)tv->sel + tv->page); break;
	case KEY_HOME: case 'g': select_row(tv, 0); break;
	case KEY_END: case 'G': select_row(tv, (long)tv->nvis - 1); break;
	case '\n': case '\r': case KEY_ENTER: case 'e':
		if (!set_expanded(tv, -1))
			return TOPVIEW_KEY_IGNORED;
		break;
	case KEY_RIGHT: case '+': set_expanded(tv, 1); break;
	case KEY_LEFT: case '-': set_expanded(tv, 0); break;
	case 'l':
		tv->split_layers = !tv->split_layers;
		tv->layers_agg.expanded = 1;
		layout(tv);
		break;
	case 's': tv->sort = (tv->sort + 1) % TOPVIEW_SORT_COUNT_; layout(tv); break;
	case 'S':
		tv->sort = (tv->sort + TOPVIEW_SORT_COUNT_ - 1) % TOPVIEW_SORT_COUNT_;
		layout(tv);
		break;
	case 'p': case ' ': tv->paused = !tv->paused; break;
	case 'r': reset_windows(tv); break;
	case 'h': case '?': tv->help = 1; break;
	case KEY_RESIZE: break;
	default: return TOPVIEW_KEY_IGNORED;
	}
	return TOPVIEW_KEY_REDRAW;
}

const char *const topview_help_lines[] = {
	"spantrace top - keys",
	"",
	"  q            quit",
	"  Up/Down j/k  move the selection (PgUp/PgDn, Home/End)",
	"  Enter or e   expand or collapse the selected row",
	"  Right/Left   expand / collapse",
	"  l            layers: one aggregate row <-> layer N rows",
	"  s / S        next / previous sort column (* marks it)",
	"  p or space   pause the display (events are still counted)",
	"  r            reset the windows",
	"  h or ?       this help (any key closes it)",
	"",
	"COUNT since start; RATE/s, MEAN, P50..MAX over the window;",
	"%FWD = the row's time / forward's time in the window.",
	NULL,
};

