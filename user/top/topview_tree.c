/* topview_tree.c - the visible tree of `spantrace top`'s model (see
 * topview.h): which rows show, under which parent, in what order and by
 * what name; the rows as the screen reads them; and the keys that move
 * the selection, expand, sort, pause and reset. Its numbers come from
 * topview_refresh.c. */
#include "top/topview_model.h"

#include <curses.h> /* key codes only */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/grow.h"

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
			if (tv->none[k].count && tv_runs_outside_forward(tv, k))
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
			if (k != SPAN_FORWARD && tv->none[k].count && !tv_runs_outside_forward(tv, k))
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
void tv_layout(struct topview *tv)
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
	tv_layout(tv);
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
	tv_compute_rows(tv, tv->now_ns);
	tv_layout(tv);
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
		tv_layout(tv);
		break;
	case 's': tv->sort = (tv->sort + 1) % TOPVIEW_SORT_COUNT_; tv_layout(tv); break;
	case 'S':
		tv->sort = (tv->sort + TOPVIEW_SORT_COUNT_ - 1) % TOPVIEW_SORT_COUNT_;
		tv_layout(tv);
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

