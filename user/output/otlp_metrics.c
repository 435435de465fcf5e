/* otlp_metrics.c - the daemon's metric set as OTLP metrics (see otlp_metrics.h). */
#include "output/otlp_metrics.h"

#include <json-c/json.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hist.h"
#include "output/otlp.h"

#define AGGREGATION_TEMPORALITY_CUMULATIVE 2

struct mbuild {
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

/* A metric of one type ("histogram", "sum" or "gauge"); its dataPoints array
 * is returned. Sums are monotonic and, like histograms, cumulative. */
static json_object *metric_new(struct mbuild *m, const struct metric_family *f, const char *type)
{
	json_object *mt = json_object_new_object(), *data = json_object_new_object(), *pts = json_object_new_array();

	add(m, mt, "name", json_object_new_string(f->name));
	add(m, mt, "description", json_object_new_string(f->help));
	add(m, mt, "unit", json_object_new_string(f->unit));
	add(m, data, "dataPoints", pts);
	if (strcmp(type, "gauge"))
		add(m, data, "aggregationTemporality", json_object_new_int(AGGREGATION_TEMPORALITY_CUMULATIVE));
	if (!strcmp(type, "sum"))
		add(m, data, "isMonotonic", json_object_new_boolean(1));
	add(m, mt, type, data);
	push(m, m->metrics, mt);
	return m->failed ? NULL : pts;
}

/* Numbers as intValue (layer included: LAYER_NONE is -1), text as
 * stringValue. */
static json_object *point_attrs(struct mbuild *m, const struct metric_point *p)
{
	json_object *attrs = json_object_new_array();
	char num[32];

	for (unsigned i = 0; i < p->nlabels; i++) {
		const struct metric_label *l = &p->labels[i];
		int is_int = l->kind == LABEL_INT || l->kind == LABEL_LAYER;

		attr(m, attrs, l->name, is_int ? NULL : metric_label_text(l, num, sizeof(num)), l->num, is_int);
	}
	return attrs;
}

static json_object *point_new(struct mbuild *m, json_object *pts, const struct metric_point *mp, int cumulative)
{
	json_object *p = json_object_new_object();

	add(m, p, "attributes", point_attrs(m, mp));
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

/* Bounds are the kind's Prometheus `le` edges; OTLP counts are per bucket
 * (the first holds everything up to the first bound, the last the rest). */
static void histogram_point(struct mbuild *m, json_object *pts, const struct metric_point *mp)
{
	const struct metric_hist *h = &mp->h;
	json_object *p = point_new(m, pts, mp, 1);
	json_object *bounds = json_object_new_array(), *counts = json_object_new_array();
	uint64_t cum = 0, below = 0;
	char buf[24];

	for (unsigned k = 0; h->e.lo <= h->e.hi && k <= h->e.hi; k++) {
		cum += h->buckets[k];
		if (k < h->e.lo)
			continue;
		push(m, bounds, json_object_new_double((double)hist_bucket_high(k) / h->unit_div));
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(cum - below));
		push(m, counts, json_object_new_string(buf));
		below = cum;
	}
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(h->count - below));
	push(m, counts, json_object_new_string(buf));
	put_u64(m, p, "count", h->count);
	add(m, p, "sum", json_object_new_double((double)h->sum / h->unit_div));
	if (h->count)
		add(m, p, "max", json_object_new_double((double)h->max / h->unit_div));
	add(m, p, "bucketCounts", counts);
	add(m, p, "explicitBounds", bounds);
}

/* Counters are monotonic cumulative sums, gauges gauges; a family with no
 * points is left out. */
static void family(struct mbuild *m, const struct metric_family *f)
{
	static const char *const types[] = {
		[METRIC_GAUGE] = "gauge", [METRIC_COUNTER] = "sum", [METRIC_HISTOGRAM] = "histogram",
	};
	json_object *pts;

	if (!f->npoints || !(pts = metric_new(m, f, types[f->type])))
		return;
	for (size_t i = 0; i < f->npoints; i++) {
		const struct metric_point *mp = &f->points[i];
		json_object *p;

		if (f->type == METRIC_HISTOGRAM) {
			histogram_point(m, pts, mp);
		} else if ((p = point_new(m, pts, mp, f->type == METRIC_COUNTER))) {
			if (mp->is_double)
				add(m, p, "asDouble", json_object_new_double(mp->d));
			else
				put_u64(m, p, "asInt", mp->u);
		}
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

char *otlp_metrics_body(const struct metrics_snapshot *s, uint64_t start_ns, uint64_t now_ns, const char *host,
			uint64_t *npoints)
{
	struct mbuild m = { .metrics = json_object_new_array() };
	struct metric_set set;
	json_object *req;
	const char *text;
	char *body;

	snprintf(m.start, sizeof(m.start), "%llu", (unsigned long long)start_ns);
	snprintf(m.now, sizeof(m.now), "%llu", (unsigned long long)now_ns);
	*npoints = 0;
	if (metric_set_build(s, &set)) {
		json_object_put(m.metrics);
		return NULL;
	}
	for (size_t f = 0; f < set.n; f++)
		family(&m, &set.families[f]);
	metric_set_free(&set);
	m.failed |= !m.metrics;
	req = request_json(&m, host);
	text = m.failed ? NULL : json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	body = text ? strdup(text) : NULL;   /* NULL: the caller counts the points as dropped */
	json_object_put(req);
	*npoints = m.points;
	return body;
}
