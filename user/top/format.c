/* format.c - the text of `spantrace top` (see topview.h): the column
 * plan for a width, table rows, header lines and whole batch frames, from
 * the numbers of the last topview_refresh(). */
#include "analysis/rssattr.h"
#include "top/topview_impl.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

enum { COL_COUNT, COL_RATE, COL_LAST, COL_MEAN, COL_P50, COL_P95, COL_P99, COL_MAX, COL_SHARE,
       COL_DEV50, COL_DEV99, NCOLS };

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
	/* device clock; only while some span carries device time */
	[COL_DEV50] = { "DEV50", "DEV50", 6, 10, TOPVIEW_SORT_TREE },
	[COL_DEV99] = { "DEV99", "DEV99", 6, 11, TOPVIEW_SORT_TREE },
};

static int device_columns(const struct topview *tv)
{
	return tv->device_spans || tv->device_lost;
}

#define NAME_MIN 16
#define NAME_MAX_WIDTH 40

/* Which columns fit in width, and how wide the name column is then. */
static int plan_columns(const struct topview *tv, int width, int shown[NCOLS])
{
	int used = 0;
	for (int c = 0; c < NCOLS; c++) {
		shown[c] = c < COL_DEV50 || device_columns(tv);
		used += shown[c] ? columns[c].width + 1 : 0;
	}
	for (int drop = 1; used + NAME_MIN > width && drop <= 11; drop++)
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
	int name = plan_columns(tv, width, shown);
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
	int name = plan_columns(tv, width, shown);
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
	if (r.dev_wcount) {
		fmt_ns(cell[COL_DEV50], 32, columns[COL_DEV50].width, (double)r.dev_p50_ns);
		fmt_ns(cell[COL_DEV99], 32, columns[COL_DEV99].width, (double)r.dev_p99_ns);
	} else {
		strcpy(cell[COL_DEV50], "-");
		strcpy(cell[COL_DEV99], "-");
	}
	for (int c = 0; c < NCOLS; c++)
		if (shown[c])
			put(buf, size, width, &pos, " %*s", columns[c].width, cell[c]);
}

static int has_problems(const struct topview *tv)
{
	return tv->span_errors || tv->bad_events || tv->invalid || tv->oom || tv->procs.untracked ||
	       tv->unknown_frees;
}

static int launch_seen(const struct topview *tv)
{
	return tv->forwards_by_launch[LAUNCH_FORWARD] || tv->forwards_by_launch[LAUNCH_PHASES] ||
	       tv->forwards_by_launch[LAUNCH_LAYERS] || device_columns(tv);
}

/* The requests pane: a serving engine's, or the socket's requests. */
static int serving_pane(const struct topview *tv)
{
	return tv->serving_seen || tv->http_traced;
}

int topview_header_count(const struct topview *tv)
{
	return 5 + 2 * serving_pane(tv) + launch_seen(tv) + has_problems(tv);
}

/* How the forwards ran, and which clock each column is. A fused forward is
 * one kernel (a layers launch, its layers in one): it has no layer rows nor
 * their op rows, and the line says how to get them. */
static void format_launch(const struct topview *tv, char *buf, size_t size, int width, int *alert)
{
	const uint64_t *n = tv->forwards_by_launch;
	int pos = 0;

	put(buf, size, width, &pos, "launch");
	for (int m = LAUNCH_HOST; m < LAUNCH_COUNT; m++)
		if (n[m])
			put(buf, size, width, &pos, " %s %" PRIu64, span_launch_name(m), n[m]);
	if (n[LAUNCH_FORWARD] && !n[LAUNCH_PHASES] && !n[LAUNCH_LAYERS]) {   /* short: 80 columns */
		put(buf, size, width, &pos, ": fused, 1 kernel per forward; op rows need --level detail");
	} else if (n[LAUNCH_LAYERS] && !n[LAUNCH_PHASES]) {
		put(buf, size, width, &pos, ": layers in 1 kernel; their rows need --level detail");
	} else {
		put(buf, size, width, &pos, "  clock: spans host; %sDEV50/DEV99 device",
		    tv->kernels_agg.count ? "kernels, " : "");
	}
	if (tv->device_lost) {
		put(buf, size, width, &pos, "  device time lost on %" PRIu64 " spans", tv->device_lost);
		*alert = 1;
	}
}

static void format_identity(const struct topview *tv, char *buf, size_t size, int width)
{
	int pos = 0;
	/* states first: a long binary path must not push them off screen */
	put(buf, size, width, &pos, "spantrace top%s%s - ", tv->paused ? " [PAUSED]" : "",
	    tv->ended ? " [exited]" : "");
	if (tv->procs.n == 0)
		put(buf, size, width, &pos, "waiting for events");
	else
		put(buf, size, width, &pos, "pid%s", tv->procs.n > 1 ? "s" : "");
	for (size_t i = 0; i < tv->procs.n; i++)
		put(buf, size, width, &pos, "%s%u", i ? "," : " ", tv->procs.procs[i].pid);
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
	/* a serving engine's tokens are its emits, counted by the ttft/itl rows */
	double tokens = tv->have_token || !tv->emits ? (double)tok->st.count
						  : (double)(tv->req_rows[RR_TTFT].st.count + tv->req_rows[RR_ITL].st.count);
	fmt_count(toks, sizeof(toks), 7, tokens);
	fmt_count(reqs, sizeof(reqs), 7, (double)tv->request.st.count);
	fmt_count(evs, sizeof(evs), 7, tv->events_rate);
	if (tv->have_token || tv->emits) {
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
		for (size_t i = 0; i < tv->procs.n; i++) {
			live += tv->procs.procs[i].live[p];
			peak += tv->procs.procs[i].peak[p];
			reserved += tv->procs.procs[i].reserved[p];
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
	uint64_t used = 0, cap = 0, rss = 0, pools = 0;
	for (size_t i = 0; i < tv->procs.n; i++) {
		const struct proc_state *p = &tv->procs.procs[i];
		struct rss_split sp;
		kv_seen |= p->kv_seen;
		used += p->kv_used;
		cap += p->kv_cap;
		if (tv->rss[i].ok) {
			rss_split_make(tv->rss[i].bytes, p->reserved, &sp);
			rss += sp.rss;
			pools += sp.pools;
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
		put(buf, size, width, &pos, "kv ? (none told since the attach)");
	}
	if (rss_ok) {
		char c[16];
		fmt_bytes(a, sizeof(a), rss);
		fmt_bytes(b, sizeof(b), pools);
		fmt_bytes(c, sizeof(c), rss - pools);
		put(buf, size, width, &pos, "  rss %s (pools %s, other %s)", a, b, c);
	} else {
		put(buf, size, width, &pos, "  rss -");
	}
	put(buf, size, width, &pos, "  allocs %" PRIu64 "  frees %" PRIu64, tv->allocs, tv->frees);
	if (tv->at_attach)
		put(buf, size, width, &pos, "  at attach %" PRIu64, tv->at_attach);
	if (tv->tensors) {
		fmt_bytes(a, sizeof(a), tv->tensor_bytes);
		put(buf, size, width, &pos, "  tensors %" PRIu64 " (%s)", tv->tensors, a);
	}
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
	if (tv->procs.untracked)
		put(buf, size, width, &pos, " events of untracked pids %" PRIu64, tv->procs.untracked);
	if (tv->oom)
		put(buf, size, width, &pos, " out of memory %" PRIu64, tv->oom);
}

/* The serving engine now: its gauges, its KV blocks, its last step. */
static void format_serving(const struct topview *tv, char *buf, size_t size, int width)
{
	const struct step_event *st = &tv->last_step;
	uint64_t used = 0, cap = 0;
	int pos = 0;

	for (size_t i = 0; i < tv->procs.n; i++) {
		used += tv->procs.procs[i].kv_used;
		cap += tv->procs.procs[i].kv_cap;
	}
	if (tv->gauges_seen)
		put(buf, size, width, &pos, "requests: running %u  waiting %u", tv->running, tv->waiting);
	else if (tv->serving_seen)
		put(buf, size, width, &pos, "requests: running ?  waiting ? (the engine tells no queue)");
	else
		put(buf, size, width, &pos, "requests: from the socket only (no engine queue seen)");
	if (!tv->serving_seen)
		return;
	if (cap)
		put(buf, size, width, &pos, "  kv %.0f%%", 100.0 * (double)used / (double)cap);
	put(buf, size, width, &pos, "  batch %u seqs %u+%u tok", st->nseqs, st->prefill_tokens, st->decode_tokens);
	if (tv->prefix_seen)
		put(buf, size, width, &pos, "  prefix hits %" PRIu64 " (%" PRIu64 " tok) cached %u req %u blk",
		    tv->prefix_hits, tv->prefix_cached_tokens, tv->prefix_entries, tv->prefix_blocks);
}

/* The engine's requests in flight longest, by age since queued. */
static void format_oldest_engine(const struct topview *tv, char *buf, size_t size, int width, int *at)
{
	int shown[3] = { -1, -1, -1 }, pos = *at;

	for (int k = 0; k < 3; k++)
		for (unsigned i = 0; i < tv->nactive; i++) {
			int taken = 0;
			for (int j = 0; j < k; j++)
				taken |= shown[j] == (int)i;
			if (!taken && (shown[k] < 0 || tv->active[i].queued_ns < tv->active[shown[k]].queued_ns))
				shown[k] = (int)i;
		}
	put(buf, size, width, &pos, "oldest:");
	if (!tv->gauges_seen) {
		put(buf, size, width, &pos, tv->serving_seen ? " ? (the engine tells no queue)"
						     : " ? (the socket times a request when it ends)");
		*at = pos;
		return;
	}
	if (shown[0] < 0)
		put(buf, size, width, &pos, " none");
	for (int k = 0; k < 3 && shown[k] >= 0; k++) {
		const struct tv_req *r = &tv->active[shown[k]];
		char age[16];
		fmt_ns(age, sizeof(age), 6, tv->now_ns > r->queued_ns ? (double)(tv->now_ns - r->queued_ns) : 0);
		put(buf, size, width, &pos, "  #%llu %s %utok %s", (unsigned long long)r->req, age, r->tokens,
		    r->running ? "run" : "wait");
	}
	*at = pos;
}

/* The requests in flight longest, by age since queued; with --http, the
 * socket's count of them too (read and not yet answered, since the attach). */
static void format_oldest(const struct topview *tv, char *buf, size_t size, int width)
{
	int pos = 0;

	if (tv->http_traced)
		put(buf, size, width, &pos, "in flight %" PRIu64 " (socket, since attach), ", tv->http_in_flight);
	else
		put(buf, size, width, &pos, "in flight, ");
	format_oldest_engine(tv, buf, size, width, &pos);
}

void topview_format_header(const struct topview *tv, int i, char *buf, size_t size, int width, int *alert)
{
	width = effective_width(width);
	buf[0] = '\0';
	*alert = 0;
	if (i >= 5 && serving_pane(tv)) {
		if (i == 5) {
			format_serving(tv, buf, size, width);
			return;
		}
		if (i == 6) {
			format_oldest(tv, buf, size, width);
			return;
		}
		i -= 2;
	}
	if (i >= 5 && launch_seen(tv)) {
		if (i == 5) {
			format_launch(tv, buf, size, width, alert);
			return;
		}
		i -= 1;
	}
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
		if (has_problems(tv)) {
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
