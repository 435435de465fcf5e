/* summary.c - the session and summary records (see summary.h). */
#include "output/summary.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include "analysis/rssattr.h"
#include "core/engines.h"
#include "core/maps.h"
#include "core/options.h"

#define JSON_PLAIN (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
#define JSON_PRETTY (JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE)

static void add_u64(json_object *j, const char *key, uint64_t v)
{
	json_object_object_add(j, key, json_object_new_int64((int64_t)v));
}

json_object *summary_perf_names_json(const struct perf_counters *pc)
{
	json_object *a = json_object_new_array();

	for (unsigned i = 0; a && i < pc->ncounters; i++)
		json_object_array_add(a, json_object_new_string(pc->names[i]));
	return a;
}

static json_object *strings_json(char *const *argv)
{
	json_object *a = json_object_new_array();

	for (char *const *p = argv; a && *p; p++)
		json_object_array_add(a, json_object_new_string(*p));
	return a;
}

json_object *summary_session_json(const struct session_info *si, const struct session *s)
{
	const struct target *t = &si->l->target;
	json_object *j = json_object_new_object(), *pids = json_object_new_array();
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
	json_object_object_add(j, "mode", json_object_new_string(launch_mode_name(si->l->mode)));
	json_object_object_add(j, "binary", json_object_new_string(t->shown));
	json_object_object_add(j, "build_id", json_object_new_string(t->build_id));
	/* which engine: ours, llama.cpp (binary is then its library or
	 * executable), or, for a command, "pending" until it loads one */
	json_object_object_add(j, "engine", json_object_new_string(t->engine ? engine_name(t->engine)
							  : t->pending ? "pending" : "none"));
	if (s->engine)
		json_object_object_add(j, "engine_functions", summary_engine_json(s));
	if (si->command)
		json_object_object_add(j, "command", strings_json(si->command));
	json_object_object_add(j, "level", json_object_new_string(trace_level_name(si->level)));
	/* whether token ids (content) are in this output (core/events.h) */
	json_object_object_add(j, "capture_tokens", json_object_new_boolean(events_capture_tokens()));
	add_u64(j, "start_wall_ns", si->start_wall_ns);
	add_u64(j, "start_mono_ns", si->start_mono_ns);
	add_u64(j, "ringbuf_bytes", s->ringbuf_bytes);
	add_u64(j, "min_dur_ns", si->min_dur_ns);
	add_u64(j, "attach_ns", s->attach_ns);
	if (si->perf)
		json_object_object_add(j, "perf_counters", summary_perf_names_json(si->perf));
	return j;
}

/* "a,b" as a JSON array of strings. */
static json_object *names_json(const char *list)
{
	json_object *a = json_object_new_array();
	char buf[1024];

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); a && tok; tok = strtok_r(NULL, ",", &save))
		json_object_array_add(a, json_object_new_string(tok));
	return a;
}

json_object *summary_engine_json(const struct session *s)
{
	json_object *j = json_object_new_object();

	if (!j)
		return NULL;
	json_object_object_add(j, "engine", json_object_new_string(engine_name(s->engine)));
	json_object_object_add(j, "path", json_object_new_string(s->engine_lib));
	json_object_object_add(j, "build_id", json_object_new_string(s->engine_build_id));
	add_u64(j, "attached", s->engine_fns);
	json_object_object_add(j, "functions", names_json(s->engine_found));
	json_object_object_add(j, "missing", names_json(s->engine_missing));
	return j;
}

static json_object *dist_json(struct dist *d, const uint64_t *count_in_kernel)
{
	json_object *j = json_object_new_object();
	uint64_t n = d->hist.count;

	if (!j)
		return NULL;
	add_u64(j, "count", n);
	if (count_in_kernel)
		add_u64(j, "count_in_kernel", *count_in_kernel);
	add_u64(j, "total_ns", d->hist.sum);
	json_object_object_add(j, "avg_ns", json_object_new_double(n ? (double)d->hist.sum / n : 0));
	add_u64(j, "p50_ns", dist_quantile(d, 0.50));
	add_u64(j, "p95_ns", dist_quantile(d, 0.95));
	add_u64(j, "p99_ns", dist_quantile(d, 0.99));
	add_u64(j, "max_ns", d->hist.max);
	json_object_object_add(j, "exact", json_object_new_boolean(dist_is_exact(d)));
	return j;
}

/* A span kind: its host durations (the *_ns keys, clock "host") and, for
 * spans that launched kernels, "device": their device time (clock
 * "device"), with "lost": spans whose kernel records were lost. */
static json_object *span_json(struct runstats *r, int k, uint64_t in_kernel)
{
	json_object *j = dist_json(&r->spans[k], &in_kernel), *d;

	if (!j)
		return NULL;
	json_object_object_add(j, "clock", json_object_new_string("host"));
	if (k >= SPAN_KIND_COUNT || (!r->device[k].hist.count && !r->device_lost[k]))
		return j;
	d = dist_json(&r->device[k], NULL);
	if (d) {
		json_object_object_add(d, "clock", json_object_new_string("device"));
		add_u64(d, "lost", r->device_lost[k]);
	}
	json_object_object_add(j, "device", d);
	return j;
}

static int count_span_kind(void *ctx, const struct agg_key *k, const struct agg_val *v)
{
	if (k->kind < SPAN_KINDS)
		((uint64_t *)ctx)[k->kind] += v->count;
	return 0;
}

/* Per span name: streamed spans, and the kernel's count of every span (also
 * those below --min-dur-ns or lost to drops). */
static json_object *spans_json(struct runstats *r, const struct session *s)
{
	json_object *j = json_object_new_object();
	uint64_t in_kernel[SPAN_KINDS] = { 0 };

	maps_foreach_agg(s, count_span_kind, in_kernel);
	for (int k = 0; j && k < SPAN_KINDS; k++)
		if (r->spans[k].hist.count || in_kernel[k])
			json_object_object_add(j, span_kind_name(k), span_json(r, k, in_kernel[k]));
	return j;
}

static json_object *kernels_json(struct runstats *r)
{
	json_object *j = json_object_new_object();

	for (int k = 0; j && k < KERNEL_COUNT; k++)
		if (r->kernels[k].hist.count)
			json_object_object_add(j, cl_kernel_name(k), dist_json(&r->kernels[k], NULL));
	return j;
}

static int pool_entry(void *ctx, const struct pool_key *k, const struct pool_val *v)
{
	json_object *j = ctx, *per_pid, *pj = json_object_new_object();
	char pidbuf[16];

	snprintf(pidbuf, sizeof(pidbuf), "%u", k->pid);
	if (!json_object_object_get_ex(j, pidbuf, &per_pid)) {
		per_pid = json_object_new_object();
		json_object_object_add(j, pidbuf, per_pid);
	}
	add_u64(pj, "live_bytes", v->live_bytes);
	add_u64(pj, "peak_bytes", v->peak_bytes);
	add_u64(pj, "reserved_bytes", v->reserved_bytes);
	add_u64(pj, "peak_reserved_bytes", v->peak_reserved_bytes);
	add_u64(pj, "allocs", v->allocs);
	add_u64(pj, "frees", v->frees);
	json_object_object_add(per_pid, pool_name(k->pool), pj);
	return 0;
}

/* Per pid: its pools' reserved bytes, summed into a RSS split. */
struct rss_acc {
	uint32_t pid[64];
	uint64_t reserved[64][POOL_COUNT];
	size_t n;
};

static int rss_pool_entry(void *ctx, const struct pool_key *k, const struct pool_val *v)
{
	struct rss_acc *a = ctx;
	size_t i = 0;

	while (i < a->n && a->pid[i] != k->pid)
		i++;
	if (i == a->n) {
		if (a->n == 64 || k->pool >= POOL_COUNT)
			return 0;
		a->pid[a->n++] = k->pid;
	}
	if (k->pool < POOL_COUNT)
		a->reserved[i][k->pool] = v->reserved_bytes;
	return 0;
}

/* {"PID": {"rss_bytes", "pools_bytes", "other_bytes"}} for the traced
 * processes still running (analysis/rssattr.h). */
static json_object *rss_json(const struct session *s)
{
	json_object *j = json_object_new_object();
	struct rss_acc *a = calloc(1, sizeof(*a));

	if (j && a && !maps_foreach_pool(s, rss_pool_entry, a))
		for (size_t i = 0; i < a->n; i++) {
			struct rss_split sp;
			json_object *pj;
			char pidbuf[16];
			if (rss_split_read((pid_t)a->pid[i], a->reserved[i], &sp) || !(pj = json_object_new_object()))
				continue;
			add_u64(pj, "rss_bytes", sp.rss);
			add_u64(pj, "pools_bytes", sp.pools);
			add_u64(pj, "other_bytes", sp.other);
			snprintf(pidbuf, sizeof(pidbuf), "%u", a->pid[i]);
			json_object_object_add(j, pidbuf, pj);
		}
	free(a);
	return j;
}

static json_object *pools_json(const struct session *s)
{
	json_object *j = json_object_new_object();

	if (j)
		maps_foreach_pool(s, pool_entry, j);
	return j;
}

json_object *summary_loss_json(const struct session *s, const struct counters *c)
{
	json_object *j = json_object_new_object(), *by = json_object_new_object();
	uint64_t fired = event_types_sum(c->fired), dropped = event_types_sum(c->dropped);
	uint64_t delivered = session_delivered_total(s);

	if (!j || !by) {
		json_object_put(j);
		json_object_put(by);
		return NULL;
	}
	add_u64(j, "fired", fired);
	add_u64(j, "delivered", delivered);
	add_u64(j, "dropped", dropped);
	add_u64(j, "invalid", session_invalid_total(s));
	for (int t = 1; t < EV_TYPE_COUNT; t++) {
		json_object *tj = json_object_new_object();
		add_u64(tj, "fired", c->fired[t]);
		add_u64(tj, "delivered", s->delivered[t]);
		add_u64(tj, "dropped", c->dropped[t]);
		json_object_object_add(by, event_type_name(t), tj);
	}
	json_object_object_add(j, "by_type", by);
	json_object_object_add(j, "balanced", json_object_new_boolean(delivered + dropped == fired));
	add_u64(j, "span_errors", c->span_errors);
	add_u64(j, "orphan_ends", c->orphan_ends);
	add_u64(j, "counters_invalid", c->counters_invalid);
	return j;
}

/* Whose clock the headline's request figures (ttft, e2e, request) are
 * on: the socket's (joined requests), the engine's, or both (requests
 * that did not come over HTTP beside joined ones); "none" without any.
 * Served requests not joined are never in it (runstats.h). */
static const char *headline_from(const struct runstats *r)
{
	uint64_t n = r->requests.hist.count, engine = r->headline_from_engine;

	return !n ? "none" : !engine ? "socket" : engine == n ? "engine" : "socket and engine";
}

/* The request-level distributions and goodput: the share of requests that
 * met every SLO set (all of them when none is). */
static void requests_json(json_object *j, struct runstats *r)
{
	json_object *g = json_object_new_object();
	uint64_t n = r->requests.hist.count;

	json_object_object_add(j, "ttft", dist_json(&r->ttft, NULL));
	json_object_object_add(j, "itl", dist_json(&r->itl, NULL));
	json_object_object_add(j, "e2e", dist_json(&r->requests, NULL));
	json_object_object_add(j, "queue_time", dist_json(&r->queue, NULL));
	json_object_object_add(j, "prefill_time", dist_json(&r->prefill, NULL));
	json_object_object_add(j, "decode_time", dist_json(&r->decode, NULL));
	json_object_object_add(j, "step", dist_json(&r->steps, NULL));
	json_object_object_add(j, "step_tokens", dist_json(&r->step_tokens, NULL));
	add_u64(j, "preemptions", r->preemptions);
	add_u64(j, "prefix_cache_hits", r->prefix_hits);
	add_u64(j, "prefix_cached_tokens", r->prefix_cached_tokens);
	json_object_object_add(g, "slo_ttft_ms", json_object_new_double(r->slo.ttft_ns / 1e6));
	json_object_object_add(g, "slo_itl_ms", json_object_new_double(r->slo.itl_ns / 1e6));
	add_u64(g, "requests", n);
	add_u64(g, "met", r->slo_met);
	json_object_object_add(g, "share", json_object_new_double(n ? (double)r->slo_met / n : 0));
	json_object_object_add(j, "goodput", g);
}

/* The kernel's error and table counters, at the summary's top level. */
static void error_counters(json_object *j, const struct counters *c)
{
	add_u64(j, "span_errors", c->span_errors);
	add_u64(j, "orphan_ends", c->orphan_ends);
	add_u64(j, "stack_overflow", c->stack_overflow);
	add_u64(j, "unknown_frees", c->unknown_frees);
	add_u64(j, "missed_frees", c->missed_frees);
	add_u64(j, "alloc_table_full", c->alloc_table_full);
	add_u64(j, "agg_table_full", c->agg_table_full);
	add_u64(j, "kernels_truncated", c->kernels_truncated);
	add_u64(j, "req_table_full", c->req_table_full);
	add_u64(j, "cl_table_full", c->cl_table_full);
	add_u64(j, "req_orphans", c->req_orphans);
}

/* Engine requests by their join with the socket: joined (the socket's
 * times), not (the engine's alone), and of those, why where known. */
static json_object *engine_links_json(struct runstats *r)
{
	json_object *l = json_object_new_object();

	add_u64(l, "joined", r->req_joined);
	add_u64(l, "not_joined", r->req_engine_only);
	add_u64(l, "twins_unlinked", r->req_twins_unlinked);
	add_u64(l, "crossed", r->req_crossed);
	/* the engine's times of those not joined: kept, never the headline */
	json_object_object_add(l, "not_joined_ttft", dist_json(&r->unjoined_ttft, NULL));
	json_object_object_add(l, "not_joined_e2e", dist_json(&r->unjoined_e2e, NULL));
	return l;
}

/* --http: the socket's requests, and every loss by kind. */
static json_object *http_json(struct runstats *r, const struct counters *c)
{
	json_object *h = json_object_new_object();

	add_u64(h, "requests", r->http_e2e.hist.count);
	add_u64(h, "streams", r->http_streams);
	add_u64(h, "events", r->http_events);
	json_object_object_add(h, "ttft", dist_json(&r->http_ttft, NULL));
	json_object_object_add(h, "e2e", dist_json(&r->http_e2e, NULL));
	add_u64(h, "unparsed_connections", c->http_unparsed);
	add_u64(h, "tls_connections", c->http_tls);
	add_u64(h, "table_full", c->http_table_full);
	add_u64(h, "h2_connections", c->http_h2);
	add_u64(h, "lost_closed", c->http_lost_closed);
	add_u64(h, "lost_pipeline", c->http_lost_pipeline);
	add_u64(h, "lost_boundary", c->http_lost_boundary);
	/* read and not answered when the session stopped: not in requests */
	add_u64(h, "open_at_end", c->http_begun > c->http_done ? c->http_begun - c->http_done : 0);
	json_object_object_add(h, "engine_requests", engine_links_json(r));
	return h;
}

json_object *summary_json(struct runstats *r, const struct session *s, const struct counters *c,
			  double wall_s, const char *stop_reason, const struct perf_counters *pc,
			  const struct profile_counters *perf)
{
	json_object *j = json_object_new_object();
	uint64_t nspans = runstats_spans(r), ops = nspans;

	if (!j)
		return NULL;
	for (int k = 0; k < KERNEL_COUNT; k++)
		ops += r->kernels[k].hist.count;
	json_object_object_add(j, "type", json_object_new_string("summary"));
	json_object_object_add(j, "stop_reason", json_object_new_string(stop_reason));
	json_object_object_add(j, "capture_tokens", json_object_new_boolean(events_capture_tokens()));
	if (s->engine)   /* also for a command that loaded it after the session record */
		json_object_object_add(j, "engine", summary_engine_json(s));
	json_object_object_add(j, "total_time_s", json_object_new_double(wall_s));
	add_u64(j, "events", session_delivered_total(s));
	add_u64(j, "dropped", event_types_sum(c->dropped));
	add_u64(j, "tokens_generated", runstats_tokens_generated(r));
	json_object_object_add(j, "tokens_per_s", json_object_new_double(runstats_tokens_per_s(r)));
	json_object_object_add(j, "tokens_from", json_object_new_string(runstats_tokens_from(r)));
	add_u64(j, "requests", r->requests.hist.count + r->unjoined_e2e.hist.count);
	json_object_object_add(j, "requests_timed_from", json_object_new_string(headline_from(r)));
	add_u64(j, "total_operations", ops);
	json_object_object_add(j, "spans", spans_json(r, s));
	json_object_object_add(j, "kernels", kernels_json(r));
	json_object_object_add(j, "token", dist_json(&r->tokens, NULL));
	json_object_object_add(j, "request", dist_json(&r->requests, NULL));
	requests_json(j, r);
	if (r->http_e2e.hist.count || s->http)   /* --http: the socket's view, losses even alone */
		json_object_object_add(j, "http", http_json(r, c));
	add_u64(j, "device_busy_ns", r->device_busy_ns);
	json_object_object_add(j, "device_utilization", json_object_new_double(runstats_device_utilization(r)));
	add_u64(j, "device_utilization_wall_ns",
		r->last_span_end_ns > r->first_span_ns ? r->last_span_end_ns - r->first_span_ns : 0);
	json_object_object_add(j, "success_rate",
			       json_object_new_double(nspans ? 1.0 - (double)r->mismatched / nspans : 1.0));
	error_counters(j, c);
	json_object_object_add(j, "pools", pools_json(s));
	json_object_object_add(j, "rss", rss_json(s));
	if (pc && perf) {
		json_object_object_add(j, "perf_counters", summary_perf_names_json(pc));
		json_object_object_add(j, "perf", profile_counters_json(perf));
		add_u64(j, "counters_invalid", c->counters_invalid);
	}
	json_object_object_add(j, "loss", summary_loss_json(s, c));
	return j;
}

int json_put_line(struct outbuf *ob, json_object *j)
{
	return j ? ob_put_line(ob, json_object_to_json_string_ext(j, JSON_PLAIN)) : -1;
}

int json_write_file(const char *path, json_object *j, char *err, size_t errlen)
{
	struct outbuf ob;
	int rc = 0;

	if (!j) {
		snprintf(err, errlen, "out of memory building %s", path);
		return -1;
	}
	if (ob_open(&ob, path, err, errlen))
		return -1;
	ob_put_line(&ob, json_object_to_json_string_ext(j, JSON_PRETTY));
	if (ob_close(&ob)) {
		ob_strerror(&ob, err, errlen);
		rc = -1;
	}
	free(ob.path);
	return rc;
}
