/* topview.c - the model of `spantrace top` (see topview.h): its
 * lifecycle and ingest, the events into rows' windows and the header's
 * counts, and the refresh tick. At each tick the windows become numbers
 * in topview_refresh.c, the numbers the visible tree (with its keys) in
 * topview_tree.c; its text is format.c, the curses screen top/screen.c,
 * and the loop the one run loop (commands/top.c); nothing here touches
 * the terminal. */
#include "top/topview_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/rssattr.h"
#include <unistd.h>
#include "core/userspans.h"

/* ---- small helpers ---- */

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

/* ---- refresh: the numbers, then the tree ---- */

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
	tv_compute_rows(tv, now_ns);
	tv_layout(tv);
}
