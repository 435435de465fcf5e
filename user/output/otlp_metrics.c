/* otlp_metrics.c - the daemon's snapshot as OTLP metrics (see otlp_metrics.h). */
#include "output/otlp_metrics.h"

#include <json-c/json.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hist.h"
#include "output/otlp.h"
#include "spantrace/probes.h"

#define AGGREGATION_TEMPORALITY_CUMULATIVE 2

struct mbuild {
	const struct prom_snapshot *s;
	char start[24], now[24];
	json_object *metrics;
	uint64_t points;
	int failed;   /* an allocation failed: the body is dropped, and from then on
		       * the builders return NULL (so nothing freed is used) */
};

static void add(struct mbuild *m, json_object *o, const char *key, json_object *v)
{
	otlp_json_add(&m->failed, o, key, v);
}

static void push(struct mbuild *m, json_object *a, json_object *v)
{
	otlp_json_push(&m->failed, a, v);
}

static void attr(struct mbuild *m, json_object *attrs, const char *key, const char *sval, int64_t ival,
		 int is_int)
{
	json_object *a = json_object_new_object(), *v = json_object_new_object();
	char buf[24];

	if (is_int) {
		snprintf(buf, sizeof(buf), "%lld", (long long)ival);
		add(m, v, "intValue", json_object_new_string(buf));
	} else {
		add(m, v, "stringValue", json_object_new_string(sval));
	}
	add(m, a, "key", json_object_new_string(key));
	add(m, a, "value", v);
	push(m, attrs, a);
}

static json_object *proc_attrs(struct mbuild *m, uint32_t pid)
{
	json_object *attrs = json_object_new_array();

	attr(m, attrs, "pid", NULL, pid, 1);
	attr(m, attrs, "binary", m->s->binary ? m->s->binary : "", 0, 0);
	if (m->s->engine)
		attr(m, attrs, "engine", m->s->engine, 0, 0);
	return attrs;
}

/* A metric of one type ("histogram", "sum" or "gauge"); its dataPoints array
 * is returned. Sums are monotonic and, like histograms, cumulative. */
static json_object *metric_new(struct mbuild *m, const char *name, const char *help, const char *unit,
			       const char *type)
{
	json_object *mt = json_object_new_object(), *data = json_object_new_object(), *pts = json_object_new_array();

	add(m, mt, "name", json_object_new_string(name));
	add(m, mt, "description", json_object_new_string(help));
	add(m, mt, "unit", json_object_new_string(unit));
	add(m, data, "dataPoints", pts);
	if (strcmp(type, "gauge"))
		add(m, data, "aggregationTemporality", json_object_new_int(AGGREGATION_TEMPORALITY_CUMULATIVE));
	if (!strcmp(type, "sum"))
		add(m, data, "isMonotonic", json_object_new_boolean(1));
	add(m, mt, type, data);
	push(m, m->metrics, mt);
	return m->failed ? NULL : pts;
}

static json_object *point_new(struct mbuild *m, json_object *pts, json_object *attrs, int cumulative)
{
	json_object *p = json_object_new_object();

	add(m, p, "attributes", attrs);
	if (cumulative)
		add(m, p, "startTimeUnixNano", json_object_new_string(m->start));
	add(m, p, "timeUnixNano", json_object_new_string(m->now));
	push(m, pts, p);
	m->points++;
	return m->failed ? NULL : p;
}

static void put_u64(struct mbuild *m, json_object *o, const char *key, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	add(m, o, key, json_object_new_string(buf));
}

/* ---- histograms ---- */

static json_object *agg_attrs(struct mbuild *m, const struct prom_agg *a)
{
	json_object *attrs = proc_attrs(m, a->pid);

	if (a->kind < SPAN_KINDS)   /* the engine's kinds, and --span ones */
		attr(m, attrs, "span", span_kind_name(a->kind), 0, 0);
	else if (a->kind >= AGG_KIND_DEVICE_BASE && a->kind < AGG_KIND_DEVICE_BASE + SPAN_KIND_COUNT)
		attr(m, attrs, "span", span_kind_name(a->kind - AGG_KIND_DEVICE_BASE), 0, 0);
	else if (a->kind >= AGG_KIND_KERNEL_BASE && a->kind < AGG_KIND_KERNEL_BASE + KERNEL_COUNT)
		attr(m, attrs, "kernel", cl_kernel_name(a->kind - AGG_KIND_KERNEL_BASE), 0, 0);
	if (a->kind < SPAN_KINDS || a->kind >= AGG_KIND_KERNEL_BASE)
		attr(m, attrs, "layer", NULL, a->layer, 1);
	return attrs;
}

/* Bounds are the kind's Prometheus `le` edges; OTLP counts are per bucket
 * (the first holds everything up to the first bound, the last the rest). */
static void histogram_point(struct mbuild *m, json_object *pts, const struct histogram_family *f,
			    const struct prom_agg *a, const struct edges *e)
{
	json_object *p = point_new(m, pts, agg_attrs(m, a), 1);
	json_object *bounds = json_object_new_array(), *counts = json_object_new_array();
	double unit = f->count ? 1.0 : 1e9;
	uint64_t cum = 0, total = 0, below = 0;
	char buf[24];

	for (unsigned k = 0; k < HIST_BUCKETS; k++)
		total += a->buckets[k];
	for (unsigned k = 0; e->lo <= e->hi && k <= e->hi; k++) {
		cum += a->buckets[k];
		if (k < e->lo)
			continue;
		push(m, bounds, json_object_new_double((double)hist_bucket_high(k) / unit));
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(cum - below));
		push(m, counts, json_object_new_string(buf));
		below = cum;
	}
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(total - below));
	push(m, counts, json_object_new_string(buf));
	put_u64(m, p, "count", total);
	add(m, p, "sum", json_object_new_double((double)a->sum_ns / unit));
	if (total)
		add(m, p, "max", json_object_new_double((double)a->max_ns / unit));
	add(m, p, "bucketCounts", counts);
	add(m, p, "explicitBounds", bounds);
}

static void histograms(struct mbuild *m)
{
	static const struct edges none = { 1, 0 };
	struct edges e[KIND_SLOTS];
	size_t nf;
	const struct histogram_family *f = prom_histogram_families(&nf);

	prom_kind_edges(m->s, e);
	for (size_t i = 0; i < nf; i++) {
		json_object *pts = NULL;
		for (size_t r = 0; r < m->s->naggs; r++) {
			const struct prom_agg *a = &m->s->aggs[r];
			if (a->kind < f[i].lo || a->kind > f[i].hi)
				continue;
			if (!pts)
				pts = metric_new(m, f[i].name, f[i].help, f[i].count ? "{token}" : "s", "histogram");
			histogram_point(m, pts, &f[i], a, a->kind < KIND_SLOTS ? &e[a->kind] : &none);
		}
	}
}

/* ---- counters and gauges ---- */

static void int_point(struct mbuild *m, json_object *pts, json_object *attrs, uint64_t v, int cumulative)
{
	put_u64(m, point_new(m, pts, attrs, cumulative), "asInt", v);
}

/* tokens and requests: the token and request histograms' counts, as sums
 * for rate() in backends that take counters. */
static void kind_counter(struct mbuild *m, uint32_t kind, const char *name, const char *help, const char *unit)
{
	json_object *pts = metric_new(m, name, help, unit, "sum");

	for (size_t r = 0; r < m->s->naggs; r++) {
		const struct prom_agg *a = &m->s->aggs[r];
		uint64_t total = 0;
		if (a->kind != kind)
			continue;
		for (unsigned k = 0; k < HIST_BUCKETS; k++)
			total += a->buckets[k];
		int_point(m, pts, proc_attrs(m, a->pid), total, 1);
	}
}

static void pools(struct mbuild *m)
{
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} fields[] = {
		{ "spantrace_pool_live_bytes", "gauge", "Bytes allocated in the pool.", offsetof(struct prom_pool, live_bytes) },
		{ "spantrace_pool_peak_bytes", "gauge", "Peak bytes allocated in the pool.", offsetof(struct prom_pool, peak_bytes) },
		{ "spantrace_pool_reserved_bytes", "gauge", "Bytes the pool's live allocations hold from the system.",
		  offsetof(struct prom_pool, reserved_bytes) },
		{ "spantrace_pool_allocs_total", "sum", "Allocations seen in the pool.", offsetof(struct prom_pool, allocs) },
		{ "spantrace_pool_frees_total", "sum", "Frees seen in the pool.", offsetof(struct prom_pool, frees) },
	};

	for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
		int sum = !strcmp(fields[f].type, "sum");
		json_object *pts = metric_new(m, fields[f].name, fields[f].help, sum ? "1" : "By", fields[f].type);
		for (size_t i = 0; i < m->s->npools; i++) {
			const struct prom_pool *p = &m->s->pools[i];
			json_object *attrs = proc_attrs(m, p->pid);
			uint64_t v;
			attr(m, attrs, "pool", pool_name(p->pool), 0, 0);
			memcpy(&v, (const char *)p + fields[f].off, sizeof(v));
			int_point(m, pts, attrs, v, sum);
		}
	}
}

static void gauges(struct mbuild *m)
{
	json_object *used = metric_new(m, "spantrace_kv_cache_used_bytes", "KV cache bytes in use.", "By", "gauge");
	json_object *cap = metric_new(m, "spantrace_kv_cache_capacity_bytes", "KV cache capacity.", "By", "gauge");
	json_object *tps = metric_new(m, "spantrace_tokens_per_second", "Tokens per second over the last interval.",
				      "{token}/s", "gauge");

	for (size_t i = 0; i < m->s->nkvs; i++) {
		int_point(m, used, proc_attrs(m, m->s->kvs[i].pid), m->s->kvs[i].used_bytes, 0);
		int_point(m, cap, proc_attrs(m, m->s->kvs[i].pid), m->s->kvs[i].capacity_bytes, 0);
	}
	for (size_t i = 0; i < m->s->nprocs; i++) {
		json_object *p = point_new(m, tps, proc_attrs(m, m->s->procs[i].pid), 0);
		add(m, p, "asDouble", json_object_new_double(m->s->procs[i].tokens_per_second));
	}
}

/* Loss: fired, delivered and dropped events, all types together. */
static void losses(struct mbuild *m)
{
	static const char *const names[3] = { "spantrace_events_fired_total", "spantrace_events_delivered_total",
					      "spantrace_events_dropped_total" };
	const __u64 *per_type[3] = { m->s->counters.fired, m->s->ringbuf_delivered, m->s->counters.dropped };

	for (int i = 0; i < 3; i++) {
		uint64_t total = 0;
		for (unsigned t = 0; t < EV_TYPE_COUNT; t++)
			total += per_type[i][t];
		json_object *pts = metric_new(m, names[i], "Events of the BPF programs (fired = delivered + dropped).",
					      "1", "sum");
		int_point(m, pts, json_object_new_array(), total, 1);
	}
}

static json_object *request_json(struct mbuild *m, const char *host)
{
	json_object *req = json_object_new_object(), *rms = json_object_new_array(), *rm = json_object_new_object(),
		    *res = json_object_new_object(), *attrs = json_object_new_array(),
		    *sms = json_object_new_array(), *sm = json_object_new_object(), *scope = json_object_new_object();

	attr(m, attrs, "service.name", "spantrace", 0, 0);
	attr(m, attrs, "host.name", host, 0, 0);
	add(m, res, "attributes", attrs);
	add(m, rm, "resource", res);
	add(m, scope, "name", json_object_new_string("spantrace"));
	add(m, sm, "scope", scope);
	add(m, sm, "metrics", m->metrics);   /* the metrics go with req from here */
	push(m, sms, sm);
	add(m, rm, "scopeMetrics", sms);
	push(m, rms, rm);
	add(m, req, "resourceMetrics", rms);
	return req;
}

char *otlp_metrics_body(const struct prom_snapshot *s, uint64_t start_ns, uint64_t now_ns, const char *host,
			uint64_t *npoints)
{
	struct mbuild m = { .s = s, .metrics = json_object_new_array() };
	json_object *req;
	const char *text;
	char *body;

	snprintf(m.start, sizeof(m.start), "%llu", (unsigned long long)start_ns);
	snprintf(m.now, sizeof(m.now), "%llu", (unsigned long long)now_ns);
	histograms(&m);
	kind_counter(&m, AGG_KIND_TOKEN, "spantrace_tokens_total", "Tokens generated.", "{token}");
	kind_counter(&m, AGG_KIND_REQUEST, "spantrace_requests_total", "Requests finished.", "{request}");
	pools(&m);
	gauges(&m);
	losses(&m);
	m.failed |= !m.metrics;
	req = request_json(&m, host);
	text = m.failed ? NULL : json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	body = text ? strdup(text) : NULL;   /* NULL: the caller counts the points as dropped */
	json_object_put(req);
	*npoints = m.points;
	return body;
}
