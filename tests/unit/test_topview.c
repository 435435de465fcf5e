/* test_topview.c - the `spantrace top` model fed with synthetic events and
 * checked against sorted-array oracles: rows, percentiles, layer
 * aggregation, window expiry, keys and the text rendering. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "top/topview.h"
#include "analysis/stats.h"

#include <curses.h> /* key codes */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define SEC 1000000000ull
#define T0 (1000 * SEC)
#define NLAYERS 3
#define NTOKENS 200
#define PID 4242

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Oracle: every duration fed, per (layer + 1, kind); layer 0 = LAYER_NONE. */
struct series {
	uint64_t v[NTOKENS * 4];
	size_t n;
};
static struct series oracle[NLAYERS + 1][SPAN_KIND_COUNT];
static struct series kernel_oracle[KERNEL_COUNT];
static uint64_t last_token_end; /* for the average tok/s */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* All values of several series, sorted, in out (returns count). */
static size_t merged_sorted(struct series *const *s, size_t ns, uint64_t *out)
{
	size_t n = 0;
	for (size_t i = 0; i < ns; i++) {
		memcpy(out + n, s[i]->v, s[i]->n * sizeof(uint64_t));
		n += s[i]->n;
	}
	qsort(out, n, sizeof(*out), cmp_u64);
	return n;
}

static int within_bound(uint64_t got, uint64_t want)
{
	uint64_t diff = got > want ? got - want : want - got;
	return want < (1u << HIST_SUB_BITS) ? diff == 0
					    : (double)diff <= (double)want / (1u << HIST_SUB_BITS);
}

/* A span of the traced pid, ending with flags. */
static struct span_event span_event_of(uint64_t ts, uint64_t dur, unsigned kind, int layer, uint32_t flags)
{
	struct span_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.h.type = EV_SPAN;
	ev.h.pid = PID;
	ev.h.tid = PID;
	ev.h.ts_ns = ts;
	ev.dur_ns = dur;
	ev.kind = kind;
	ev.layer = layer;
	ev.flags = flags;
	return ev;
}

static void span(struct topview *tv, uint64_t ts, uint64_t dur, unsigned kind, int layer)
{
	struct span_event ev = span_event_of(ts, dur, kind, layer, 0);
	topview_on_span(tv, &ev);
	struct series *s = &oracle[layer + 1][kind];
	s->v[s->n++] = dur;
}

static void kernel(struct topview *tv, uint64_t ts, unsigned id, uint64_t dur)
{
	struct kernel_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.h.type = EV_KERNEL;
	ev.h.pid = PID;
	ev.h.ts_ns = ts;
	ev.kernel_id = id;
	ev.layer = LAYER_NONE;
	ev.start_ns = 5000000 + ts % 1000; /* device clock: arbitrary base */
	ev.end_ns = ev.start_ns + dur;
	topview_on_kernel(tv, &ev);
	struct series *s = &kernel_oracle[id];
	s->v[s->n++] = dur;
}

/* NTOKENS tokens over 5 s from T0: forward > embed, layers > phases, ... */
static void feed(struct topview *tv)
{
	uint64_t t = T0;
	for (int i = 0; i < NTOKENS; i++, t += 25000000) {
		uint64_t ft = t;
		uint64_t fwd = 0;
		uint64_t d = 2000 + rng() % 3000;
		span(tv, ft, d, SPAN_EMBED, LAYER_NONE);
		fwd += d;
		for (int l = 0; l < NLAYERS; l++) {
			uint64_t layer_dur = 0;
			for (unsigned k = SPAN_ATTN_NORM; k <= SPAN_FFN; k++) {
				/* attention grows with the layer; ffn is heavy-tailed */
				uint64_t pd = 1000 + rng() % (k == SPAN_ATTENTION ? 50000u * (l + 1) : 20000u);
				if (k == SPAN_FFN && rng() % 20 == 0)
					pd *= 30;
				span(tv, ft + fwd + layer_dur, pd, k, l);
				layer_dur += pd;
			}
			span(tv, ft + fwd, layer_dur, SPAN_LAYER, l);
			fwd += layer_dur;
		}
		for (unsigned k = SPAN_FINAL_NORM; k <= SPAN_SAMPLE; k++) {
			d = 500 + rng() % 10000;
			span(tv, ft + fwd, d, k, LAYER_NONE);
			fwd += d;
		}
		span(tv, ft, fwd, SPAN_FORWARD, LAYER_NONE);
		struct token_event tok;
		memset(&tok, 0, sizeof(tok));
		tok.h.pid = PID;
		tok.h.ts_ns = ft;
		tok.dur_ns = fwd + 1000;
		topview_on_token(tv, &tok);
		last_token_end = ft + tok.dur_ns;
		kernel(tv, ft + fwd, KERNEL_MATVEC, 10000 + rng() % 90000);
		kernel(tv, ft + fwd, KERNEL_MATVEC, 10000 + rng() % 90000);
		kernel(tv, ft + fwd, KERNEL_ROPE, 1000 + rng() % 2000);
	}
}

static int row(const struct topview *tv, const char *name, struct topview_row *r)
{
	long i = topview_find_row(tv, name);
	CHECK(i >= 0, "row '%s' is visible", name);
	if (i < 0)
		return -1;
	return topview_row_at(tv, (size_t)i, r);
}

/* A row against the values it should hold: counts exact, max exact, mean
 * exact to rounding, percentiles within the histogram's bound. */
static void check_row(const struct topview *tv, const char *name, uint64_t *sorted, size_t n)
{
	struct topview_row r;
	if (row(tv, name, &r) != 0)
		return;
	double mean = 0;
	for (size_t i = 0; i < n; i++)
		mean += (double)sorted[i];
	mean /= (double)n;
	printf("row %-14s n=%zu p50=%" PRIu64 " p95=%" PRIu64 " p99=%" PRIu64 " (oracle %" PRIu64
	       "/%" PRIu64 "/%" PRIu64 ")\n", name, n, r.p50_ns, r.p95_ns, r.p99_ns,
	       quantile_sorted(sorted, n, .5), quantile_sorted(sorted, n, .95),
	       quantile_sorted(sorted, n, .99));
	CHECK(r.count == n && r.wcount == n, "%s: count %" PRIu64 "/%" PRIu64 " vs %zu", name, r.count, r.wcount, n);
	CHECK(r.max_ns == sorted[n - 1], "%s: max", name);
	CHECK(fabs(r.mean_ns - mean) <= 1e-9 * mean, "%s: mean %f vs %f", name, r.mean_ns, mean);
	CHECK(within_bound(r.p50_ns, quantile_sorted(sorted, n, .5)), "%s: p50", name);
	CHECK(within_bound(r.p95_ns, quantile_sorted(sorted, n, .95)), "%s: p95", name);
	CHECK(within_bound(r.p99_ns, quantile_sorted(sorted, n, .99)), "%s: p99", name);
}

static uint64_t sum_of(const struct series *s)
{
	uint64_t t = 0;
	for (size_t i = 0; i < s->n; i++)
		t += s->v[i];
	return t;
}

static uint64_t *scratch;

static void test_rows(struct topview *tv)
{
	struct series *sel[NLAYERS];
	size_t n;
	printf("rows: tree, aggregation over layers, kernels, share, rate\n");
	n = merged_sorted((struct series *[]){ &oracle[0][SPAN_FORWARD] }, 1, scratch);
	check_row(tv, "forward", scratch, n);
	n = merged_sorted((struct series *[]){ &oracle[0][SPAN_EMBED] }, 1, scratch);
	check_row(tv, "embed", scratch, n);
	/* the collapsed layer row is the merge of every layer's window */
	for (int l = 0; l < NLAYERS; l++)
		sel[l] = &oracle[l + 1][SPAN_LAYER];
	n = merged_sorted(sel, NLAYERS, scratch);
	check_row(tv, "layers (3)", scratch, n);
	for (int l = 0; l < NLAYERS; l++)
		sel[l] = &oracle[l + 1][SPAN_ATTENTION];
	n = merged_sorted(sel, NLAYERS, scratch);
	check_row(tv, "attention", scratch, n);
	for (int l = 0; l < NLAYERS; l++)
		sel[l] = &oracle[l + 1][SPAN_FFN];
	n = merged_sorted(sel, NLAYERS, scratch);
	check_row(tv, "ffn", scratch, n);
	n = merged_sorted((struct series *[]){ &kernel_oracle[KERNEL_MATVEC] }, 1, scratch);
	check_row(tv, "matvec", scratch, n);
	n = merged_sorted((struct series *[]){ &kernel_oracle[KERNEL_MATVEC], &kernel_oracle[KERNEL_ROPE] }, 2, scratch);
	check_row(tv, "opencl kernels", scratch, n);

	struct topview_row r;
	uint64_t fwd = sum_of(&oracle[0][SPAN_FORWARD]);
	uint64_t att = sum_of(&oracle[1][SPAN_ATTENTION]) + sum_of(&oracle[2][SPAN_ATTENTION]) +
		       sum_of(&oracle[3][SPAN_ATTENTION]);
	if (row(tv, "attention", &r) == 0)
		CHECK(fabs(r.share - (double)att / (double)fwd) < 1e-12, "attention share %f", r.share);
	if (row(tv, "forward", &r) == 0) {
		CHECK(r.share == 1.0, "forward share is 100%%");
		/* start T0, now T0 + 6 s: the window covers the 6 s watched */
		CHECK(fabs(r.rate - NTOKENS / 6.0) < 1e-9, "forward rate %f", r.rate);
	}
	if (row(tv, "token", &r) == 0)
		CHECK(r.share < 0, "token has no forward share");
	CHECK(topview_find_row(tv, "layer 0") < 0, "layer N rows hidden while aggregated");
}

static void test_split_layers(struct topview *tv)
{
	printf("keys: l splits the aggregate into layer rows; Enter expands layer 1\n");
	size_t before = topview_nrows(tv);
	CHECK(topview_key(tv, 'l') == TOPVIEW_KEY_REDRAW, "l redraws");
	CHECK(topview_find_row(tv, "layer 0") >= 0 && topview_find_row(tv, "layer 2") >= 0, "layer rows shown");
	CHECK(topview_find_row(tv, "attention") < 0, "merged phases hidden when split");
	long l1 = topview_find_row(tv, "layer 1");
	CHECK(l1 >= 0, "layer 1");
	for (int guard = 0; l1 >= 0 && (long)topview_selected(tv) < l1 && guard < 100; guard++)
		topview_key(tv, KEY_DOWN);
	CHECK((long)topview_selected(tv) == l1, "selection reaches layer 1");
	topview_key(tv, '\n');
	size_t n = merged_sorted((struct series *[]){ &oracle[2][SPAN_ATTENTION] }, 1, scratch);
	check_row(tv, "attention", scratch, n);
	struct topview_row r;
	if (row(tv, "attention", &r) == 0)
		CHECK(r.depth == 3, "layer phase at depth 3 (forward > layers > layer 1 > attention)");
	/* selection stays on layer 1 although rows were inserted below it */
	CHECK((long)topview_selected(tv) == topview_find_row(tv, "layer 1"), "selection kept");
	topview_key(tv, 'e');
	CHECK(topview_find_row(tv, "attention") < 0, "e collapses layer 1 again");
	topview_key(tv, 'l');
	CHECK(topview_nrows(tv) == before, "l merges back: %zu rows", topview_nrows(tv));
}

static void test_keys(struct topview *tv)
{
	printf("keys: move, expand/collapse, sort, help, pause, quit, resize\n");
	topview_key(tv, 'g');
	CHECK(topview_selected(tv) == 0, "g -> top");
	topview_key(tv, 'k');
	CHECK(topview_selected(tv) == 0, "k at the top stays");
	topview_key(tv, 'j');
	CHECK(topview_selected(tv) == 1, "j moves down");
	topview_key(tv, 'G');
	CHECK(topview_selected(tv) == topview_nrows(tv) - 1, "G -> bottom");
	CHECK(topview_key(tv, KEY_RESIZE) == TOPVIEW_KEY_REDRAW, "resize redraws");
	CHECK(topview_key(tv, 'x') == TOPVIEW_KEY_IGNORED, "unknown key ignored");

	/* collapse forward: its subtree disappears */
	long f = topview_find_row(tv, "forward");
	size_t before = topview_nrows(tv);
	topview_key(tv, 'g');
	for (int guard = 0; f >= 0 && (long)topview_selected(tv) < f && guard < 100; guard++)
		topview_key(tv, 'j');
	CHECK((long)topview_selected(tv) == f, "j reaches forward");
	topview_key(tv, KEY_ENTER);
	CHECK(topview_find_row(tv, "embed") < 0 && topview_nrows(tv) < before, "Enter collapses forward");
	topview_key(tv, KEY_ENTER);
	CHECK(topview_nrows(tv) == before, "Enter expands it again");

	/* sort by mean: forward's children in non-increasing mean */
	for (int guard = 0; topview_sort_column(tv) != TOPVIEW_SORT_MEAN && guard < 20; guard++)
		topview_key(tv, 's');
	CHECK(topview_sort_column(tv) == TOPVIEW_SORT_MEAN, "s reaches the mean column");
	double prev = INFINITY;
	int kids = 0;
	for (size_t i = 0; i < topview_nrows(tv); i++) {
		struct topview_row r;
		topview_row_at(tv, i, &r);
		if (f >= 0 && i > (size_t)f && r.depth == 0)
			break; /* past forward's subtree */
		if (r.depth == 1 && f >= 0 && i > (size_t)f) {
			CHECK(r.mean_ns <= prev, "sorted by mean at %s", r.name);
			prev = r.mean_ns;
			kids++;
		}
	}
	CHECK(kids >= 5, "forward has %d children", kids);
	char line[TOPVIEW_LINE_MAX];
	topview_format_columns(tv, line, sizeof(line), 80);
	CHECK(strstr(line, "MEAN*") != NULL, "sort column marked: %s", line);
	topview_key(tv, 'S');
	CHECK(topview_sort_column(tv) == TOPVIEW_SORT_RATE, "S goes back");
	for (int guard = 0; topview_sort_column(tv) != TOPVIEW_SORT_TREE && guard < 20; guard++)
		topview_key(tv, 's');

	size_t sel = topview_selected(tv);
	topview_key(tv, 'h');
	CHECK(topview_help_shown(tv), "h shows help");
	topview_key(tv, 'j');
	CHECK(!topview_help_shown(tv) && topview_selected(tv) == sel, "any key closes help, not moving");
	CHECK(topview_key(tv, 'q') == TOPVIEW_KEY_QUIT, "q quits");
}

static void test_pause_reset_expiry(struct topview *tv)
{
	struct topview_row r;
	printf("pause freezes numbers; r resets the window; values expire\n");
	topview_key(tv, 'p');
	CHECK(topview_paused(tv), "p pauses");
	span(tv, T0 + 6 * SEC, 123456, SPAN_FORWARD, LAYER_NONE);
	topview_refresh(tv, T0 + 7 * SEC);
	if (row(tv, "forward", &r) == 0)
		CHECK(r.count == NTOKENS, "paused: still %" PRIu64, r.count);
	topview_key(tv, ' ');
	topview_refresh(tv, T0 + 7 * SEC);
	if (row(tv, "forward", &r) == 0)
		CHECK(r.count == NTOKENS + 1 && r.last_ns == 123456, "resumed: the event was counted");

	/* at T0+13.5 s the window (10 x 1 s) holds seconds 4..13 only */
	topview_refresh(tv, T0 + 13 * SEC + SEC / 2);
	if (row(tv, "forward", &r) == 0)
		CHECK(r.wcount == 1 + NTOKENS / 5 && r.count == NTOKENS + 1,
		      "partly expired: %" PRIu64 " in window", r.wcount);
	topview_refresh(tv, T0 + 30 * SEC);
	if (row(tv, "forward", &r) == 0)
		CHECK(r.wcount == 0 && r.p95_ns == 0 && r.count == NTOKENS + 1, "expired window, totals kept");

	span(tv, T0 + 30 * SEC, 777, SPAN_FORWARD, LAYER_NONE);
	topview_refresh(tv, T0 + 30 * SEC + 1);
	if (row(tv, "forward", &r) == 0)
		CHECK(r.wcount == 1, "new value in window");
	topview_key(tv, 'r');
	if (row(tv, "forward", &r) == 0)
		CHECK(r.wcount == 0 && r.count == NTOKENS + 2, "r empties the window only");
}

static char *render(struct topview *tv, int width)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	CHECK(topview_render_text(tv, f, width) == 0, "render ok");
	fclose(f);
	return buf;
}

static void check_widths(const char *text, int width)
{
	int longest = 0;
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);
		longest = len > longest ? len : longest;
		p += len + (nl != NULL);
	}
	CHECK(longest <= width, "longest line %d <= %d", longest, width);
}

static void test_render(struct topview *tv)
{
	printf("render: text frame at 80 and 60 columns, drops and memory in the header\n");
	struct alloc_event a;
	memset(&a, 0, sizeof(a));
	a.h.pid = PID;
	a.pool = POOL_WEIGHTS;
	a.bytes = a.live_bytes = 1000;
	a.peak_bytes = 2048;
	a.reserved = a.reserved_bytes = 4096;
	topview_on_alloc(tv, &a);
	a.pool = POOL_KV_CACHE;       /* the third used pool goes to the second line */
	a.bytes = a.live_bytes = a.peak_bytes = a.reserved = a.reserved_bytes = 3072;
	topview_on_alloc(tv, &a);
	a.pool = POOL_DEVICE;
	a.bytes = a.live_bytes = a.peak_bytes = a.reserved = a.reserved_bytes = 5120;
	topview_on_alloc(tv, &a);
	struct kv_event kv;
	memset(&kv, 0, sizeof(kv));
	kv.h.pid = PID;
	kv.used_bytes = 256;
	kv.capacity_bytes = 1024;
	topview_on_kv(tv, &kv);
	topview_set_drops(tv, 5);
	topview_set_target(tv, "build/infer", "detail");
	topview_refresh(tv, T0 + 6 * SEC);
	char *text = render(tv, 80);
	if (!text) {
		CHECK(0, "open_memstream");
		return;
	}
	printf("%s", text);
	const char *want[] = { "pid 4242 (build/infer)", "level detail", "DROPPED 5", "tok/s 33.3 now",
			       "live/peak/reserved  weights 1000B/2.00K/4.00K  kv_cache 3.00K/3.00K/3.00K\n",
			       "\n                    device 5.00K/5.00K/5.00K\n", "kv 256B/1.00K (25.0%)", "  embed  ", "0.9%", "NAME", "- forward",
			       "- layers (3)", "attention", "opencl kernels", "matvec", "rope", "%FWD" };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK(strstr(text, want[i]) != NULL, "frame contains '%s'", want[i]);
	/* average: all tokens over first begin .. last end */
	char avg[64];
	snprintf(avg, sizeof(avg), "now, %.1f avg", NTOKENS * 1e9 / (double)(last_token_end - T0));
	CHECK(strstr(text, avg) != NULL, "frame contains '%s'", avg);
	check_widths(text, 80);
	free(text);

	/* A free of a pointer never seen allocated carries no pool state: the
	 * pool keeps its numbers. */
	struct alloc_event unknown_free;
	memset(&unknown_free, 0, sizeof(unknown_free));
	unknown_free.h.type = EV_FREE;
	unknown_free.h.pid = PID;
	unknown_free.pool = POOL_WEIGHTS;
	unknown_free.bytes = 77;
	unknown_free.unknown = 1;
	topview_on_free(tv, &unknown_free);
	topview_refresh(tv, T0 + 6 * SEC);
	text = render(tv, 80);
	if (text) {
		CHECK(strstr(text, "weights 1000B/2.00K/4.00K") != NULL, "an unknown free left the pool alone");
		free(text);
	}

	/* layers collapsed: no phases; an unknown span kind is reported */
	struct span_event bad;
	memset(&bad, 0, sizeof(bad));
	bad.h.pid = PID;
	bad.kind = 99;
	topview_on_span(tv, &bad);
	topview_refresh(tv, T0 + 6 * SEC);
	text = render(tv, 60);
	if (text) {
		CHECK(strstr(text, "problems: bad events 1") != NULL, "bad event reported");
		CHECK(strstr(text, "P95") != NULL, "p95 kept at 60 columns");
		/* whole pool entries only, and a mark that some did not fit */
		CHECK(strstr(text, "live/peak/reserved  weights 1000B/2.00K/4.00K +\n") != NULL,
		      "memory line at 60 columns");
		check_widths(text, 60);
		free(text);
	}
	/* records through the session-style dispatcher */
	struct request_event req;
	memset(&req, 0, sizeof(req));
	req.h.type = EV_REQUEST;
	req.h.pid = PID;
	req.h.ts_ns = T0;
	req.dur_ns = 5 * SEC;
	CHECK(topview_on_record(tv, &req, sizeof(req)) == 0, "record dispatch");
	CHECK(topview_on_record(tv, &req, sizeof(req) - 1) == 0, "short record");
	topview_refresh(tv, T0 + 6 * SEC);
	struct topview_row r;
	if (row(tv, "request", &r) == 0)
		CHECK(r.count == 1 && r.max_ns == 5 * SEC, "request row from a record");
	text = render(tv, 80);
	if (text) {
		CHECK(strstr(text, "bad events 2") != NULL, "short record counted as bad");
		CHECK(strstr(text, "requests 1") != NULL, "requests in the header");
		free(text);
	}
	uint64_t rss = 0;
	CHECK(topview_read_rss((__u32)getpid(), &rss) == 0 && rss > 0, "own RSS %" PRIu64, rss);
	CHECK(topview_read_rss(0x7ffffffe, &rss) == -1, "RSS of a missing pid fails");
}

/* The launch line says how the forwards ran, whichever launches told it. */
static void check_launch_line(unsigned launch, unsigned count, const char *want)
{
	struct topview *tv = topview_new(SEC, TOPVIEW_DEFAULT_SLOTS, T0);
	char line[256] = "";
	int alert = 0;

	for (unsigned i = 0; tv && i < count; i++) {
		struct span_event ev = span_event_of(T0 + 1000 * i, 500, SPAN_FORWARD, LAYER_NONE,
						     SPAN_F_STRUCTURAL | launch << SPAN_F_LAUNCH_SHIFT);
		topview_on_span(tv, &ev);
	}
	if (tv) {
		topview_refresh(tv, T0 + SEC);
		for (int i = 0; i < topview_header_count(tv); i++) {
			topview_format_header(tv, i, line, sizeof(line), 80, &alert);
			if (!strncmp(line, "launch", 6))
				break;
		}
	}
	CHECK(strstr(line, want) != NULL, "launch line '%s' holds '%s'", line, want);
	topview_free(tv);
}

/* Leading spaces of the first line of text holding " NAME " (-1: none). */
static int indent_of(const char *text, const char *name)
{
	char word[64];
	snprintf(word, sizeof(word), " %s ", name);
	const char *hit = strstr(text, word);
	if (!hit)
		return -1;
	const char *line = hit;
	while (line > text && line[-1] != '\n')
		line--;
	int n = 0;
	while (line[n] == ' ' || line[n] == '-' || line[n] == '+')
		n++;
	return n;
}

/* Only a span's real children are drawn under it: sample runs between
 * forwards (no parent span), sync inside them. */
static void test_tree_parents(void)
{
	printf("tree: a kind that runs outside forward is drawn beside it, not under it\n");
	struct topview *tv = topview_new(SEC, TOPVIEW_DEFAULT_SLOTS, T0);
	if (!tv) {
		CHECK(0, "topview_new");
		return;
	}
	for (int i = 0; i < 20; i++) {
		uint64_t t = T0 + (uint64_t)i * 10000000ull;
		struct span_event fwd = span_event_of(t, 6000000, SPAN_FORWARD, LAYER_NONE, 0);
		struct span_event sync = span_event_of(t + 1000000, 4000000, SPAN_SYNC, LAYER_NONE, 0);
		struct span_event sample = span_event_of(t + 7000000, 2000000, SPAN_SAMPLE, LAYER_NONE, 0);
		fwd.parent_kind = SPAN_KIND_COUNT;
		sync.parent_kind = SPAN_FORWARD;
		sample.parent_kind = SPAN_KIND_COUNT;
		topview_on_span(tv, &sync);
		topview_on_span(tv, &fwd);
		topview_on_span(tv, &sample);
	}
	topview_refresh(tv, T0 + SEC);
	char *text = render(tv, 100);
	if (!text) {
		CHECK(0, "open_memstream");
		topview_free(tv);
		return;
	}
	printf("%s", text);
	int f = indent_of(text, "forward"), sy = indent_of(text, "sync"), sa = indent_of(text, "sample");
	CHECK(f >= 0 && sy >= 0 && sa >= 0, "forward, sync and sample rows drawn (%d %d %d)", f, sy, sa);
	CHECK(sy > f, "sync (inside forward) drawn under it: indent %d > %d", sy, f);
	CHECK(sa == f, "sample (between forwards) drawn beside forward: indent %d == %d", sa, f);
	const char *line = strstr(text, " sample ");
	const char *end = line ? strchr(line, '\n') : NULL;
	CHECK(line && end && !memchr(line, '%', (size_t)(end - line)), "sample's row has no %%FWD");
	free(text);
	topview_free(tv);
}

static void test_launch_line(void)
{
	printf("launch: the header line for each way a forward ran\n");
	check_launch_line(LAUNCH_FORWARD, 3, "launch forward 3: fused, 1 kernel per forward");
	check_launch_line(LAUNCH_LAYERS, 4, "launch layers 4: layers in 1 kernel");
	check_launch_line(LAUNCH_PHASES, 2, "launch phases 2  clock: spans host");
}

int main(void)
{
	scratch = malloc(sizeof(uint64_t) * NTOKENS * 4 * NLAYERS * 2);
	struct topview *tv = topview_new(SEC, TOPVIEW_DEFAULT_SLOTS, T0);
	if (!scratch || !tv) {
		printf("out of memory\n");
		return 1;
	}
	CHECK(topview_new(0, 10, 0) == NULL, "zero interval rejected");
	topview_refresh(tv, T0);
	CHECK(topview_nrows(tv) == 0, "no rows before events");
	feed(tv);
	topview_refresh(tv, T0 + 6 * SEC);
	test_rows(tv);
	test_split_layers(tv);
	test_keys(tv);
	test_render(tv);
	test_pause_reset_expiry(tv);
	test_launch_line();
	test_tree_parents();
	topview_free(tv);
	free(scratch);
	if (failures) {
		printf("%d check(s) failed\n", failures);
		return 1;
	}
	printf("all topview checks passed\n");
	return 0;
}
