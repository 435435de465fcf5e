/* metrics.c - the per-interval metric stream (see metrics.h). */
#include "output/metrics.h"

#include <stdlib.h>
#include <string.h>
#include "analysis/stats.h"

#define LAYER_SLOTS 65   /* slot 0 = LAYER_NONE, 1..64 = layers 0..63 */
#define MAX_PIDS 256

/* One process's interval: a histogram per span name and layer, made on
 * first use, and its tokens. */
struct pid_interval {
	__u32 pid;
	uint64_t tokens;
	struct hist *series[SPAN_KINDS][LAYER_SLOTS];
};

struct metrics_stream {
	const struct proc_table *procs;
	struct pid_interval *pids[MAX_PIDS];
	size_t npids;
	uint64_t untracked;   /* records of processes beyond MAX_PIDS */
};

struct metrics_stream *metrics_new(const struct proc_table *procs)
{
	struct metrics_stream *m = calloc(1, sizeof(*m));

	if (m)
		m->procs = procs;
	return m;
}

void metrics_free(struct metrics_stream *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->npids; i++) {
		for (int k = 0; k < SPAN_KINDS; k++)
			for (int l = 0; l < LAYER_SLOTS; l++)
				free(m->pids[i]->series[k][l]);
		free(m->pids[i]);
	}
	free(m);
}

static struct pid_interval *pid_get(struct metrics_stream *m, __u32 pid)
{
	struct pid_interval *p;

	for (size_t i = 0; i < m->npids; i++)
		if (m->pids[i]->pid == pid)
			return m->pids[i];
	if (m->npids == MAX_PIDS || !(p = calloc(1, sizeof(*p)))) {
		m->untracked++;
		return NULL;
	}
	p->pid = pid;
	m->pids[m->npids++] = p;
	return p;
}

static unsigned layer_slot(int32_t layer)
{
	return layer >= 0 && layer < LAYER_SLOTS - 1 ? (unsigned)layer + 1 : 0;
}

static int on_span(void *ctx, const struct span_event *e)
{
	struct pid_interval *p = pid_get(ctx, e->h.pid);
	struct hist **h;

	if (!p)
		return 0;
	h = &p->series[e->kind][layer_slot(e->layer)];
	if (!*h && (*h = malloc(sizeof(**h))))
		hist_reset(*h);
	if (*h)
		hist_add(*h, e->dur_ns);
	return 0;
}

static int on_token(void *ctx, const struct token_event *e)
{
	struct pid_interval *p = pid_get(ctx, e->h.pid);

	if (p)
		p->tokens++;
	return 0;
}

static int on_pid(void *ctx, const struct event_header *h)
{
	pid_get(ctx, h->pid);
	return 0;
}

static int on_request(void *ctx, const struct request_event *e) { return on_pid(ctx, &e->h); }
static int on_alloc(void *ctx, const struct alloc_event *e) { return on_pid(ctx, &e->h); }
static int on_kv(void *ctx, const struct kv_event *e) { return on_pid(ctx, &e->h); }
static int on_kernel(void *ctx, const struct kernel_event *e) { return on_pid(ctx, &e->h); }

const struct event_handlers metrics_handlers = {
	.span = on_span,
	.token = on_token,
	.request = on_request,
	.alloc = on_alloc,
	.free = on_alloc,
	.kv = on_kv,
	.kernel = on_kernel,
};

/* ---- writing ---- */

static void record_begin(struct outbuf *ob, uint64_t ts_ms, const char *metric, double value)
{
	ob_lit(ob, "{\"ts_ms\":");
	ob_u64(ob, ts_ms);
	ob_key_name(ob, "metric", metric);
	ob_key(ob, "value");
	ob_double(ob, value);
	ob_lit(ob, ",\"labels\":{");
}

/* A label whose value is a decimal number, written as the string seed 002
 * asks for ("labels: object of string key/values"). */
static void label_num(struct outbuf *ob, const char *key, int64_t v, int first)
{
	if (!first)
		ob_lit(ob, ",");
	ob_lit(ob, "\"");
	ob_lit(ob, key);
	ob_lit(ob, "\":\"");
	ob_s64(ob, v);
	ob_lit(ob, "\"");
}

static int simple(struct outbuf *ob, uint64_t ts_ms, const char *metric, double value, int64_t pid)
{
	if (ob_begin(ob))
		return -1;
	record_begin(ob, ts_ms, metric, value);
	if (pid >= 0)
		label_num(ob, "pid", pid, 1);
	ob_lit(ob, "}}");
	ob_end(ob);
	return 0;
}

/* One record of series (kind, slot) of pid. Labels: target (what was
 * measured: the span, and its layer as "span/L3"; the seed's colour key),
 * span, layer and pid, all strings. */
static int latency(struct outbuf *ob, uint64_t ts_ms, const char *metric, double value,
		   unsigned kind, unsigned slot, __u32 pid)
{
	if (ob_begin(ob))
		return -1;
	record_begin(ob, ts_ms, metric, value);
	ob_lit(ob, "\"target\":\"");
	ob_lit(ob, span_kind_name(kind));
	if (slot) {
		ob_lit(ob, "/L");
		ob_u64(ob, slot - 1);
	}
	ob_lit(ob, "\",\"span\":\"");
	ob_lit(ob, span_kind_name(kind));
	ob_lit(ob, "\"");
	label_num(ob, "layer", slot ? (int64_t)slot - 1 : LAYER_NONE, 0);
	label_num(ob, "pid", pid, 0);
	ob_lit(ob, "}}");
	ob_end(ob);
	return 0;
}

static int series_records(struct outbuf *ob, uint64_t ts_ms, const struct hist *h, unsigned kind,
			  unsigned slot, __u32 pid)
{
	static const struct { const char *metric; double q; } pct[] = {
		{ "latency_p50_ms", 0.50 }, { "latency_p95_ms", 0.95 }, { "latency_p99_ms", 0.99 },
	};

	if (latency(ob, ts_ms, "latency_ms", hist_mean(h) / 1e6, kind, slot, pid))
		return -1;
	for (size_t i = 0; i < sizeof(pct) / sizeof(pct[0]); i++)
		if (latency(ob, ts_ms, pct[i].metric, (double)hist_quantile(h, pct[i].q) / 1e6, kind, slot, pid))
			return -1;
	/* A count is a value, so it is a series of its own, not a label. */
	return latency(ob, ts_ms, "span_count", (double)h->count, kind, slot, pid);
}

static int pid_records(struct metrics_stream *m, struct pid_interval *p, struct outbuf *ob,
		       uint64_t ts_ms, double secs)
{
	const struct proc_state *ps = proc_table_find(m->procs, p->pid);

	for (unsigned k = 0; k < SPAN_KINDS; k++)
		for (unsigned l = 0; l < LAYER_SLOTS; l++) {
			struct hist *h = p->series[k][l];
			if (!h || !h->count)
				continue;
			if (series_records(ob, ts_ms, h, k, l, p->pid))
				return -1;
			hist_reset(h);
		}
	if (simple(ob, ts_ms, "tokens_per_s", secs > 0 ? p->tokens / secs : 0, p->pid))
		return -1;
	p->tokens = 0;
	if (ps && ps->kv_seen && simple(ob, ts_ms, "kv_cache_bytes", (double)ps->kv_used, p->pid))
		return -1;
	return simple(ob, ts_ms, "memory_live_bytes", (double)proc_live_total(ps), p->pid);
}

int metrics_write(struct metrics_stream *m, struct outbuf *ob, uint64_t ts_ms, double secs,
		  uint64_t events, uint64_t dropped_total)
{
	for (size_t i = 0; i < m->npids; i++)
		if (pid_records(m, m->pids[i], ob, ts_ms, secs))
			return -1;
	if (simple(ob, ts_ms, "events_per_s", secs > 0 ? events / secs : 0, -1) ||
	    simple(ob, ts_ms, "dropped_events_total", (double)dropped_total, -1))
		return -1;
	return 0;
}
