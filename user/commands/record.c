/* record.c - `spantrace record`: trace one process, a command, or every
 * process of a binary, and write JSONL / CSV / metrics / a summary. */
#include "commands/commands.h"

#include <argp.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "output/chrome.h"
#include "output/export.h"
#include "core/launch.h"
#include "output/outbuf.h"
#include "core/numparse.h"
#include "analysis/perfev.h"
#include "analysis/profile.h"
#include "core/maps.h"
#include "core/session.h"
#include "analysis/stats.h"
#include "core/target.h"

#define POLL_MS 50
#define LAYER_SLOTS 65   /* slot 0 = LAYER_NONE, 1..64 = layers 0..63 */
#define MAX_PIDS 256

struct record_opts {
	struct launch_opts target;
	const char *out, *csv, *summary, *metrics;
	double duration_s;
	enum trace_level level;
	unsigned ringbuf_kb;
	uint64_t min_dur_ns;
	int quiet;
	int perf;                 /* --perf: span counter deltas */
	const char *chrome;       /* --chrome FILE */
	uint64_t chrome_max;      /* --max-events */
};

struct interval_acc {
	uint32_t n;
	uint64_t sum_ns;
};

/* What one traced process has shown us. */
struct pid_stats {
	uint32_t pid;
	uint64_t live[POOL_COUNT];
	uint64_t tokens_interval;
	uint64_t kv_used, kv_cap;
	int kv_seen;
	struct interval_acc iv[SPAN_KIND_COUNT][LAYER_SLOTS];
};

struct recorder {
	const struct record_opts *o;
	struct outbuf jsonl, csv, metrics;
	int have_jsonl, have_csv, have_metrics;
	struct export_clock clk;
	struct dist spans[SPAN_KIND_COUNT];
	struct dist kernels[KERNEL_COUNT];
	struct dist tokens, requests;
	uint64_t device_busy_ns, mismatched;
	uint64_t ntokens, first_token_ns, last_token_end_ns;
	uint64_t interval_events, interval_tokens;
	struct pid_stats *pids[MAX_PIDS];
	size_t npids;
	struct outbuf *failed;           /* the output that failed to write */
	struct perf_counters pc;          /* --perf */
	struct profile_counters perf_totals;
	struct chrome_writer *chrome;     /* --chrome */
	int chrome_failed;
};

/* ---- per-pid state ---- */
static struct pid_stats *pid_stats_get(struct recorder *r, uint32_t pid)
{
	for (size_t i = 0; i < r->npids; i++)
		if (r->pids[i]->pid == pid)
			return r->pids[i];
	if (r->npids == MAX_PIDS)
		return NULL;
	struct pid_stats *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	r->pids[r->npids++] = p;
	return p;
}

static uint64_t pid_live_total(const struct pid_stats *p)
{
	uint64_t n = 0;
	for (int i = 0; p && i < POOL_COUNT; i++)
		n += p->live[i];
	return n;
}

static unsigned layer_slot(int32_t layer)
{
	return layer >= 0 && layer < LAYER_SLOTS - 1 ? (unsigned)layer + 1 : 0;
}

/* ---- the event callback ---- */
static void account(struct recorder *r, const void *data, struct pid_stats *p)
{
	const struct event_header *h = data;

	switch (h->type) {
	case EV_SPAN: {
		const struct span_event *e = data;
		if (e->kind < SPAN_KIND_COUNT) {
			dist_add(&r->spans[e->kind], e->dur_ns);
			if (p) {
				struct interval_acc *a = &p->iv[e->kind][layer_slot(e->layer)];
				a->n++;
				a->sum_ns += e->dur_ns;
			}
		}
		r->mismatched += !!(e->flags & SPAN_F_MISMATCH);
		break;
	}
	case EV_KERNEL: {
		const struct kernel_event *e = data;
		uint64_t d = e->end_ns > e->start_ns ? e->end_ns - e->start_ns : 0;
		if (e->kernel_id < KERNEL_COUNT)
			dist_add(&r->kernels[e->kernel_id], d);
		r->device_busy_ns += d;
		break;
	}
	case EV_TOKEN: {
		const struct token_event *e = data;
		dist_add(&r->tokens, e->dur_ns);
		if (!r->ntokens++)
			r->first_token_ns = e->h.ts_ns;
		if (e->h.ts_ns + e->dur_ns > r->last_token_end_ns)
			r->last_token_end_ns = e->h.ts_ns + e->dur_ns;
		r->interval_tokens++;
		if (p)
			p->tokens_interval++;
		break;
	}
	case EV_REQUEST:
		dist_add(&r->requests, ((const struct request_event *)data)->dur_ns);
		break;
	case EV_ALLOC:
	case EV_FREE: {
		const struct alloc_event *e = data;
		if (p && e->pool < POOL_COUNT && !e->unknown)
			p->live[e->pool] = e->live_bytes;
		break;
	}
	case EV_KV: {
		const struct kv_event *e = data;
		if (p) {
			p->kv_used = e->used_bytes;
			p->kv_cap = e->capacity_bytes;
			p->kv_seen = 1;
		}
		break;
	}
	}
}

static int on_event(void *ctx, const void *data, size_t size)
{
	struct recorder *r = ctx;
	const struct event_header *h = data;
	struct pid_stats *p;

	if (size < sizeof(*h))
		return 0;
	p = pid_stats_get(r, h->pid);
	account(r, data, p);
	if (r->o->perf && h->type == EV_SPAN && size >= sizeof(struct span_event))
		profile_counters_add(&r->perf_totals, data);
	if (r->chrome && !r->chrome_failed && chrome_write_record(r->chrome, data, size))
		r->chrome_failed = 1;
	r->interval_events++;
	if (r->failed)
		return 0; /* output lost: still drain and count, so the loss balances */
	if (r->have_jsonl && export_jsonl_event(&r->jsonl, data, size)) {
		r->failed = &r->jsonl;
		return -EIO;
	}
	if (r->have_csv && export_csv_event(&r->csv, data, size, &r->clk, pid_live_total(p))) {
		r->failed = &r->csv;
		return -EIO;
	}
	return 0;
}

/* ---- metrics (one record per series per second) ---- */
static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void metric_begin(struct outbuf *ob, uint64_t ts_ms, const char *metric)
{
	ob_lit(ob, "{\"ts_ms\":");
	ob_u64(ob, ts_ms);
	ob_lit(ob, ",\"metric\":\"");
	ob_lit(ob, metric);
	ob_lit(ob, "\",\"value\":");
}

static int metric_simple(struct outbuf *ob, uint64_t ts_ms, const char *metric, double value, int64_t pid)
{
	if (ob_begin(ob))
		return -1;
	metric_begin(ob, ts_ms, metric);
	ob_double(ob, value);
	ob_lit(ob, ",\"labels\":{");
	if (pid >= 0) {
		ob_lit(ob, "\"pid\":");
		ob_s64(ob, pid);
	}
	ob_lit(ob, "}}");
	ob_end(ob);
	return 0;
}

static int metrics_for_pid(struct outbuf *ob, uint64_t ts_ms, struct pid_stats *p, double secs)
{
	for (int k = 0; k < SPAN_KIND_COUNT; k++)
		for (int l = 0; l < LAYER_SLOTS; l++) {
			struct interval_acc *a = &p->iv[k][l];
			if (!a->n)
				continue;
			if (ob_begin(ob))
				return -1;
			metric_begin(ob, ts_ms, "latency_ms");
			ob_double(ob, (double)a->sum_ns / a->n / 1e6);
			ob_lit(ob, ",\"labels\":{\"span\":\"");
			ob_lit(ob, span_kind_name(k));
			ob_lit(ob, "\",\"layer\":");
			ob_s64(ob, l ? l - 1 : LAYER_NONE);
			ob_lit(ob, ",\"pid\":");
			ob_u64(ob, p->pid);
			ob_lit(ob, ",\"count\":");
			ob_u64(ob, a->n);
			ob_lit(ob, "}}");
			ob_end(ob);
			a->n = 0;
			a->sum_ns = 0;
		}
	if (metric_simple(ob, ts_ms, "tokens_per_s", secs > 0 ? p->tokens_interval / secs : 0, p->pid))
		return -1;
	p->tokens_interval = 0;
	if (p->kv_seen && metric_simple(ob, ts_ms, "kv_cache_bytes", (double)p->kv_used, p->pid))
		return -1;
	return metric_simple(ob, ts_ms, "memory_live_bytes", (double)pid_live_total(p), p->pid);
}

static int write_metrics(struct recorder *r, double secs, const struct counters *c)
{
	uint64_t ts = wall_ms(), dropped = event_types_sum(c->dropped);

	if (!r->have_metrics)
		return 0;
	for (size_t i = 0; i < r->npids; i++)
		if (metrics_for_pid(&r->metrics, ts, r->pids[i], secs))
			goto fail;
	if (metric_simple(&r->metrics, ts, "events_per_s", secs > 0 ? r->interval_events / secs : 0, -1) ||
	    metric_simple(&r->metrics, ts, "dropped_events_total", (double)dropped, -1))
		goto fail;
	return 0;
fail:
	r->failed = &r->metrics;
	return -1;
}

/* ---- loss accounting ---- */
static int write_drops(struct recorder *r, const struct session *s, const struct counters *c)
{
	struct outbuf *ob = &r->jsonl;

	if (!r->have_jsonl)
		return 0;
	if (ob_begin(ob))
		goto fail;
	ob_lit(ob, "{\"type\":\"drops\",\"ts_ns\":");
	ob_u64(ob, mono_now_ns());
	ob_key(ob, "fired");
	ob_u64(ob, event_types_sum(c->fired));
	ob_key(ob, "delivered");
	ob_u64(ob, session_delivered_total(s));
	ob_key(ob, "dropped");
	ob_u64(ob, event_types_sum(c->dropped));
	ob_lit(ob, ",\"dropped_by_type\":{");
	for (int t = 1; t < EV_TYPE_COUNT; t++) {
		if (t > 1)
			ob_lit(ob, ",");
		ob_lit(ob, "\"");
		ob_lit(ob, event_type_name(t));
		ob_lit(ob, "\":");
		ob_u64(ob, c->dropped[t]);
	}
	ob_lit(ob, "}}");
	ob_end(ob);
	return 0;
fail:
	r->failed = ob;
	return -1;
}

/* ---- session line and summary (json-c: rare, and strings need escaping) ---- */
/* Names of the span records' "counters" entries, in order. */
static json_object *perf_names_json(const struct perf_counters *pc)
{
	json_object *a = json_object_new_array();
	for (unsigned i = 0; a && i < pc->ncounters; i++)
		json_object_array_add(a, json_object_new_string(pc->names[i]));
	return a;
}

static json_object *session_json(const struct recorder *r, const struct record_opts *o, const struct launch *l,
				 const struct session *s, uint64_t start_mono, uint64_t start_wall_ns)
{
	const struct target *t = &l->target;
	json_object *j = json_object_new_object(), *pids = json_object_new_array(), *cmd;
	struct utsname u;

	if (!j || !pids) {
		json_object_put(j);
		json_object_put(pids);
		return NULL;
	}
	uname(&u);
	json_object_object_add(j, "type", json_object_new_string("session"));
	json_object_object_add(j, "host", json_object_new_string(u.nodename));
	json_object_object_add(j, "kernel", json_object_new_string(u.release));
	if (t->pid > 0)
		json_object_array_add(pids, json_object_new_int64(t->pid));
	json_object_object_add(j, "pids", pids);
	json_object_object_add(j, "mode", json_object_new_string(launch_mode_name(l->mode)));
	json_object_object_add(j, "binary", json_object_new_string(t->shown));
	json_object_object_add(j, "build_id", json_object_new_string(t->build_id));
	if (o->target.cmd) {
		cmd = json_object_new_array();
		for (char **a = o->target.cmd; cmd && *a; a++)
			json_object_array_add(cmd, json_object_new_string(*a));
		json_object_object_add(j, "command", cmd);
	}
	json_object_object_add(j, "level", json_object_new_string(trace_level_name(o->level)));
	json_object_object_add(j, "start_wall_ns", json_object_new_int64((int64_t)start_wall_ns));
	json_object_object_add(j, "start_mono_ns", json_object_new_int64((int64_t)start_mono));
	json_object_object_add(j, "ringbuf_bytes", json_object_new_int64(s->ringbuf_bytes));
	json_object_object_add(j, "min_dur_ns", json_object_new_int64((int64_t)o->min_dur_ns));
	json_object_object_add(j, "attach_ns", json_object_new_int64((int64_t)s->attach_ns));
	if (o->perf)
		json_object_object_add(j, "perf_counters", perf_names_json(&r->pc));
	return j;
}

static json_object *dist_json(struct dist *d, uint64_t count_in_kernel, int with_kernel_count)
{
	json_object *j = json_object_new_object();
	uint64_t n = d->hist.count;

	if (!j)
		return NULL;
	json_object_object_add(j, "count", json_object_new_int64((int64_t)n));
	if (with_kernel_count)
		json_object_object_add(j, "count_in_kernel", json_object_new_int64((int64_t)count_in_kernel));
	json_object_object_add(j, "total_ns", json_object_new_int64((int64_t)d->hist.sum));
	json_object_object_add(j, "avg_ns", json_object_new_double(n ? (double)d->hist.sum / n : 0));
	json_object_object_add(j, "p50_ns", json_object_new_int64((int64_t)dist_quantile(d, 0.50)));
	json_object_object_add(j, "p95_ns", json_object_new_int64((int64_t)dist_quantile(d, 0.95)));
	json_object_object_add(j, "p99_ns", json_object_new_int64((int64_t)dist_quantile(d, 0.99)));
	json_object_object_add(j, "max_ns", json_object_new_int64((int64_t)d->hist.max));
	json_object_object_add(j, "exact", json_object_new_boolean(dist_is_exact(d)));
	return j;
}

static int agg_count_entry(void *ctx, const struct agg_key *k, const struct agg_val *v)
{
	uint64_t *span_counts = ctx;

	if (k->kind < SPAN_KIND_COUNT)
		span_counts[k->kind] += v->count;
	return 0;
}

/* In-kernel span counts per kind (all pids), which include spans below the
 * threshold or lost to drops. */
static void agg_counts(const struct session *s, uint64_t *span_counts)
{
	memset(span_counts, 0, sizeof(uint64_t) * SPAN_KIND_COUNT);
	maps_foreach_agg(s, agg_count_entry, span_counts);
}

static int pool_json_entry(void *ctx, const struct pool_key *k, const struct pool_val *v)
{
	json_object *j = ctx, *per_pid, *pj = json_object_new_object();
	char pidbuf[16];

	snprintf(pidbuf, sizeof(pidbuf), "%u", k->pid);
	if (!json_object_object_get_ex(j, pidbuf, &per_pid)) {
		per_pid = json_object_new_object();
		json_object_object_add(j, pidbuf, per_pid);
	}
	json_object_object_add(pj, "live_bytes", json_object_new_int64((int64_t)v->live_bytes));
	json_object_object_add(pj, "peak_bytes", json_object_new_int64((int64_t)v->peak_bytes));
	json_object_object_add(pj, "reserved_bytes", json_object_new_int64((int64_t)v->reserved_bytes));
	json_object_object_add(pj, "peak_reserved_bytes",
			       json_object_new_int64((int64_t)v->peak_reserved_bytes));
	json_object_object_add(pj, "allocs", json_object_new_int64((int64_t)v->allocs));
	json_object_object_add(pj, "frees", json_object_new_int64((int64_t)v->frees));
	json_object_object_add(per_pid, pool_name(k->pool), pj);
	return 0;
}

static json_object *pools_json(const struct session *s)
{
	json_object *j = json_object_new_object();

	if (j)
		maps_foreach_pool(s, pool_json_entry, j);
	return j;
}

static json_object *loss_json(const struct session *s, const struct counters *c)
{
	json_object *j = json_object_new_object(), *by = json_object_new_object();

	json_object_object_add(j, "fired", json_object_new_int64((int64_t)event_types_sum(c->fired)));
	json_object_object_add(j, "delivered", json_object_new_int64((int64_t)session_delivered_total(s)));
	json_object_object_add(j, "dropped", json_object_new_int64((int64_t)event_types_sum(c->dropped)));
	for (int t = 1; t < EV_TYPE_COUNT; t++) {
		json_object *tj = json_object_new_object();
		json_object_object_add(tj, "fired", json_object_new_int64((int64_t)c->fired[t]));
		json_object_object_add(tj, "delivered", json_object_new_int64((int64_t)s->delivered[t]));
		json_object_object_add(tj, "dropped", json_object_new_int64((int64_t)c->dropped[t]));
		json_object_object_add(by, event_type_name(t), tj);
	}
	json_object_object_add(j, "by_type", by);
	json_object_object_add(j, "balanced",
			       json_object_new_boolean(session_delivered_total(s) + event_types_sum(c->dropped) ==
						       event_types_sum(c->fired)));
	return j;
}

static json_object *summary_json(struct recorder *r, const struct session *s, const struct counters *c,
				 double wall_s, const char *stop_reason)
{
	json_object *j = json_object_new_object(), *spans = json_object_new_object();
	json_object *kernels = json_object_new_object();
	uint64_t kcounts[SPAN_KIND_COUNT], total_ops = 0, nspans = 0;
	double tok_span_s;

	agg_counts(s, kcounts);
	for (int k = 0; k < SPAN_KIND_COUNT; k++) {
		total_ops += r->spans[k].hist.count;
		nspans += r->spans[k].hist.count;
		if (r->spans[k].hist.count || kcounts[k])
			json_object_object_add(spans, span_kind_name(k), dist_json(&r->spans[k], kcounts[k], 1));
	}
	for (int k = 0; k < KERNEL_COUNT; k++) {
		total_ops += r->kernels[k].hist.count;
		if (r->kernels[k].hist.count)
			json_object_object_add(kernels, cl_kernel_name(k), dist_json(&r->kernels[k], 0, 0));
	}
	tok_span_s = r->ntokens ? (r->last_token_end_ns - r->first_token_ns) / 1e9 : 0;
	json_object_object_add(j, "type", json_object_new_string("summary"));
	json_object_object_add(j, "stop_reason", json_object_new_string(stop_reason));
	json_object_object_add(j, "total_time_s", json_object_new_double(wall_s));
	json_object_object_add(j, "events", json_object_new_int64((int64_t)session_delivered_total(s)));
	json_object_object_add(j, "dropped", json_object_new_int64((int64_t)event_types_sum(c->dropped)));
	json_object_object_add(j, "tokens_generated", json_object_new_int64((int64_t)r->ntokens));
	json_object_object_add(j, "tokens_per_s",
			       json_object_new_double(tok_span_s > 0 ? r->ntokens / tok_span_s : 0));
	json_object_object_add(j, "requests", json_object_new_int64((int64_t)r->requests.hist.count));
	json_object_object_add(j, "total_operations", json_object_new_int64((int64_t)total_ops));
	json_object_object_add(j, "spans", spans);
	json_object_object_add(j, "kernels", kernels);
	json_object_object_add(j, "token", dist_json(&r->tokens, 0, 0));
	json_object_object_add(j, "request", dist_json(&r->requests, 0, 0));
	json_object_object_add(j, "device_busy_ns", json_object_new_int64((int64_t)r->device_busy_ns));
	json_object_object_add(j, "device_utilization",
			       json_object_new_double(wall_s > 0 ? r->device_busy_ns / 1e9 / wall_s : 0));
	json_object_object_add(j, "success_rate",
			       json_object_new_double(nspans ? 1.0 - (double)r->mismatched / nspans : 1.0));
	json_object_object_add(j, "span_errors", json_object_new_int64((int64_t)c->span_errors));
	json_object_object_add(j, "orphan_ends", json_object_new_int64((int64_t)c->orphan_ends));
	json_object_object_add(j, "stack_overflow", json_object_new_int64((int64_t)c->stack_overflow));
	json_object_object_add(j, "unknown_frees", json_object_new_int64((int64_t)c->unknown_frees));
	json_object_object_add(j, "missed_frees", json_object_new_int64((int64_t)c->missed_frees));
	json_object_object_add(j, "alloc_table_full", json_object_new_int64((int64_t)c->alloc_table_full));
	json_object_object_add(j, "agg_table_full", json_object_new_int64((int64_t)c->agg_table_full));
	json_object_object_add(j, "kernels_truncated", json_object_new_int64((int64_t)c->kernels_truncated));
	json_object_object_add(j, "pools", pools_json(s));
	if (r->o->perf) {
		json_object_object_add(j, "perf_counters", perf_names_json(&r->pc));
		json_object_object_add(j, "perf", profile_counters_json(&r->perf_totals));
		json_object_object_add(j, "counters_invalid", json_object_new_int64((int64_t)c->counters_invalid));
	}
	json_object_object_add(j, "loss", loss_json(s, c));
	return j;
}

static int write_json_file(const char *path, json_object *j, char *err, size_t errlen)
{
	struct outbuf ob;
	const char *text = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);

	if (ob_open(&ob, path, err, errlen))
		return -1;
	ob_put_line(&ob, text);
	if (ob_close(&ob)) {
		ob_strerror(&ob, err, errlen);
		free(ob.path);
		return -1;
	}
	free(ob.path);
	return 0;
}

/* ---- the run loop ---- */
struct run_state {
	struct launch *l;
	const char *stop_reason;
};

static void status_line(const struct record_opts *o, struct recorder *r, const struct counters *c,
			double secs, const char *final)
{
	if (o->quiet)
		return;
	fprintf(stderr, "spantrace: %.0f events/s, %llu dropped, %.1f tok/s%s%s\n",
		secs > 0 ? r->interval_events / secs : 0.0, (unsigned long long)event_types_sum(c->dropped),
		secs > 0 ? r->interval_tokens / secs : 0.0, final ? ", " : "", final ? final : "");
}

static int tick(struct recorder *r, struct session *s, double secs, uint64_t *last_dropped)
{
	struct counters c;
	uint64_t dropped;

	maps_read_counters(s, &c);
	dropped = event_types_sum(c.dropped);
	status_line(r->o, r, &c, secs, NULL);
	if (write_metrics(r, secs, &c))
		return -1;
	if (dropped != *last_dropped && write_drops(r, s, &c))
		return -1;
	*last_dropped = dropped;
	r->interval_events = r->interval_tokens = 0;
	if (r->have_jsonl && ob_flush(&r->jsonl))
		r->failed = &r->jsonl;
	return r->failed ? -1 : 0;
}

static void run_loop(struct recorder *r, struct session *s, struct run_state *rs, uint64_t start)
{
	uint64_t last_tick = start, last_dropped = 0;
	uint64_t deadline = r->o->duration_s > 0 ? start + (uint64_t)(r->o->duration_s * 1e9) : 0;

	while (!rs->stop_reason) {
		int rc = session_poll(s, POLL_MS);
		uint64_t now = mono_now_ns();

		if (rc < 0) {
			rs->stop_reason = r->failed ? "write error" : "ring buffer error";
			break;
		}
		if (session_stop_requested)
			rs->stop_reason = "interrupted";
		else if (deadline && now >= deadline)
			rs->stop_reason = "duration reached";
		else if (launch_target_gone(rs->l))
			rs->stop_reason = "target exited";
		if (now - last_tick >= 1000000000ull) {
			if (tick(r, s, (now - last_tick) / 1e9, &last_dropped)) {
				rs->stop_reason = "write error";
				break;
			}
			last_tick = now;
		}
	}
}

/* ---- option parsing ---- */
static const char record_doc[] =
	"Trace the `infer` USDT probes of one process, a command, or every process of a binary.\n"
	"\n"
	"Exactly one target: -p PID, --binary PATH, or -- CMD [ARGS...].\n"
	"Without -o the JSONL stream goes to stdout. The status line goes to stderr once a second.\n"
	"\v"
	"EXAMPLES:\n"
	"  spantrace record -o run.jsonl -- build/infer model.bin --ids -n 64 -b cpu\n"
	"        start the engine under the tracer; no probe is missed\n"
	"  spantrace record -p 1234 --duration 10 --summary s.json -o -\n"
	"        attach to a running engine for ten seconds\n"
	"  spantrace record --binary build/infer --level coarse -o t.jsonl\n"
	"        every engine process started from now on, coarse spans only\n"
	"  spantrace record --csv spans.csv --summary s.json -- build/infer ...\n"
	"        CSV rows and a summary file besides the JSONL on stdout\n"
	"\n"
	"JSONL record types: session, span, token, request, alloc, free, kv, kernel, drops, summary.\n"
	"Needs CAP_BPF and CAP_PERFMON (or root).";

enum { OPT_CSV = 1000, OPT_SUMMARY, OPT_METRICS, OPT_DURATION, OPT_LEVEL, OPT_RINGBUF, OPT_MIN_DUR,
       OPT_PERF, OPT_CHROME, OPT_MAX_EVENTS };

static const struct argp_option record_options[] = {
	{ "output", 'o', "FILE", 0, "JSONL output (default: stdout; '-' = stdout)", 1 },
	{ "csv", OPT_CSV, "FILE", 0, "CSV, one row per span and kernel", 1 },
	{ "summary", OPT_SUMMARY, "FILE", 0, "Summary JSON at the end", 1 },
	{ "metrics", OPT_METRICS, "FILE", 0, "Metric records (JSONL), one per series per second", 1 },
	{ "duration", OPT_DURATION, "SEC", 0, "Stop after SEC seconds", 2 },
	{ "level", OPT_LEVEL, "LEVEL", 0, "coarse (request/token/forward/layer, memory) or detail (default)", 2 },
	{ "ringbuf-kb", OPT_RINGBUF, "KB", 0, "Ring buffer size in KiB (default 2048, rounded up to 2^n pages)", 2 },
	{ "min-dur-ns", OPT_MIN_DUR, "NS", 0, "Stream only spans at least this long (all are counted)", 2 },
	{ "perf", OPT_PERF, NULL, 0, "Per-span perf counter deltas (" PERFEV_DEFAULT_EVENTS ") in span records and the summary", 1 },
	{ "chrome", OPT_CHROME, "FILE", 0, "Chrome trace (ui.perfetto.dev) of the run as well", 1 },
	{ "max-events", OPT_MAX_EVENTS, "N", 0, "At most N events in the Chrome trace (default 1000000)", 1 },
	{ "quiet", 'q', NULL, 0, "No status line", 3 },
	{ "verbose", 'v', NULL, 0, "More logging (twice: libbpf debug)", 3 },
	{ 0 },
};

static error_t record_parse(int key, char *arg, struct argp_state *state)
{
	struct record_opts *o = state->input;
	uint64_t v;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &o->target;
		break;
	case 'o': o->out = arg; break;
	case OPT_CSV: o->csv = arg; break;
	case OPT_SUMMARY: o->summary = arg; break;
	case OPT_METRICS: o->metrics = arg; break;
	case OPT_DURATION:
		if (parse_real_above(arg, 0, DURATION_MAX_S, &o->duration_s))
			argp_error(state, "invalid duration '%s' (seconds > 0)", arg);
		break;
	case OPT_LEVEL:
		if (trace_level_parse(arg, &o->level))
			argp_error(state, "invalid level '%s' (coarse or detail)", arg);
		break;
	case OPT_RINGBUF:
		if (parse_uint(arg, 4, 1u << 20, &v))
			argp_error(state, "invalid --ringbuf-kb '%s' (4..1048576)", arg);
		o->ringbuf_kb = (unsigned)v;
		break;
	case OPT_MIN_DUR:
		if (parse_uint(arg, 0, UINT64_MAX, &o->min_dur_ns))
			argp_error(state, "invalid --min-dur-ns '%s'", arg);
		break;
	case OPT_PERF: o->perf = 1; break;
	case OPT_CHROME: o->chrome = arg; break;
	case OPT_MAX_EVENTS:
		if (parse_uint(arg, 1, UINT64_MAX, &o->chrome_max))
			argp_error(state, "invalid --max-events '%s' (a whole number >= 1)", arg);
		break;
	case 'q': o->quiet = 1; break;
	case 'v': st_verbose++; break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* ---- setup and teardown ---- */
static int open_outputs(struct recorder *r, char *err, size_t errlen)
{
	const struct record_opts *o = r->o;

	if (ob_open(&r->jsonl, o->out ? o->out : "-", err, errlen))
		return -1;
	r->have_jsonl = 1;
	if (o->csv) {
		if (ob_open(&r->csv, o->csv, err, errlen))
			return -1;
		r->have_csv = 1;
		ob_put_line(&r->csv, CSV_HEADER);
	}
	if (o->metrics) {
		if (ob_open(&r->metrics, o->metrics, err, errlen))
			return -1;
		r->have_metrics = 1;
	}
	if (o->summary) {
		/* Fail now, not after the run, when the summary cannot be written. */
		struct outbuf probe;
		if (ob_open(&probe, o->summary, err, errlen))
			return -1;
		ob_close(&probe);
		free(probe.path);
	}
	if (o->perf) {
		if (perfev_counters_open(&r->pc, NULL, err, errlen))
			return -1;
		profile_counters_init(&r->perf_totals, r->pc.names, r->pc.ncounters);
	}
	if (o->chrome) {
		r->chrome = chrome_open(o->chrome, o->chrome_max, err, errlen);
		if (!r->chrome)
			return -1;
		chrome_set_counter_names(r->chrome, r->pc.names, r->pc.ncounters);
		chrome_set_device_offset(r->chrome, chrome_measure_raw_offset());
	}
	return 0;
}

static int recorder_init(struct recorder *r, const struct record_opts *o)
{
	memset(r, 0, sizeof(*r));
	r->o = o;
	export_clock_init(&r->clk);
	for (int k = 0; k < SPAN_KIND_COUNT; k++)
		if (dist_init(&r->spans[k], DIST_DEFAULT_CAP))
			return -1;
	for (int k = 0; k < KERNEL_COUNT; k++)
		if (dist_init(&r->kernels[k], DIST_DEFAULT_CAP))
			return -1;
	if (dist_init(&r->tokens, DIST_DEFAULT_CAP) || dist_init(&r->requests, DIST_DEFAULT_CAP))
		return -1;
	return 0;
}

static void recorder_free(struct recorder *r)
{
	for (int k = 0; k < SPAN_KIND_COUNT; k++)
		dist_free(&r->spans[k]);
	for (int k = 0; k < KERNEL_COUNT; k++)
		dist_free(&r->kernels[k]);
	dist_free(&r->tokens);
	dist_free(&r->requests);
	for (size_t i = 0; i < r->npids; i++)
		free(r->pids[i]);
	struct outbuf *obs[] = { &r->jsonl, &r->csv, &r->metrics };
	for (int i = 0; i < 3; i++) {
		ob_close(obs[i]);
		free(obs[i]->path);
		obs[i]->path = NULL;
	}
	if (r->chrome)
		chrome_close(r->chrome, NULL, 0);
	perfev_counters_close(&r->pc);
}

/* Pushes every buffered line to its file, so that a disk that fills only
 * at the end still decides the summary's stop_reason. */
static void flush_outputs(struct recorder *r)
{
	struct outbuf *obs[] = { &r->jsonl, &r->csv, &r->metrics };
	for (int i = 0; i < 3 && !r->failed; i++)
		if (obs[i]->buf && ob_flush(obs[i]))
			r->failed = obs[i];
}

/* Writes the end records; returns 0 or -1 with the reason in err. */
static int finish(struct recorder *r, struct session *s, const struct counters *c, double wall_s,
		  const char *reason, char *err, size_t errlen)
{
	json_object *sum;
	int rc = 0;

	if (!r->failed) {
		write_drops(r, s, c);
		write_metrics(r, wall_s, c);
	}
	flush_outputs(r);
	sum = summary_json(r, s, c, wall_s, r->failed ? "write error" : reason);
	if (!sum) {
		snprintf(err, errlen, "out of memory building the summary");
		return -1;
	}
	if (!r->failed) {
		if (r->have_jsonl && ob_put_line(&r->jsonl, json_object_to_json_string_ext(sum, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)))
			r->failed = &r->jsonl;
	}
	if (r->o->summary && write_json_file(r->o->summary, sum, err, errlen))
		rc = -1;
	json_object_put(sum);
	struct outbuf *obs[] = { &r->jsonl, &r->csv, &r->metrics };
	for (int i = 0; i < 3; i++)
		if (obs[i]->buf && ob_close(obs[i]) && !r->failed)
			r->failed = obs[i];
	if (r->failed) {
		ob_strerror(r->failed, err, errlen);
		rc = -1;
	}
	if (r->chrome) {
		char cerr[256];
		if ((chrome_close(r->chrome, cerr, sizeof(cerr)) || r->chrome_failed) && !rc) {
			snprintf(err, errlen, "%s", r->chrome_failed ? "chrome trace: out of memory" : cerr);
			rc = -1;
		}
		r->chrome = NULL;
	}
	return rc;
}

/* The first JSONL line; once it is on disk scripts know the probes are armed. */
static int write_session_line(struct recorder *r, const struct launch *l, const struct session *s,
			      uint64_t start_mono)
{
	uint64_t start_wall = (uint64_t)((int64_t)start_mono + r->clk.mono_to_wall);
	json_object *sj = session_json(r, r->o, l, s, start_mono, start_wall);
	int rc = !sj || ob_put_line(&r->jsonl, json_object_to_json_string_ext(sj, JSON_C_TO_STRING_PLAIN |
									       JSON_C_TO_STRING_NOSLASHESCAPE));

	json_object_put(sj);
	if (rc)
		return -1;
	ob_flush(&r->jsonl);
	return 0;
}

/* "target exited (status N)" for a command that exited by itself. */
static void describe_stop(const struct run_state *rs, char *buf, size_t size)
{
	const struct launch *l = rs->l;

	if (!strcmp(rs->stop_reason, "target exited") && l->mode == LAUNCH_COMMAND && WIFEXITED(l->status))
		snprintf(buf, size, "target exited (status %d)", WEXITSTATUS(l->status));
	else
		snprintf(buf, size, "%s", rs->stop_reason);
}

int cmd_record(int argc, char **argv)
{
	static const struct argp_child children[] = { { &launch_argp, 0, "Target (exactly one):", 0 }, { 0 } };
	static const struct argp argp = { record_options, record_parse, "[-p PID | --binary PATH | -- CMD [ARGS...]]",
					  record_doc, children, NULL, NULL };
	struct record_opts o = { .level = LEVEL_DETAIL };
	struct launch l;
	struct run_state rs = { .l = &l };
	struct recorder r;
	struct session s = { 0 };
	const struct target *t = &l.target;
	struct counters c;
	char err[512], final[128];
	int rc = 1, session_ok = 0;
	uint64_t start_mono;

	err[0] = 0;
	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, &o))
		return 2;
	if (session_check_caps(err, sizeof(err))) {
		st_err("%s", err);
		return 1;
	}
	/* A command is forked now but waits: it runs once the probes are armed. */
	if (launch_start(&l, &o.target, err, sizeof(err))) {
		st_err("%s", err);
		return 1;
	}
	if (recorder_init(&r, &o)) {
		st_err("out of memory");
		recorder_free(&r);
		launch_end(&l);
		return 1;
	}
	if (open_outputs(&r, err, sizeof(err)))
		goto out;
	struct session_opts so = {
		.pid_filter = t->pid > 0 ? (uint32_t)t->pid : 0,
		.level = o.level,
		.min_dur_ns = o.min_dur_ns,
		.stream_mode = STREAM_ALL,
		.ringbuf_kb = o.ringbuf_kb,
		.perf_ncounters = r.pc.ncounters,
		.perf_ncpus = r.pc.ncpus,
	};
	if (session_open(&s, &so, on_event, &r, err, sizeof(err)))
		goto out;
	session_ok = 1;
	if (r.pc.ncounters && perfev_counters_install(&r.pc, maps_perf_counters_fd(&s), err, sizeof(err)))
		goto out;
	/* Before attaching: a slow attach must not swallow a Ctrl-C (and a
	 * background job starts with SIGINT ignored). */
	session_install_signals();
	if (session_attach(&s, t->elf, t->pid > 0 ? t->pid : -1, err, sizeof(err)))
		goto out;
	start_mono = mono_now_ns();
	if (write_session_line(&r, &l, &s, start_mono)) {
		snprintf(err, sizeof(err), "cannot write the session record");
		goto out;
	}
	st_debug("attached to %s (pid %d) in %.3f ms", t->elf, (int)t->pid, s.attach_ns / 1e6);
	/* Probes are armed for the child's pid: let it exec. */
	if (launch_release(&l, err, sizeof(err)))
		st_err("%s", err);
	err[0] = 0;
	run_loop(&r, &s, &rs, start_mono);
	double wall_s = (mono_now_ns() - start_mono) / 1e9;
	/* Nothing may still be producing when the counters are read: a target
	 * that exited produces nothing more, anything else is detached first. */
	if (strcmp(rs.stop_reason, "target exited") || l.mode == LAUNCH_BINARY)
		session_detach(&s);
	if (session_drain(&s) < 0 && !r.failed)
		snprintf(err, sizeof(err), "ring buffer error while draining");
	maps_read_counters(&s, &c);
	/* Interrupted or timed out: the command does not outlive us. */
	launch_end(&l);
	describe_stop(&rs, final, sizeof(final));
	rc = finish(&r, &s, &c, wall_s, final, err, sizeof(err)) ? 1 : 0;
	r.interval_events = 0;
	if (!o.quiet)
		fprintf(stderr, "spantrace: %llu events, %llu dropped (fired %llu), %llu span errors, %s\n",
			(unsigned long long)session_delivered_total(&s), (unsigned long long)event_types_sum(c.dropped),
			(unsigned long long)event_types_sum(c.fired), (unsigned long long)c.span_errors,
			rc ? "stopped: write error" : final);
	if (rc)
		st_err("%s", err);
	err[0] = 0;
out:
	if (err[0] && rc)
		st_err("%s", err);
	/* Never released: the child exits unrun; still running: SIGTERM. */
	launch_end(&l);
	if (session_ok)
		session_close(&s);
	recorder_free(&r);
	return rc;
}
