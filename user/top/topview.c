/* topview.c - the model, layout, keys and text rendering of `spantrace top`
 * (see topview.h). The curses screen is top/screen.c and the loop is the
 * one run loop (commands/top.c); nothing here touches the terminal. */
#include "top/topview.h"
#include "core/grow.h"

#include <curses.h> /* key codes only */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/stats.h"

/* One line of the table: a window plus totals, and its numbers after the
 * last refresh. Aggregate rows have no window of their own. */
struct tv_row {
	struct window win;            /* slots == NULL until the first value */
	uint64_t count, last, last_ts;
	int expanded;
	struct topview_row st; /* numbers of the last refresh */
	uint64_t wsum;         /* summed time in the window */
};

/* A layer's own span (kind[SPAN_LAYER]) and its phases. */
struct tv_layer {
	struct tv_row kind[SPAN_KIND_COUNT];
};

enum node_type {
	N_REQUEST, N_TOKEN, N_FORWARD, N_SPAN, N_LAYERS, N_PHASE_AGG,
	N_LAYER, N_LAYER_PHASE, N_KERNELS, N_KERNEL,
};

struct tv_node {
	uint8_t type;
	uint8_t depth;
	uint16_t kind;  /* span kind or kernel id */
	int32_t layer;
};

struct tv_vis {
	struct tv_node node;
	char name[32];
};

struct tv_pid {
	__u32 pid;
	uint64_t rss;
	int rss_ok;
	uint64_t live[POOL_COUNT], peak[POOL_COUNT], reserved[POOL_COUNT];
	uint64_t kv_used, kv_cap;
	int kv_seen;
};

struct topview {
	uint64_t slot_ns;
	unsigned nslots;
	uint64_t start_ns, base_ns, now_ns, prev_refresh_ns;

	struct tv_row request, token;
	struct tv_row none[SPAN_KIND_COUNT];      /* spans outside any layer */
	struct tv_row kernel[KERNEL_COUNT];
	struct tv_layer *layers;
	unsigned nlayers;                          /* highest layer seen + 1 */
	struct tv_row layers_agg, phase_agg[SPAN_KIND_COUNT], kernels_agg;
	int split_layers;

	char *binary, *level;
	uint64_t dropped;
	int ended;
	struct tv_pid pids[TOPVIEW_MAX_PIDS];
	unsigned npids;
	uint64_t pids_untracked;                   /* events of pids beyond the table */
	uint64_t allocs, frees, unknown_frees;
	uint64_t events, events_prev;
	double events_rate;
	uint64_t span_errors, bad_events, oom;
	uint64_t invalid;                          /* records the decoder rejected */
	uint64_t first_token_ns, last_token_end_ns;
	int have_token;
	double tok_now, tok_avg;               /* tok/s as of the last refresh */

	struct tv_vis *vis;
	size_t nvis, cap_vis;
	size_t sel;
	struct tv_node sel_node;
	enum topview_sort sort;
	int paused, help, page;
	struct hist *scratch;
};

/* ---- small helpers ---- */

static uint64_t u64_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static void row_free(struct tv_row *r)
{
	if (r->win.slots)
		window_free(&r->win);
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

static struct tv_pid *pid_slot(struct topview *tv, __u32 pid)
{
	for (unsigned i = 0; i < tv->npids; i++)
		if (tv->pids[i].pid == pid)
			return &tv->pids[i];
	if (tv->npids == TOPVIEW_MAX_PIDS) {
		tv->pids_untracked++;
		return NULL;
	}
	struct tv_pid *p = &tv->pids[tv->npids++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
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
	return tv;
}

void topview_free(struct topview *tv)
{
	if (!tv)
		return;
	row_free(&tv->request);
	row_free(&tv->token);
	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++)
		row_free(&tv->none[k]);
	for (unsigned k = 0; k < KERNEL_COUNT; k++)
		row_free(&tv->kernel[k]);
	for (unsigned l = 0; l < tv->nlayers; l++)
		for (unsigned k = 0; k < SPAN_KIND_COUNT; k++)
			row_free(&tv->layers[l].kind[k]);
	free(tv->layers);
	free(tv->binary);
	free(tv->level);
	free(tv->vis);
	free(tv->scratch);
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
	pid_slot(tv, h->pid);
}

void topview_on_span(struct topview *tv, const struct span_event *ev)
{
	note_pid(tv, &ev->h);
	if (ev->kind >= SPAN_KIND_COUNT) {
		tv->bad_events++;
		return;
	}
	if (ev->flags & SPAN_F_MISMATCH)
		tv->span_errors++;
	struct tv_row *row;
	if (ev->layer == LAYER_NONE) {
		row = &tv->none[ev->kind];
	} else {
		struct tv_layer *l = layer_at(tv, ev->layer);
		if (!l) {
			tv->bad_events++;
			return;
		}
		row = &l->kind[ev->kind];
	}
	row_add(tv, row, ev->h.ts_ns + ev->dur_ns, ev->dur_ns);
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

void topview_on_request(struct topview *tv, const struct request_event *ev)
{
	note_pid(tv, &ev->h);
	row_add(tv, &tv->request, ev->h.ts_ns + ev->dur_ns, ev->dur_ns);
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
	/* A free of a pointer never seen allocated carries no pool state. */
	if (ev->h.type == EV_FREE && ev->unknown)
		return;
	struct tv_pid *p = pid_slot(tv, ev->h.pid);
	if (p) {
		p->live[ev->pool] = ev->live_bytes;
		p->peak[ev->pool] = ev->peak_bytes;
		p->reserved[ev->pool] = ev->reserved_bytes;
	}
}

void topview_on_alloc(struct topview *tv, const struct alloc_event *ev)
{
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
	struct tv_pid *p = pid_slot(tv, ev->h.pid);
	if (p) {
		p->kv_used = ev->used_bytes;
		p->kv_cap = ev->capacity_bytes;
		p->kv_seen = 1;
	}
}

static int on_span(void *tv, const struct span_event *e) { topview_on_span(tv, e); return 0; }
static int on_token(void *tv, const struct token_event *e) { topview_on_token(tv, e); return 0; }
static int on_request(void *tv, const struct request_event *e) { topview_on_request(tv, e); return 0; }
static int on_kernel(void *tv, const struct kernel_event *e) { topview_on_kernel(tv, e); return 0; }
static int on_alloc(void *tv, const struct alloc_event *e) { topview_on_alloc(tv, e); return 0; }
static int on_free(void *tv, const struct alloc_event *e) { topview_on_free(tv, e); return 0; }
static int on_kv(void *tv, const struct kv_event *e) { topview_on_kv(tv, e); return 0; }

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
	.alloc = on_alloc,
	.free = on_free,
	.kv = on_kv,
	.kernel = on_kernel,
	.sample = on_sample,
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
	char path[64], line[128];
	snprintf(path, sizeof(path), "/proc/%u/statm", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char *ok = fgets(line, sizeof(line), f);
	fclose(f);
	if (!ok)
		return -1;
	/* statm: size resident shared ... (pages) */
	char *end;
	errno = 0;
	strtoull(line, &end, 10);
	if (errno || end == line || *end != ' ')
		return -1;
	char *start = end + 1;
	unsigned long long resident = strtoull(start, &end, 10);
	if (errno || end == start)
		return -1;
	long page = sysconf(_SC_PAGESIZE);
	*bytes = (uint64_t)resident * (uint64_t)(page > 0 ? page : 4096);
	return 0;
}

int topview_poll_proc(struct topview *tv)
{
	int gone = 0;
	for (unsigned i = 0; i < tv->npids; i++) {
		struct tv_pid *p = &tv->pids[i];
		p->rss_ok = topview_read_rss(p->pid, &p->rss) == 0;
		gone += !p->rss_ok;
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
static void compute_token_rates(struct topview *tv, uint64_t now)
{
	tv->tok_now = tv->tok_avg = 0;
	if (!tv->have_token)
		return;
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

static void refresh_leaf(struct topview *tv, struct tv_row *r, uint64_t now, double secs)
{
	hist_reset(tv->scratch);
	if (r->win.slots)
		window_snapshot(&r->win, now, tv->scratch);
	stats_from_hist(r, tv->scratch, secs);
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
}

static void set_share(struct tv_row *r, uint64_t forward_sum)
{
	r->st.share = forward_sum ? (double)r->wsum / (double)forward_sum : -1.0;
}

static void compute_rows(struct topview *tv, uint64_t now)
{
	double secs = window_seconds(tv, now);
	struct tv_row *members[TOPVIEW_MAX_LAYERS > KERNEL_COUNT ? TOPVIEW_MAX_LAYERS : KERNEL_COUNT];

	refresh_leaf(tv, &tv->request, now, secs);
	refresh_leaf(tv, &tv->token, now, secs);
	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++)
		refresh_leaf(tv, &tv->none[k], now, secs);
	for (unsigned l = 0; l < tv->nlayers; l++)
		for (unsigned k = 0; k < SPAN_KIND_COUNT; k++)
			refresh_leaf(tv, &tv->layers[l].kind[k], now, secs);
	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++) {
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
	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++) {
		set_share(&tv->none[k], fwd);
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

static struct tv_row *node_row(struct topview *tv, const struct tv_node *n)
{
	switch (n->type) {
	case N_REQUEST: return &tv->request;
	case N_TOKEN: return &tv->token;
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
	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++)
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
	case N_LAYERS: snprintf(buf, size, "layers (%u)", layers_with_data(tv)); break;
	case N_LAYER: snprintf(buf, size, "layer %d", (int)n->layer); break;
	case N_KERNELS: snprintf(buf, size, "opencl kernels"); break;
	case N_KERNEL: snprintf(buf, size, "%s", cl_kernel_name(n->kind)); break;
	default: snprintf(buf, size, "%s", span_kind_name(n->kind)); break;
	}
}

#define MAX_KIDS (TOPVIEW_MAX_LAYERS + SPAN_KIND_COUNT + KERNEL_COUNT + 4)

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
		if (any_span(tv))
			n = push_kid(kids, n, N_FORWARD, SPAN_FORWARD, LAYER_NONE);
		if (tv->kernels_agg.count)
			n = push_kid(kids, n, N_KERNELS, 0, LAYER_NONE);
		return n;
	}
	switch (parent->type) {
	case N_FORWARD:
		for (unsigned k = 0; k < SPAN_KIND_COUNT; k++) {
			if (k == SPAN_LAYER && layers_with_data(tv))
				n = push_kid(kids, n, N_LAYERS, SPAN_LAYER, LAYER_NONE);
			if (k != SPAN_FORWARD && tv->none[k].count)
				n = push_kid(kids, n, N_SPAN, k, LAYER_NONE);
		}
		break;
	case N_LAYERS:
		if (tv->split_layers) {
			for (unsigned l = 0; l < tv->nlayers; l++)
				if (layer_has_data(tv, l))
					n = push_kid(kids, n, N_LAYER, SPAN_LAYER, (int)l);
		} else {
			for (unsigned k = 0; k < SPAN_KIND_COUNT; k++)
				if (k != SPAN_LAYER && tv->phase_agg[k].count)
					n = push_kid(kids, n, N_PHASE_AGG, k, LAYER_NONE);
		}
		break;
	case N_LAYER:
		for (unsigned k = 0; k < SPAN_KIND_COUNT; k++)
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

static void reset_windows(struct topview *tv)
{
	struct tv_row *fixed[] = { &tv->request, &tv->token };
	for (size_t i = 0; i < 2; i++)
		if (fixed[i]->win.slots)
			window_reset(&fixed[i]->win);
	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++) {
		if (tv->none[k].win.slots)
			window_reset(&tv->none[k].win);
		for (unsigned l = 0; l < tv->nlayers; l++)
			if (tv->layers[l].kind[k].win.slots)
				window_reset(&tv->layers[l].kind[k].win);
	}
	for (unsigned k = 0; k < KERNEL_COUNT; k++)
		if (tv->kernel[k].win.slots)
			window_reset(&tv->kernel[k].win);
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

/* ---- formatting ---- */

/* Prints v scaled by the first unit it fits into width chars, trying 2, 1,
 * then 0 decimals (so 9.996us becomes "10.0us", not 7 chars). */
static void fmt_scaled(char *buf, size_t size, int width, double v,
		       const double *scales, const char *const *units, int nunits)
{
	for (int u = 0; u < nunits; u++) {
		if (u + 1 < nunits && v >= scales[u + 1] * 0.9995)
			continue;
		double x = v / scales[u];
		for (int prec = u == 0 ? 0 : 2; prec >= 0; prec--) {
			int n = snprintf(buf, size, "%.*f%s", prec, x, units[u]);
			if (n <= width)
				return;
		}
	}
	snprintf(buf, size, "%.0f%s", v / scales[nunits - 1], units[nunits - 1]);
}

static void fmt_ns(char *buf, size_t size, int width, double ns)
{
	static const double scales[] = { 1, 1e3, 1e6, 1e9 };
	static const char *const units[] = { "ns", "us", "ms", "s" };
	fmt_scaled(buf, size, width, ns, scales, units, 4);
}

static void fmt_count(char *buf, size_t size, int width, double v)
{
	static const double scales[] = { 1, 1e3, 1e6, 1e9, 1e12 };
	static const char *const units[] = { "", "k", "M", "G", "T" };
	if (v < 1e15 && v == (double)(uint64_t)v) { /* exact while it fits */
		snprintf(buf, size, "%" PRIu64, (uint64_t)v);
		if ((int)strlen(buf) <= width)
			return;
	}
	if (v < 1000 && v != (double)(uint64_t)v) { /* small rates keep a decimal */
		snprintf(buf, size, "%.1f", v);
		if ((int)strlen(buf) <= width)
			return;
	}
	fmt_scaled(buf, size, width, v, scales, units, 5);
}

static void fmt_bytes(char *buf, size_t size, uint64_t b)
{
	static const double scales[] = { 1, 1024.0, 1048576.0, 1073741824.0, 1099511627776.0 };
	static const char *const units[] = { "B", "K", "M", "G", "T" };
	fmt_scaled(buf, size, 5, (double)b, scales, units, 5);
}

static void fmt_percent(char *buf, size_t size, int width, double pct)
{
	snprintf(buf, size, "%.1f%%", pct);
	if ((int)strlen(buf) > width)
		snprintf(buf, size, "%.0f%%", pct);
}

/* Table columns; `drop` orders which go first when the width is short. */
struct column {
	const char *title, *sorted_title;
	int width, drop;
	enum topview_sort sort;
};

enum { COL_COUNT, COL_RATE, COL_LAST, COL_MEAN, COL_P50, COL_P95, COL_P99, COL_MAX, COL_SHARE, NCOLS };

static const struct column columns[NCOLS] = {
	[COL_COUNT] = { "COUNT", "COUNT*", 6, 6, TOPVIEW_SORT_COUNT },
	[COL_RATE] = { "RATE/s", "RATE*", 6, 4, TOPVIEW_SORT_RATE },
	[COL_LAST] = { "LAST", "LAST", 6, 1, TOPVIEW_SORT_TREE },
	[COL_MEAN] = { "MEAN", "MEAN*", 6, 3, TOPVIEW_SORT_MEAN },
	[COL_P50] = { "P50", "P50*", 6, 8, TOPVIEW_SORT_P50 },
	[COL_P95] = { "P95", "P95*", 6, 9, TOPVIEW_SORT_P95 },
	[COL_P99] = { "P99", "P99*", 6, 2, TOPVIEW_SORT_P99 },
	[COL_MAX] = { "MAX", "MAX*", 6, 5, TOPVIEW_SORT_MAX },
	[COL_SHARE] = { "%FWD", "%FWD*", 5, 7, TOPVIEW_SORT_SHARE },
};

#define NAME_MIN 16
#define NAME_MAX_WIDTH 40

/* Which columns fit in width, and how wide the name column is then. */
static int plan_columns(int width, int shown[NCOLS])
{
	int used = 0;
	for (int c = 0; c < NCOLS; c++) {
		shown[c] = 1;
		used += columns[c].width + 1;
	}
	for (int drop = 1; used + NAME_MIN > width && drop <= 9; drop++)
		for (int c = 0; c < NCOLS; c++)
			if (shown[c] && columns[c].drop == drop) {
				shown[c] = 0;
				used -= columns[c].width + 1;
			}
	int name = width - used;
	if (name > NAME_MAX_WIDTH)
		name = NAME_MAX_WIDTH;
	return name < NAME_MIN ? NAME_MIN : name;
}

static int effective_width(int width)
{
	if (width <= 0)
		return 80;
	return width < TOPVIEW_LINE_MAX ? width : TOPVIEW_LINE_MAX - 1;
}

/* Appends to buf at *pos, never past width or size. */
static void put(char *buf, size_t size, int width, int *pos, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void put(char *buf, size_t size, int width, int *pos, const char *fmt, ...)
{
	size_t limit = (size_t)width + 1 < size ? (size_t)width + 1 : size;
	if ((size_t)*pos >= limit - 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *pos, limit - (size_t)*pos, fmt, ap);
	va_end(ap);
	if (n > 0)
		*pos += n;
	if ((size_t)*pos > limit - 1)
		*pos = (int)(limit - 1);
}

void topview_format_columns(const struct topview *tv, char *buf, size_t size, int width)
{
	int shown[NCOLS], pos = 0;
	width = effective_width(width);
	int name = plan_columns(width, shown);
	buf[0] = '\0';
	put(buf, size, width, &pos, "%-*s", name, "NAME");
	for (int c = 0; c < NCOLS; c++) {
		if (!shown[c])
			continue;
		int sorted = tv->sort != TOPVIEW_SORT_TREE && columns[c].sort == tv->sort;
		put(buf, size, width, &pos, " %*s", columns[c].width,
		    sorted ? columns[c].sorted_title : columns[c].title);
	}
}

void topview_format_row(const struct topview *tv, size_t i, char *buf, size_t size, int width)
{
	struct topview_row r;
	int shown[NCOLS], pos = 0;
	buf[0] = '\0';
	if (topview_row_at(tv, i, &r) != 0)
		return;
	width = effective_width(width);
	int name = plan_columns(width, shown);
	char label[96], cell[NCOLS][32];
	snprintf(label, sizeof(label), "%*s%s%s", r.depth * 2, "",
		 r.expandable ? (r.expanded ? "- " : "+ ") : "  ", r.name);
	put(buf, size, width, &pos, "%-*.*s", name, name, label);

	int has_window = r.wcount > 0;
	fmt_count(cell[COL_COUNT], 32, columns[COL_COUNT].width, (double)r.count);
	fmt_count(cell[COL_RATE], 32, columns[COL_RATE].width, r.rate);
	if (r.count)
		fmt_ns(cell[COL_LAST], 32, columns[COL_LAST].width, (double)r.last_ns);
	else
		strcpy(cell[COL_LAST], "-");
	const double win_vals[] = { r.mean_ns, (double)r.p50_ns, (double)r.p95_ns,
				    (double)r.p99_ns, (double)r.max_ns };
	for (int c = COL_MEAN; c <= COL_MAX; c++) {
		if (has_window)
			fmt_ns(cell[c], 32, columns[c].width, win_vals[c - COL_MEAN]);
		else
			strcpy(cell[c], "-");
	}
	if (r.share >= 0 && has_window)
		fmt_percent(cell[COL_SHARE], 32, columns[COL_SHARE].width, r.share * 100.0);
	else
		strcpy(cell[COL_SHARE], "-");
	for (int c = 0; c < NCOLS; c++)
		if (shown[c])
			put(buf, size, width, &pos, " %*s", columns[c].width, cell[c]);
}

int topview_header_count(const struct topview *tv)
{
	int problems = tv->span_errors || tv->bad_events || tv->invalid || tv->oom || tv->pids_untracked ||
		       tv->unknown_frees;
	return 5 + problems;
}

static void format_identity(const struct topview *tv, char *buf, size_t size, int width)
{
	int pos = 0;
	/* states first: a long binary path must not push them off screen */
	put(buf, size, width, &pos, "spantrace top%s%s - ", tv->paused ? " [PAUSED]" : "",
	    tv->ended ? " [exited]" : "");
	if (tv->npids == 0)
		put(buf, size, width, &pos, "waiting for events");
	else
		put(buf, size, width, &pos, "pid%s", tv->npids > 1 ? "s" : "");
	for (unsigned i = 0; i < tv->npids; i++)
		put(buf, size, width, &pos, "%s%u", i ? "," : " ", tv->pids[i].pid);
	if (tv->binary)
		put(buf, size, width, &pos, " (%s)", tv->binary);
	uint64_t up = (tv->now_ns > tv->start_ns ? tv->now_ns - tv->start_ns : 0) / 1000000000u;
	put(buf, size, width, &pos, "  up %" PRIu64 ":%02" PRIu64 ":%02" PRIu64, up / 3600,
	    up / 60 % 60, up % 60);
	put(buf, size, width, &pos, "  level %s  window %.0fs", tv->level ? tv->level : "-",
	    (double)tv->nslots * (double)tv->slot_ns / 1e9);
}

static void format_throughput(const struct topview *tv, char *buf, size_t size, int width)
{
	int pos = 0;
	char cur[16], avg[16], evs[16], toks[16], reqs[16];
	const struct tv_row *tok = &tv->token;
	/* the counts as of the last refresh, like the table (and paused with it) */
	fmt_count(toks, sizeof(toks), 7, (double)tok->st.count);
	fmt_count(reqs, sizeof(reqs), 7, (double)tv->request.st.count);
	fmt_count(evs, sizeof(evs), 7, tv->events_rate);
	if (tv->have_token) {
		snprintf(cur, sizeof(cur), "%.1f", tv->tok_now);
		snprintf(avg, sizeof(avg), "%.1f", tv->tok_avg);
	} else {
		strcpy(cur, "-");
		strcpy(avg, "-");
	}
	/* drops come early so a narrow screen still shows them */
	put(buf, size, width, &pos, "tok/s %s now, %s avg  ", cur, avg);
	if (tv->dropped)
		put(buf, size, width, &pos, "DROPPED %" PRIu64, tv->dropped);
	else
		put(buf, size, width, &pos, "dropped 0");
	put(buf, size, width, &pos, "  tokens %s  requests %s  events/s %s", toks, reqs, evs);
}

/* Pools used so far (a pool never used, e.g. device on the CPU backend, is
 * left out), summed over pids, in pool order. Returns how many. */
static unsigned used_pools(const struct topview *tv, unsigned ids[POOL_COUNT],
			   uint64_t sums[POOL_COUNT][3])
{
	unsigned n = 0;
	for (unsigned p = 0; p < POOL_COUNT; p++) {
		uint64_t live = 0, peak = 0, reserved = 0;
		for (unsigned i = 0; i < tv->npids; i++) {
			live += tv->pids[i].live[p];
			peak += tv->pids[i].peak[p];
			reserved += tv->pids[i].reserved[p];
		}
		if (peak == 0 && live == 0)
			continue;
		ids[n] = p;
		sums[n][0] = live;
		sums[n][1] = peak;
		sums[n][2] = reserved;
		n++;
	}
	return n;
}

/* Two lines, two pools each, so four pools fit 80 columns. */
#define POOLS_PER_LINE 2

static void format_pools(const struct topview *tv, int line, char *buf, size_t size, int width)
{
	unsigned ids[POOL_COUNT], n;
	uint64_t sums[POOL_COUNT][3];
	int pos = 0;

	n = used_pools(tv, ids, sums);
	put(buf, size, width, &pos, line == 0 ? "live/peak/reserved" : "                  ");
	if (n == 0 && line == 0)
		put(buf, size, width, &pos, " (no allocations seen)");
	for (unsigned i = line * POOLS_PER_LINE; i < n && i < (unsigned)(line + 1) * POOLS_PER_LINE; i++) {
		char l[16], k[16], r[16], entry[64];
		fmt_bytes(l, sizeof(l), sums[i][0]);
		fmt_bytes(k, sizeof(k), sums[i][1]);
		fmt_bytes(r, sizeof(r), sums[i][2]);
		snprintf(entry, sizeof(entry), "  %s %s/%s/%s", pool_name(ids[i]), l, k, r);
		/* Whole entries only: a number cut before its unit would lie. */
		if (pos + (int)strlen(entry) > width) {
			put(buf, size, width, &pos, "%s", pos + 2 <= width ? " +" : "");
			break;
		}
		put(buf, size, width, &pos, "%s", entry);
	}
}

static void format_kv_rss(const struct topview *tv, char *buf, size_t size, int width)
{
	int pos = 0, kv_seen = 0, rss_ok = 0;
	uint64_t used = 0, cap = 0, rss = 0;
	for (unsigned i = 0; i < tv->npids; i++) {
		const struct tv_pid *p = &tv->pids[i];
		kv_seen |= p->kv_seen;
		used += p->kv_used;
		cap += p->kv_cap;
		if (p->rss_ok) {
			rss += p->rss;
			rss_ok = 1;
		}
	}
	char a[16], b[16];
	if (kv_seen) {
		fmt_bytes(a, sizeof(a), used);
		fmt_bytes(b, sizeof(b), cap);
		put(buf, size, width, &pos, "kv %s/%s", a, b);
		if (cap)
			put(buf, size, width, &pos, " (%.1f%%)", 100.0 * (double)used / (double)cap);
	} else {
		put(buf, size, width, &pos, "kv -");
	}
	if (rss_ok) {
		fmt_bytes(a, sizeof(a), rss);
		put(buf, size, width, &pos, "  rss %s", a);
	} else {
		put(buf, size, width, &pos, "  rss -");
	}
	put(buf, size, width, &pos, "  allocs %" PRIu64 "  frees %" PRIu64, tv->allocs, tv->frees);
}

static void format_problems(const struct topview *tv, char *buf, size_t size, int width)
{
	int pos = 0;
	put(buf, size, width, &pos, "problems:");
	if (tv->span_errors)
		put(buf, size, width, &pos, " span errors %" PRIu64, tv->span_errors);
	if (tv->bad_events + tv->invalid)
		put(buf, size, width, &pos, " bad events %" PRIu64, tv->bad_events + tv->invalid);
	if (tv->unknown_frees)
		put(buf, size, width, &pos, " unknown frees %" PRIu64, tv->unknown_frees);
	if (tv->pids_untracked)
		put(buf, size, width, &pos, " events of untracked pids %" PRIu64, tv->pids_untracked);
	if (tv->oom)
		put(buf, size, width, &pos, " out of memory %" PRIu64, tv->oom);
}

void topview_format_header(const struct topview *tv, int i, char *buf, size_t size, int width, int *alert)
{
	width = effective_width(width);
	buf[0] = '\0';
	*alert = 0;
	switch (i) {
	case 0: format_identity(tv, buf, size, width); break;
	case 1:
		format_throughput(tv, buf, size, width);
		*alert = tv->dropped != 0;
		break;
	case 2: format_pools(tv, 0, buf, size, width); break;
	case 3: format_pools(tv, 1, buf, size, width); break;
	case 4: format_kv_rss(tv, buf, size, width); break;
	case 5:
		if (topview_header_count(tv) > 5) {
			format_problems(tv, buf, size, width);
			*alert = 1;
		}
		break;
	default: break;
	}
}

int topview_render_text(const struct topview *tv, FILE *out, int width)
{
	char line[TOPVIEW_LINE_MAX];
	int alert;
	width = effective_width(width);
	for (int i = 0; i < topview_header_count(tv); i++) {
		topview_format_header(tv, i, line, sizeof(line), width, &alert);
		fprintf(out, "%s\n", line);
	}
	fputc('\n', out);
	topview_format_columns(tv, line, sizeof(line), width);
	fprintf(out, "%s\n", line);
	if (tv->nvis == 0)
		fprintf(out, "(no spans yet)\n");
	for (size_t i = 0; i < tv->nvis; i++) {
		topview_format_row(tv, i, line, sizeof(line), width);
		fprintf(out, "%s\n", line);
	}
	return ferror(out) ? -1 : 0;
}
