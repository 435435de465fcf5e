/* metricset.c - the daemon's snapshot as families of points (see
 * metricset.h). Every family, help string and label is decided here once;
 * the exporters only write them out. Points follow (pid, kind, layer)
 * order, so two renders of the same data are identical. */
#include "output/metricset.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/events.h"
#include "core/grow.h"

/* ---- building: families, points, labels ---- */

/* A new family; points go to the last one made. */
static void family(struct metric_set *m, const char *name, const char *type_unit_help[3],
		   enum metric_type type)
{
	struct metric_family *f;

	if (m->failed)
		return;
	if (ARRAY_GROW(m->families, m->cap, m->n)) {
		m->failed = 1;
		return;
	}
	f = &m->families[m->n++];
	*f = (struct metric_family){ .name = name, .unit = type_unit_help[0], .help = type_unit_help[1],
				     .type = type };
}

#define FAMILY(m, name, type, unit, help) family(m, name, (const char *[3]){ unit, help, NULL }, type)

/* A zeroed point of the last family; NULL once anything failed. */
static struct metric_point *point(struct metric_set *m)
{
	struct metric_family *f;

	if (m->failed || !m->n)
		return NULL;
	f = &m->families[m->n - 1];
	if (ARRAY_GROW(f->points, f->cap, f->npoints)) {
		m->failed = 1;
		return NULL;
	}
	memset(&f->points[f->npoints], 0, sizeof(f->points[0]));
	return &f->points[f->npoints++];
}

static void label(struct metric_point *p, const char *name, enum metric_label_kind kind, const char *str,
		  int64_t num)
{
	if (p && p->nlabels < METRIC_LABELS_MAX)
		p->labels[p->nlabels++] = (struct metric_label){ name, kind, str, num };
}

static void label_str(struct metric_point *p, const char *name, const char *v)
{
	label(p, name, LABEL_STR, v ? v : "", 0);
}

/* The process's labels: pid and binary (engine when known); in host mode
 * also which container, and the pid it knows itself by. */
static const char *label_proc(struct metric_point *p, const struct metrics_snapshot *s, uint32_t pid)
{
	label(p, "pid", LABEL_INT, NULL, pid);
	for (size_t i = 0; i < s->nmetas; i++)
		if (s->metas[i].pid == pid) {
			label(p, "ns_pid", LABEL_INT, NULL, s->metas[i].ns_pid);
			label_str(p, "cgroup", s->metas[i].cgroup);
			label_str(p, "binary", s->metas[i].binary);
			if (s->metas[i].engine[0])
				label_str(p, "engine", s->metas[i].engine);
			return s->metas[i].engine[0] ? s->metas[i].engine : NULL;
		}
	label_str(p, "binary", s->binary);
	if (s->engine)
		label_str(p, "engine", s->engine);
	return s->engine;
}

static void value_u64(struct metric_point *p, uint64_t v)
{
	if (p)
		p->u = v;
}

static void value_double(struct metric_point *p, double v)
{
	if (p) {
		p->is_double = 1;
		p->d = v;
	}
}

const char *metric_label_text(const struct metric_label *l, char *buf, size_t len)
{
	if (l->kind == LABEL_STR)
		return l->str;
	if (l->kind == LABEL_LAYER && l->num == LAYER_NONE)
		return "none";
	if (l->kind == LABEL_HEX) {
		snprintf(buf, len, "0x%" PRIx64, (uint64_t)l->num);
		return buf;
	}
	snprintf(buf, len, "%" PRId64, l->num);
	return buf;
}

/* ---- a stable order, without touching the snapshot ---- */

static int cmp_u32(uint32_t a, uint32_t b)
{
	return (a > b) - (a < b);
}

static int cmp_agg(const void *pa, const void *pb)
{
	const struct metrics_agg *a = *(const struct metrics_agg *const *)pa, *b = *(const struct metrics_agg *const *)pb;
	int c = cmp_u32(a->pid, b->pid);

	if (!c)
		c = cmp_u32(a->kind, b->kind);
	return c ? c : (a->layer > b->layer) - (a->layer < b->layer);
}

/* Every record type below starts with its uint32_t pid. */
static int cmp_pid(const void *pa, const void *pb)
{
	return cmp_u32(**(const uint32_t *const *)pa, **(const uint32_t *const *)pb);
}

static int cmp_pool(const void *pa, const void *pb)
{
	const struct metrics_pool *a = *(const struct metrics_pool *const *)pa,
				  *b = *(const struct metrics_pool *const *)pb;
	int c = cmp_u32(a->pid, b->pid);

	return c ? c : cmp_u32(a->pool, b->pool);
}

static int cmp_map(const void *pa, const void *pb)
{
	return strcmp((*(const struct metrics_map_mem *const *)pa)->name,
		      (*(const struct metrics_map_mem *const *)pb)->name);
}

/* Pointers to the n records of base, in cmp's order; NULL (m->failed) on
 * allocation failure. An empty array gives a non-NULL empty list. */
static const void **sorted(struct metric_set *m, const void *base, size_t n, size_t size,
			   int (*cmp)(const void *, const void *))
{
	const void **v = malloc((n ? n : 1) * sizeof(*v));

	if (!v) {
		m->failed = 1;
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = (const char *)base + i * size;
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp);
	return v;
}

/* The snapshot's records in order. */
struct view {
	const struct metrics_snapshot *s;
	const struct metrics_agg **aggs;
	const struct metrics_pool **pools;
	const struct metrics_kv **kvs;
	const struct metrics_clmem **clmems;
	const struct metrics_serving **servings;
	const struct metrics_proc **procs;
	const struct metrics_map_mem **maps;
};

static void view_free(struct view *v)
{
	free(v->aggs);
	free(v->pools);
	free(v->kvs);
	free(v->clmems);
	free(v->servings);
	free(v->procs);
	free(v->maps);
}

static void view_make(struct metric_set *m, const struct metrics_snapshot *s, struct view *v)
{
	*v = (struct view){ .s = s };
	v->aggs = (const struct metrics_agg **)sorted(m, s->aggs, s->naggs, sizeof(*s->aggs), cmp_agg);
	v->pools = (const struct metrics_pool **)sorted(m, s->pools, s->npools, sizeof(*s->pools), cmp_pool);
	v->kvs = (const struct metrics_kv **)sorted(m, s->kvs, s->nkvs, sizeof(*s->kvs), cmp_pid);
	v->clmems = (const struct metrics_clmem **)sorted(m, s->clmems, s->nclmems, sizeof(*s->clmems), cmp_pid);
	v->servings = (const struct metrics_serving **)sorted(m, s->servings, s->nservings, sizeof(*s->servings),
							      cmp_pid);
	v->procs = (const struct metrics_proc **)sorted(m, s->procs, s->nprocs, sizeof(*s->procs), cmp_pid);
	v->maps = (const struct metrics_map_mem **)sorted(m, s->maps, s->nmaps, sizeof(*s->maps), cmp_map);
}

/* ---- durations: the histogram families ---- */

/* What an agg row measures, for its labels: a span (kind, layer) on the
 * host's clock or the device's, a kernel (kernel, layer) or one value per
 * process. */
enum agg_class { CLASS_SPAN, CLASS_SPAN_DEVICE, CLASS_KERNEL, CLASS_HTTP, CLASS_PROCESS };

static enum agg_class class_of(uint32_t kind)
{
	if (kind < SPAN_KINDS)
		return CLASS_SPAN;
	if (kind >= AGG_KIND_DEVICE_BASE && kind < AGG_KIND_DEVICE_BASE + SPAN_KIND_COUNT)
		return CLASS_SPAN_DEVICE;
	if (kind >= AGG_KIND_KERNEL_BASE && kind < AGG_KIND_KERNEL_BASE + KERNEL_COUNT)
		return CLASS_KERNEL;
	if (kind >= AGG_KIND_HTTP_REQUEST && kind <= AGG_KIND_HTTP_EVENTS)
		return CLASS_HTTP;
	return CLASS_PROCESS;
}

/* Rows of agg kinds [lo, hi]; a count family's values are not nanoseconds,
 * so they are not scaled to seconds. The vLLM name each stands for is in
 * docs/daemon.md. */
static const struct histogram_family {
	const char *name, *help;
	uint32_t lo, hi;
	int count;
} hist_families[] = {
	{ "spantrace_span_duration_seconds",
	  "Engine span durations on the host clock (span_begin/op_begin to end) by span kind and layer.",
	  0, SPAN_KINDS - 1, 0 },
	{ "spantrace_span_device_seconds",
	  "Device time of the OpenCL kernels each span launched (device clock, end - start summed), by span kind and layer.",
	  AGG_KIND_DEVICE_BASE, AGG_KIND_DEVICE_BASE + SPAN_KIND_COUNT - 1, 0 },
	{ "spantrace_token_duration_seconds", "Per-token decode time (token_begin to token_end).",
	  AGG_KIND_TOKEN, AGG_KIND_TOKEN, 0 },
	{ "spantrace_request_duration_seconds", "Request durations, end to end (as e2e_request_latency).",
	  AGG_KIND_REQUEST, AGG_KIND_REQUEST, 0 },
	{ "spantrace_e2e_request_latency_seconds", "Requests from queued (or begun) to finished; a llama.cpp request its HTTP response ends, from its arrival on the socket to that end.",
	  AGG_KIND_REQUEST, AGG_KIND_REQUEST, 0 },
	{ "spantrace_time_to_first_token_seconds", "Requests from queued to their first emitted token; a llama.cpp request its HTTP response ends, from its arrival on the socket to its first token written.",
	  AGG_KIND_TTFT, AGG_KIND_TTFT, 0 },
	{ "spantrace_inter_token_latency_seconds",
	  "Gaps between a request's emitted tokens, one per token after the first.", AGG_KIND_ITL, AGG_KIND_ITL, 0 },
	{ "spantrace_request_queue_time_seconds", "Requests from queued to first admitted.",
	  AGG_KIND_QUEUE, AGG_KIND_QUEUE, 0 },
	{ "spantrace_request_prefill_time_seconds",
	  "Requests from the admission that produced their first token to it.", AGG_KIND_PREFILL, AGG_KIND_PREFILL, 0 },
	{ "spantrace_request_decode_time_seconds", "Requests from their first token to finished.",
	  AGG_KIND_DECODE, AGG_KIND_DECODE, 0 },
	{ "spantrace_step_duration_seconds", "Serving engine steps (one batched forward each).",
	  AGG_KIND_STEP, AGG_KIND_STEP, 0 },
	{ "spantrace_iteration_tokens", "Tokens (prefill + decode) per serving engine step.",
	  AGG_KIND_STEP_TOKENS, AGG_KIND_STEP_TOKENS, 1 },
	{ "spantrace_http_request_duration_seconds",
	  "HTTP requests from their arrival on the server's socket to their response's last byte written, by status.",
	  AGG_KIND_HTTP_REQUEST, AGG_KIND_HTTP_REQUEST, 0 },
	{ "spantrace_http_time_to_first_token_seconds",
	  "HTTP requests from their arrival on the socket to the first SSE data event written (else the first byte).",
	  AGG_KIND_HTTP_TTFT, AGG_KIND_HTTP_TTFT, 0 },
	{ "spantrace_http_inter_token_latency_seconds",
	  "Gaps between consecutive SSE data events a response wrote to its socket.",
	  AGG_KIND_HTTP_ITL, AGG_KIND_HTTP_ITL, 0 },
	{ "spantrace_http_response_events", "SSE data events per event-stream response.",
	  AGG_KIND_HTTP_EVENTS, AGG_KIND_HTTP_EVENTS, 1 },
	{ "spantrace_opencl_enqueue_seconds", "Host time in clEnqueueNDRangeKernel (--opencl).",
	  AGG_KIND_CL_ENQUEUE, AGG_KIND_CL_ENQUEUE, 0 },
	{ "spantrace_opencl_wait_seconds",
	  "Host time blocked in clFinish, clWaitForEvents and blocking transfers (--opencl).",
	  AGG_KIND_CL_WAIT, AGG_KIND_CL_WAIT, 0 },
	{ "spantrace_opencl_transfer_seconds", "Host time in clEnqueueRead/Write/MapBuffer (--opencl).",
	  AGG_KIND_CL_TRANSFER, AGG_KIND_CL_TRANSFER, 0 },
	{ "spantrace_opencl_build_seconds", "Host time in clBuildProgram (--opencl).",
	  AGG_KIND_CL_BUILD, AGG_KIND_CL_BUILD, 0 },
	{ "spantrace_opencl_kernel_device_seconds",
	  "Kernel device time (END - START) of the kernels whose times the program read itself (--opencl).",
	  AGG_KIND_CL_DEVICE, AGG_KIND_CL_DEVICE, 0 },
	{ "spantrace_kernel_duration_seconds",
	  "OpenCL kernel device time (profiling end - start) by kernel and layer.",
	  AGG_KIND_KERNEL_BASE, AGG_KIND_KERNEL_BASE + KERNEL_COUNT - 1, 0 },
};

static void label_agg(struct metric_point *p, const struct metrics_snapshot *s, const struct metrics_agg *a)
{
	switch (class_of(a->kind)) {
	case CLASS_SPAN:
		label_str(p, "span", span_kind_name(a->kind));
		label(p, "layer", LABEL_LAYER, NULL, a->layer);
		break;
	case CLASS_SPAN_DEVICE:
		label_str(p, "span", span_kind_name(a->kind - AGG_KIND_DEVICE_BASE));
		label(p, "layer", LABEL_LAYER, NULL, a->layer);
		break;
	case CLASS_KERNEL:
		label_str(p, "kernel", cl_kernel_name(a->kind - AGG_KIND_KERNEL_BASE));
		label(p, "layer", LABEL_LAYER, NULL, a->layer);
		break;
	case CLASS_HTTP:
		if (a->kind == AGG_KIND_HTTP_REQUEST)
			label(p, "status", LABEL_INT, NULL, a->layer);
		if (!label_proc(p, s, a->pid))
			label_str(p, "engine", "http");   /* a server known by its sockets only */
		return;
	case CLASS_PROCESS:
		break;
	}
	label_proc(p, s, a->pid);
}

static uint64_t agg_total(const struct metrics_agg *a)
{
	uint64_t total = 0;

	for (unsigned k = 0; k < HIST_BUCKETS; k++)
		total += a->buckets[k];
	return total;
}

void metrics_kind_edges(const struct metrics_snapshot *s, struct edges e[KIND_SLOTS])
{
	for (unsigned k = 0; k < KIND_SLOTS; k++)
		e[k] = (struct edges){ HIST_BUCKETS, 0 };
	for (size_t i = 0; i < s->naggs; i++) {
		const struct metrics_agg *a = &s->aggs[i];
		struct edges *k = a->kind < KIND_SLOTS ? &e[a->kind] : NULL;

		for (unsigned b = 0; k && b < HIST_BUCKETS; b++) {
			if (!a->buckets[b])
				continue;
			if (b < k->lo)
				k->lo = b;
			if (b > k->hi)
				k->hi = b;
		}
	}
	for (unsigned k = 0; k < KIND_SLOTS; k++) {
		if (e[k].lo > e[k].hi)
			continue;
		if (e[k].lo > 0)
			e[k].lo--;   /* the lower edge of the fastest bucket */
		if (e[k].hi == HIST_BUCKETS - 1)
			e[k].hi--;   /* its bound is 2^64-1 ns: the overflow bucket says the same */
	}
}

static void histograms(struct metric_set *m, const struct view *v, const struct edges *e)
{
	static const struct edges none = { HIST_BUCKETS, 0 };

	for (size_t f = 0; f < sizeof(hist_families) / sizeof(hist_families[0]); f++) {
		const struct histogram_family *hf = &hist_families[f];

		FAMILY(m, hf->name, METRIC_HISTOGRAM, hf->count ? "{token}" : "s", hf->help);
		for (size_t i = 0; i < v->s->naggs; i++) {
			const struct metrics_agg *a = v->aggs[i];
			struct metric_point *p;

			if (a->kind < hf->lo || a->kind > hf->hi || !(p = point(m)))
				continue;
			label_agg(p, v->s, a);
			p->h = (struct metric_hist){ .buckets = a->buckets,
						     .e = a->kind < KIND_SLOTS ? e[a->kind] : none,
						     .count = agg_total(a), .sum = a->sum_ns, .max = a->max_ns,
						     .unit_div = hf->count ? 1.0 : 1e9 };
		}
	}
}

static void span_extras(struct metric_set *m, const struct view *v)
{
	struct metric_point *p;

	FAMILY(m, "spantrace_span_max_seconds", METRIC_GAUGE, "s",
	       "Longest span seen since the process started, by span kind and layer.");
	for (size_t i = 0; i < v->s->naggs; i++)
		if (class_of(v->aggs[i]->kind) == CLASS_SPAN && (p = point(m))) {
			label_agg(p, v->s, v->aggs[i]);
			value_double(p, (double)v->aggs[i]->max_ns / 1e9);
		}
	FAMILY(m, "spantrace_span_mismatched_ends_total", METRIC_COUNTER, "1",
	       "Span ends whose kind or layer did not match the open span, by span kind and layer.");
	for (size_t i = 0; i < v->s->naggs; i++)
		if (class_of(v->aggs[i]->kind) == CLASS_SPAN && (p = point(m))) {
			label_agg(p, v->s, v->aggs[i]);
			value_u64(p, v->aggs[i]->errors);
		}
}

/* Counters for rate(): the same totals as a histogram's count. */
static void kind_counter(struct metric_set *m, const struct view *v, uint32_t kind, const char *name,
			 const char *unit, const char *help)
{
	struct metric_point *p;

	FAMILY(m, name, METRIC_COUNTER, unit, help);
	for (size_t i = 0; i < v->s->naggs; i++)
		if (v->aggs[i]->kind == kind && (p = point(m))) {
			label_agg(p, v->s, v->aggs[i]);
			value_u64(p, agg_total(v->aggs[i]));
		}
}

/* ---- memory ---- */

/* A family per field of a record type: its name, type, unit, help and
 * the field's offset (a uint64_t). */
struct field {
	const char *name;
	enum metric_type type;
	const char *unit, *help;
	size_t off;
};

static uint64_t field_u64(const void *rec, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)rec + off, sizeof(v));
	return v;
}

static void pools(struct metric_set *m, const struct view *v)
{
	static const struct field fields[] = {
		{ "spantrace_pool_live_bytes", METRIC_GAUGE, "By", "Bytes currently allocated in the engine memory pool.",
		  offsetof(struct metrics_pool, live_bytes) },
		{ "spantrace_pool_peak_bytes", METRIC_GAUGE, "By", "Peak bytes allocated in the engine memory pool.",
		  offsetof(struct metrics_pool, peak_bytes) },
		{ "spantrace_pool_reserved_bytes", METRIC_GAUGE, "By",
		  "Bytes the live allocations of the engine memory pool hold from the system.",
		  offsetof(struct metrics_pool, reserved_bytes) },
		{ "spantrace_pool_allocs_total", METRIC_COUNTER, "1", "Allocations seen in the engine memory pool.",
		  offsetof(struct metrics_pool, allocs) },
		{ "spantrace_pool_frees_total", METRIC_COUNTER, "1", "Frees seen in the engine memory pool.",
		  offsetof(struct metrics_pool, frees) },
	};
	struct metric_point *p;

	for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
		FAMILY(m, fields[f].name, fields[f].type, fields[f].unit, fields[f].help);
		for (size_t i = 0; i < v->s->npools; i++)
			if ((p = point(m))) {
				label_str(p, "pool", pool_name(v->pools[i]->pool));
				label_proc(p, v->s, v->pools[i]->pid);
				value_u64(p, field_u64(v->pools[i], fields[f].off));
			}
	}
}

static void clmem(struct metric_set *m, const struct view *v)
{
	static const struct field fields[] = {
		{ "spantrace_opencl_device_memory_bytes", METRIC_GAUGE, "By",
		  "Bytes of live clCreateBuffer buffers per context (--opencl).", offsetof(struct metrics_clmem, live_bytes) },
		{ "spantrace_opencl_device_memory_peak_bytes", METRIC_GAUGE, "By",
		  "Peak of the live buffer bytes per context (--opencl).", offsetof(struct metrics_clmem, peak_bytes) },
		{ "spantrace_opencl_buffers_created_total", METRIC_COUNTER, "1",
		  "clCreateBuffer calls per context (--opencl).", offsetof(struct metrics_clmem, creates) },
		{ "spantrace_opencl_buffers_freed_total", METRIC_COUNTER, "1",
		  "Buffers whose last reference was released, per context (--opencl).",
		  offsetof(struct metrics_clmem, frees) },
	};
	struct metric_point *p;

	for (size_t f = 0; v->s->nclmems && f < sizeof(fields) / sizeof(fields[0]); f++) {
		FAMILY(m, fields[f].name, fields[f].type, fields[f].unit, fields[f].help);
		for (size_t i = 0; i < v->s->nclmems; i++)
			if ((p = point(m))) {
				label(p, "context", LABEL_HEX, NULL, (int64_t)v->clmems[i]->context);
				label_proc(p, v->s, v->clmems[i]->pid);
				value_u64(p, field_u64(v->clmems[i], fields[f].off));
			}
	}
}

static void kv(struct metric_set *m, const struct view *v)
{
	static const struct field fields[] = {
		{ "spantrace_kv_cache_used_bytes", METRIC_GAUGE, "By", "KV cache bytes in use (last kv_usage probe).",
		  offsetof(struct metrics_kv, used_bytes) },
		{ "spantrace_kv_cache_capacity_bytes", METRIC_GAUGE, "By", "KV cache capacity in bytes.",
		  offsetof(struct metrics_kv, capacity_bytes) },
	};
	struct metric_point *p;

	for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
		FAMILY(m, fields[f].name, fields[f].type, fields[f].unit, fields[f].help);
		for (size_t i = 0; i < v->s->nkvs; i++)
			if ((p = point(m))) {
				label_proc(p, v->s, v->kvs[i]->pid);
				value_u64(p, field_u64(v->kvs[i], fields[f].off));
			}
	}
}

/* ---- serving engines ---- */

/* Only once a lifecycle probe has said them: before that (just after an
 * attach) the gauges are unknown, and a series that is absent says so. */
static void serving_gauges(struct metric_set *m, const struct view *v)
{
	static const struct {
		const char *name, *help;
	} gauges[2] = {
		{ "spantrace_requests_running", "Requests in the engine's running set." },
		{ "spantrace_requests_waiting", "Requests queued, waiting for KV blocks." },
	};
	struct metric_point *p;

	for (int g = 0; g < 2; g++) {
		FAMILY(m, gauges[g].name, METRIC_GAUGE, "{request}", gauges[g].help);
		for (size_t i = 0; i < v->s->nservings; i++) {
			const struct serving_val *sv = &v->servings[i]->v;

			if (sv->gauges_seen && (p = point(m))) {
				label_proc(p, v->s, v->servings[i]->pid);
				value_u64(p, g ? sv->waiting : sv->running);
			}
		}
	}
}

static void serving_fields(struct metric_set *m, const struct view *v)
{
#define F(field) offsetof(struct serving_val, field), sizeof(((struct serving_val *)0)->field) == 4
	static const struct {
		const char *name;
		enum metric_type type;
		const char *unit, *help;
		size_t off;
		int is32;
	} fields[] = {
		{ "spantrace_kv_cache_blocks_used", METRIC_GAUGE, "1", "KV-cache blocks in use.", F(kv_used_blocks) },
		{ "spantrace_kv_cache_blocks_capacity", METRIC_GAUGE, "1", "KV-cache blocks in the pool.",
		  F(kv_total_blocks) },
		{ "spantrace_prompt_tokens_total", METRIC_COUNTER, "{token}", "Prompt tokens of the requests begun.",
		  F(prompt_tokens) },
		{ "spantrace_generation_tokens_total", METRIC_COUNTER, "{token}", "Tokens emitted.",
		  F(generation_tokens) },
		{ "spantrace_preemptions_total", METRIC_COUNTER, "1", "Requests preempted (recomputed later).",
		  F(preemptions) },
		{ "spantrace_steps_total", METRIC_COUNTER, "1", "Serving engine steps.", F(steps) },
		{ "spantrace_prefix_cache_hits_total", METRIC_COUNTER, "1",
		  "Admissions that reused a finished request's KV (prefix cache).", F(prefix_hits) },
		{ "spantrace_prefix_cache_tokens_total", METRIC_COUNTER, "{token}",
		  "Prompt tokens the prefix cache gave, not computed.", F(prefix_cached_tokens) },
		{ "spantrace_kv_cache_blocks_cached", METRIC_GAUGE, "1",
		  "KV-cache blocks the prefix cache holds (not in blocks_used).", F(prefix_cache_blocks) },
	};
#undef F
	struct metric_point *p;

	for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
		FAMILY(m, fields[f].name, fields[f].type, fields[f].unit, fields[f].help);
		for (size_t i = 0; i < v->s->nservings; i++) {
			const char *at = (const char *)&v->servings[i]->v + fields[f].off;
			uint32_t u32;

			if (!(p = point(m)))
				continue;
			label_proc(p, v->s, v->servings[i]->pid);
			if (fields[f].is32) {
				memcpy(&u32, at, sizeof(u32));
				value_u64(p, u32);
			} else {
				value_u64(p, field_u64(at, 0));
			}
		}
	}
}

static void serving(struct metric_set *m, const struct view *v)
{
	struct metric_point *p;

	serving_gauges(m, v);
	serving_fields(m, v);
	FAMILY(m, "spantrace_kv_cache_usage_ratio", METRIC_GAUGE, "1", "KV-cache blocks in use over the pool's blocks.");
	for (size_t i = 0; i < v->s->nservings; i++) {
		const struct serving_val *sv = &v->servings[i]->v;

		if (sv->kv_total_blocks && (p = point(m))) {
			label_proc(p, v->s, v->servings[i]->pid);
			value_double(p, (double)sv->kv_used_blocks / sv->kv_total_blocks);
		}
	}
	FAMILY(m, "spantrace_request_success_total", METRIC_COUNTER, "{request}",
	       "Requests finished, by finish_reason (unknown: the CLI, which does not say).");
	for (size_t i = 0; i < v->s->nservings; i++)
		for (unsigned r = 0; r <= FINISH_REASON_COUNT; r++)
			if ((p = point(m))) {
				label_str(p, "finish_reason", finish_reason_name(r));
				label_proc(p, v->s, v->servings[i]->pid);
				value_u64(p, v->servings[i]->v.finished[r]);
			}
}

/* ---- processes ---- */

static void procs(struct metric_set *m, const struct view *v)
{
	static const char *const parts[2] = { "pools", "other" };
	struct metric_point *p;

	FAMILY(m, "spantrace_tokens_per_second", METRIC_GAUGE, "{token}/s",
	       "Tokens decoded per second over the last daemon interval.");
	for (size_t i = 0; i < v->s->nprocs; i++)
		if ((p = point(m))) {
			label_proc(p, v->s, v->procs[i]->pid);
			value_double(p, v->procs[i]->tokens_per_second);
		}
	FAMILY(m, "spantrace_process_resident_bytes", METRIC_GAUGE, "By",
	       "Resident memory (RSS) of the process: part=pools is what the engine's pools hold "
	       "(reserved bytes, at most RSS), part=other the rest; they add up to RSS.");
	for (size_t i = 0; i < v->s->nprocs; i++)
		for (int k = 0; k < 2 && v->procs[i]->rss_ok; k++)
			if ((p = point(m))) {
				label_proc(p, v->s, v->procs[i]->pid);
				label_str(p, "part", parts[k]);
				value_u64(p, k ? v->procs[i]->rss_other : v->procs[i]->rss_pools);
			}
	FAMILY(m, "spantrace_traced_processes", METRIC_GAUGE, "{process}", "Processes of the binary currently traced.");
	value_u64(point(m), v->s->nprocs);
}

/* ---- loss accounting and the daemon itself ---- */

static void counter1(struct metric_set *m, const char *name, const char *help, uint64_t value)
{
	FAMILY(m, name, METRIC_COUNTER, "1", help);
	value_u64(point(m), value);
}

static void events(struct metric_set *m, const char *name, const char *help, const __u64 *per_type)
{
	struct metric_point *p;

	FAMILY(m, name, METRIC_COUNTER, "{event}", help);
	for (unsigned t = 1; t < EV_TYPE_COUNT; t++)
		if ((p = point(m))) {
			label_str(p, "event", event_type_name(t));
			value_u64(p, per_type[t]);
		}
}

/* What the socket tracing could not count as requests, by kind (the
 * record summary's "http" object has the same). */
static void http_losses(struct metric_set *m, const struct counters *c)
{
	const struct { const char *kind; uint64_t n; } rows[] = {
		{ "table_full", c->http_table_full },     { "unparsed", c->http_unparsed },
		{ "tls", c->http_tls },                   { "h2", c->http_h2 },
		{ "lost_closed", c->http_lost_closed },   { "lost_pipeline", c->http_lost_pipeline },
		{ "lost_boundary", c->http_lost_boundary },
	};
	struct metric_point *p;

	FAMILY(m, "spantrace_http_losses_total", METRIC_COUNTER, "1",
	       "Socket-level HTTP not counted as requests, by kind: connections that were not HTTP/1.x in "
	       "the clear (unparsed, tls, h2) or not tracked (table_full), and requests lost (lost_*: "
	       "closed before their response, past the pipelining queue, no boundary found).");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if ((p = point(m))) {
			label_str(p, "kind", rows[i].kind);
			value_u64(p, rows[i].n);
		}
	/* the socket's in flight: where an engine tells no queue (llama.cpp,
	 * any server with no profile), what is open now */
	FAMILY(m, "spantrace_http_requests_in_flight", METRIC_GAUGE, "{request}",
	       "Requests read from traced servers' sockets and not yet answered, all servers together (since "
	       "the attach: one already open then is not seen).");
	value_u64(point(m), c->http_begun > c->http_done ? c->http_begun - c->http_done : 0);
}

static void losses(struct metric_set *m, const struct metrics_snapshot *s)
{
	const struct counters *c = &s->counters;

	events(m, "spantrace_events_fired_total", "Events the BPF programs tried to send to userspace.", c->fired);
	events(m, "spantrace_events_dropped_total",
	       "Events lost because the ring buffer was full (fired = delivered + dropped).", c->dropped);
	events(m, "spantrace_events_delivered_total", "Events userspace read from the ring buffer.",
	       s->ringbuf_delivered);
	counter1(m, "spantrace_span_errors_total", "Unbalanced or mismatched span ends, all kinds.", c->span_errors);
	counter1(m, "spantrace_span_orphan_ends_total", "Span ends whose begin came before the tracer attached.",
		 c->orphan_ends);
	counter1(m, "spantrace_span_stack_overflows_total", "Span begins deeper than the kernel's per-thread stack.",
		 c->stack_overflow);
	counter1(m, "spantrace_unknown_frees_total", "Frees of pointers never seen allocated.", c->unknown_frees);
	counter1(m, "spantrace_missed_frees_total",
		 "Allocations replaced by a new one at the same pointer before their free was seen.", c->missed_frees);
	counter1(m, "spantrace_alloc_table_full_total", "Allocations not tracked because the kernel's table was full.",
		 c->alloc_table_full);
	counter1(m, "spantrace_request_orphans_total",
		 "Request probes of requests queued before the tracer attached (not timed).", c->req_orphans);
	counter1(m, "spantrace_request_table_full_total",
		 "Requests not timed because the kernel's request table was full.", c->req_table_full);
	counter1(m, "spantrace_opencl_table_full_total",
		 "OpenCL loader calls not recorded because a kernel table was full (--opencl).", c->cl_table_full);
	counter1(m, "spantrace_agg_table_full_total",
		 "Durations not aggregated because the kernel's histogram table was full.", c->agg_table_full);
	counter1(m, "spantrace_kernel_records_truncated_total",
		 "OpenCL kernel records beyond what one cl_batch probe hit reads.", c->kernels_truncated);
	http_losses(m, c);
}

static void tail(struct metric_set *m, const struct metrics_snapshot *s)
{
	const struct metrics_tail *t = &s->tail;
	struct metric_point *p;

	counter1(m, "spantrace_tail_spans_written_total", "Slow spans written to the JSONL files.", t->spans_written);
	counter1(m, "spantrace_tail_spans_dropped_total",
		 "Slow spans not written (line over the file cap, or a write error).", t->spans_dropped);
	counter1(m, "spantrace_tail_bytes_written_total", "Bytes written to the JSONL files.", t->bytes_written);
	counter1(m, "spantrace_tail_files_deleted_total",
		 "JSONL files deleted to honour the total size and retention caps.", t->files_deleted);
	FAMILY(m, "spantrace_tail_disk_bytes", METRIC_GAUGE, "By", "Bytes the JSONL files occupy now.");
	value_u64(point(m), t->disk_bytes);
	FAMILY(m, "spantrace_tail_threshold_seconds", METRIC_GAUGE, "s",
	       "Duration at or above which a span is captured, by span kind.");
	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++)
		if (t->slow_ns[k] != UINT64_MAX && (p = point(m))) {
			label_str(p, "span", span_kind_name(k));
			value_double(p, (double)t->slow_ns[k] / 1e9);
		}
}

static void bpf_maps(struct metric_set *m, const struct view *v)
{
	struct metric_point *p;

	FAMILY(m, "spantrace_bpf_map_bytes", METRIC_GAUGE, "By", "Memory the tracer's BPF maps take, by map.");
	for (size_t i = 0; i < v->s->nmaps; i++)
		if ((p = point(m))) {
			label_str(p, "map", v->maps[i]->name);
			value_u64(p, v->maps[i]->bytes);
		}
}

int metric_set_build(const struct metrics_snapshot *s, struct metric_set *m)
{
	struct edges *edges = malloc(KIND_SLOTS * sizeof(*edges));
	struct metric_point *up;
	struct view v;

	*m = (struct metric_set){ 0 };
	view_make(m, s, &v);
	if (!edges || m->failed)
		goto fail;
	metrics_kind_edges(s, edges);
	FAMILY(m, "spantrace_up", METRIC_GAUGE, "1", "1 while the spantrace daemon is running.");
	up = point(m);
	label_str(up, "binary", s->binary);
	value_u64(up, 1);
	histograms(m, &v, edges);
	span_extras(m, &v);
	kind_counter(m, &v, AGG_KIND_TOKEN, "spantrace_tokens_total", "{token}", "Tokens decoded.");
	kind_counter(m, &v, AGG_KIND_REQUEST, "spantrace_requests_total", "{request}", "Requests completed.");
	kind_counter(m, &v, AGG_KIND_REQ_UNLINKED, "spantrace_request_unlinked_total", "{request}",
		     "Requests of a server whose sockets are traced that no HTTP request could be proved its own: their TTFT and e2e are the engine's.");
	kind_counter(m, &v, AGG_KIND_HTTP_REQUEST, "spantrace_http_requests_total", "{request}",
		     "HTTP requests whose response ended (or whose connection closed), by status: 0 when none was written.");
	pools(m, &v);
	clmem(m, &v);
	kv(m, &v);
	serving(m, &v);
	procs(m, &v);
	losses(m, s);
	if (s->has_tail)
		tail(m, s);
	bpf_maps(m, &v);
	if (m->failed)
		goto fail;
	free(edges);
	view_free(&v);
	return 0;
fail:
	free(edges);
	view_free(&v);
	metric_set_free(m);
	errno = ENOMEM;
	return -1;
}

void metric_set_free(struct metric_set *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->families[i].points);
	free(m->families);
	*m = (struct metric_set){ 0 };
}

void metrics_snapshot_free(struct metrics_snapshot *s)
{
	free(s->aggs);
	free(s->pools);
	free(s->kvs);
	free(s->clmems);
	free(s->servings);
	free(s->procs);
	free(s->maps);
	free(s->metas);
	s->aggs = NULL;
	s->pools = NULL;
	s->kvs = NULL;
	s->clmems = NULL;
	s->servings = NULL;
	s->procs = NULL;
	s->maps = NULL;
	s->metas = NULL;
	s->naggs = s->npools = s->nkvs = s->nclmems = s->nservings = s->nprocs = s->nmaps = s->nmetas = 0;
}
