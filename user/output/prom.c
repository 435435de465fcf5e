/* prom.c - Prometheus text exposition (0.0.4) of a daemon snapshot.
 *
 * Families appear once each with # HELP and # TYPE, series sorted by
 * (pid, kind, layer), so two renders of the same data are byte-identical.
 * Histograms are the kernel's own log-linear buckets (bpf/hist.h); a
 * bucket's inclusive `le` is its largest value in ns, in seconds. */
#include "output/prom.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a growable output buffer; the first failure sticks ---- */
struct textbuf {
	char *data;
	size_t len, cap;
	int failed;
};

static void out_reserve(struct textbuf *b, size_t more)
{
	if (b->failed || b->len + more + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 16384;
	while (cap < b->len + more + 1)
		cap *= 2;
	char *p = realloc(b->data, cap);
	if (!p) {
		b->failed = 1;
		return;
	}
	b->data = p;
	b->cap = cap;
}

__attribute__((format(printf, 2, 3)))
static void out_printf(struct textbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = 1;
		return;
	}
	out_reserve(b, (size_t)n);
	if (b->failed)
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* ---- numbers and labels ---- */

/* Shortest decimal that reads back as the same double (so le bounds and
 * sums are exact and stable), "+Inf"/"NaN" per the format. */
static void fmt_double(char *dst, size_t len, double v)
{
	if (isnan(v)) {
		snprintf(dst, len, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(dst, len, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(dst, len, "%.*g", prec, v);
		if (strtod(dst, NULL) == v)
			return;
	}
}

double prom_bucket_le_seconds(unsigned b)
{
	return (double)hist_bucket_high(b) / 1e9;
}

size_t prom_escape_label(char *dst, size_t dstlen, const char *value)
{
	size_t need = 0, copied = 0;
	for (const char *p = value ? value : ""; *p; p++) {
		const char *rep = NULL;
		if (*p == '\\')
			rep = "\\\\";
		else if (*p == '"')
			rep = "\\\"";
		else if (*p == '\n')
			rep = "\\n";
		size_t k = rep ? 2 : 1;
		/* Never split an escape: stop copying at the first that won't fit. */
		if (copied == need && copied + k < dstlen) {
			memcpy(dst + copied, rep ? rep : p, k);
			copied += k;
		}
		need += k;
	}
	if (dstlen)
		dst[copied] = '\0';
	return need;
}

/* Label sets are built in a fixed buffer; a binary path longer than this
 * is truncated (PATH_MAX-sized paths escape to at most twice their size). */
#define LABELS_MAX 8400

struct labels {
	char text[LABELS_MAX];
	size_t len;
};

static void labels_start(struct labels *l)
{
	l->len = 0;
	l->text[0] = '\0';
}

static void labels_add(struct labels *l, const char *name, const char *value)
{
	char esc[LABELS_MAX / 2];
	prom_escape_label(esc, sizeof(esc), value);
	int n = snprintf(l->text + l->len, sizeof(l->text) - l->len, "%s%s=\"%s\"",
			 l->len ? "," : "", name, esc);
	if (n > 0)
		l->len += (size_t)n < sizeof(l->text) - l->len ? (size_t)n
							       : sizeof(l->text) - l->len - 1;
}

static void labels_add_u64(struct labels *l, const char *name, uint64_t v)
{
	char num[24];
	snprintf(num, sizeof(num), "%" PRIu64, v);
	labels_add(l, name, num);
}

static void labels_add_layer(struct labels *l, int32_t layer)
{
	char num[16];
	if (layer == LAYER_NONE)
		labels_add(l, "layer", "none");
	else {
		snprintf(num, sizeof(num), "%" PRId32, layer);
		labels_add(l, "layer", num);
	}
}

static void labels_add_proc(struct labels *l, const struct prom_snapshot *s, uint32_t pid)
{
	labels_add_u64(l, "pid", pid);
	for (size_t i = 0; i < s->nmetas; i++)
		if (s->metas[i].pid == pid) {
			/* host mode: which container, and the pid it knows itself by */
			labels_add_u64(l, "ns_pid", s->metas[i].ns_pid);
			labels_add(l, "cgroup", s->metas[i].cgroup);
			labels_add(l, "binary", s->metas[i].binary);
			if (s->metas[i].engine[0])
				labels_add(l, "engine", s->metas[i].engine);
			return;
		}
	labels_add(l, "binary", s->binary ? s->binary : "");
	if (s->engine)
		labels_add(l, "engine", s->engine);
}

/* ---- family headers and samples ---- */

static void family(struct textbuf *b, const char *name, const char *type, const char *help)
{
	out_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample_u64(struct textbuf *b, const char *name, const struct labels *l, uint64_t v)
{
	if (l && l->len)
		out_printf(b, "%s{%s} %" PRIu64 "\n", name, l->text, v);
	else
		out_printf(b, "%s %" PRIu64 "\n", name, v);
}

static void sample_double(struct textbuf *b, const char *name, const struct labels *l, double v)
{
	char num[40];
	fmt_double(num, sizeof(num), v);
	if (l && l->len)
		out_printf(b, "%s{%s} %s\n", name, l->text, num);
	else
		out_printf(b, "%s %s\n", name, num);
}

/* ---- the four classes of aggregated durations ---- */

/* What an agg row measures, for its labels: a span (kind, layer) on the
 * host's clock or the device's, a kernel (kernel, layer) or one value per
 * process. */
enum agg_class { CLASS_SPAN, CLASS_SPAN_DEVICE, CLASS_KERNEL, CLASS_PROCESS, CLASS_NONE };

static enum agg_class class_of(uint32_t kind)
{
	if (kind < SPAN_KINDS)
		return CLASS_SPAN;
	if (kind >= AGG_KIND_DEVICE_BASE && kind < AGG_KIND_DEVICE_BASE + SPAN_KIND_COUNT)
		return CLASS_SPAN_DEVICE;
	if (kind >= AGG_KIND_KERNEL_BASE && kind < AGG_KIND_KERNEL_BASE + KERNEL_COUNT)
		return CLASS_KERNEL;
	if ((kind >= AGG_KIND_TOKEN && kind <= AGG_KIND_STEP_TOKENS) ||
	    (kind >= AGG_KIND_CL_ENQUEUE && kind <= AGG_KIND_CL_DEVICE))
		return CLASS_PROCESS;
	return CLASS_NONE;
}

/* The histogram families: rows of kinds [lo, hi]; a count family's values
 * are not nanoseconds, so its le and sum are not scaled to seconds. The vLLM
 * name each stands for is in docs/daemon.md. */
static const struct histogram_family families[] = {
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
	{ "spantrace_e2e_request_latency_seconds", "Requests from queued (or begun) to finished.",
	  AGG_KIND_REQUEST, AGG_KIND_REQUEST, 0 },
	{ "spantrace_time_to_first_token_seconds", "Requests from queued to their first emitted token.",
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

static void agg_labels(struct labels *l, const struct prom_snapshot *s, const struct prom_agg *a)
{
	labels_start(l);
	switch (class_of(a->kind)) {
	case CLASS_SPAN:
		labels_add(l, "span", span_kind_name(a->kind));
		labels_add_layer(l, a->layer);
		break;
	case CLASS_SPAN_DEVICE:
		labels_add(l, "span", span_kind_name(a->kind - AGG_KIND_DEVICE_BASE));
		labels_add_layer(l, a->layer);
		break;
	case CLASS_KERNEL:
		labels_add(l, "kernel", cl_kernel_name(a->kind - AGG_KIND_KERNEL_BASE));
		labels_add_layer(l, a->layer);
		break;
	default:
		break;
	}
	labels_add_proc(l, s, a->pid);
}

/* The `le` edges one kind exposes: every bucket from the one just below its
 * fastest non-empty bucket to its slowest, over all processes and layers.
 * Every series of a kind then has the same edges, so sums across processes
 * and layers stay exact, and the edges only ever grow. */
const struct histogram_family *prom_histogram_families(size_t *n)
{
	*n = sizeof(families) / sizeof(families[0]);
	return families;
}

void prom_kind_edges(const struct prom_snapshot *s, struct edges e[KIND_SLOTS])
{
	for (unsigned k = 0; k < KIND_SLOTS; k++)
		e[k] = (struct edges){ HIST_BUCKETS, 0 };
	for (size_t i = 0; i < s->naggs; i++) {
		const struct prom_agg *a = &s->aggs[i];
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
			e[k].hi--;   /* its `le` is 2^64-1 ns: +Inf says the same */
	}
}

static void histogram_series(struct textbuf *b, const struct histogram_family *f, const struct labels *l,
			     const struct prom_agg *a, const struct edges *e)
{
	const char *name = f->name;
	double unit = f->count ? 1.0 : 1e9;
	char le[40], sum[40];
	uint64_t cum = 0, total = 0;

	for (unsigned k = 0; k < HIST_BUCKETS; k++)
		total += a->buckets[k];
	for (unsigned k = 0; e && k <= e->hi && k < HIST_BUCKETS; k++) {
		cum += a->buckets[k];
		if (k < e->lo)
			continue;
		fmt_double(le, sizeof(le), (double)hist_bucket_high(k) / unit);
		out_printf(b, "%s_bucket{%s,le=\"%s\"} %" PRIu64 "\n", name, l->text, le, cum);
	}
	/* _count is the +Inf bucket, as the format requires. */
	out_printf(b, "%s_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n", name, l->text, total);
	fmt_double(sum, sizeof(sum), (double)a->sum_ns / unit);
	out_printf(b, "%s_sum{%s} %s\n", name, l->text, sum);
	out_printf(b, "%s_count{%s} %" PRIu64 "\n", name, l->text, total);
}

static void render_histograms(struct textbuf *b, const struct prom_snapshot *s,
			      const struct histogram_family *f, const struct edges *e)
{
	struct labels l;
	family(b, f->name, "histogram", f->help);
	for (size_t i = 0; i < s->naggs; i++) {
		const struct prom_agg *a = &s->aggs[i];
		if (a->kind < f->lo || a->kind > f->hi)
			continue;
		agg_labels(&l, s, a);
		histogram_series(b, f, &l, a, a->kind < KIND_SLOTS ? &e[a->kind] : NULL);
	}
}

static void render_span_extras(struct textbuf *b, const struct prom_snapshot *s)
{
	struct labels l;
	family(b, "spantrace_span_max_seconds", "gauge",
	       "Longest span seen since the process started, by span kind and layer.");
	for (size_t i = 0; i < s->naggs; i++) {
		if (class_of(s->aggs[i].kind) != CLASS_SPAN)
			continue;
		agg_labels(&l, s, &s->aggs[i]);
		sample_double(b, "spantrace_span_max_seconds", &l, (double)s->aggs[i].max_ns / 1e9);
	}
	family(b, "spantrace_span_mismatched_ends_total", "counter",
	       "Span ends whose kind or layer did not match the open span, by span kind and layer.");
	for (size_t i = 0; i < s->naggs; i++) {
		if (class_of(s->aggs[i].kind) != CLASS_SPAN)
			continue;
		agg_labels(&l, s, &s->aggs[i]);
		sample_u64(b, "spantrace_span_mismatched_ends_total", &l, s->aggs[i].errors);
	}
}

/* Convenience counters for rate(): the same totals as the token and
 * request histograms' _count. */
static void render_kind_counter(struct textbuf *b, const struct prom_snapshot *s,
				uint32_t kind, const char *name, const char *help)
{
	struct labels l;
	family(b, name, "counter", help);
	for (size_t i = 0; i < s->naggs; i++) {
		if (s->aggs[i].kind != kind)
			continue;
		agg_labels(&l, s, &s->aggs[i]);
		uint64_t total = 0;
		for (unsigned k = 0; k < HIST_BUCKETS; k++)
			total += s->aggs[i].buckets[k];
		sample_u64(b, name, &l, total);
	}
}

/* ---- pools, KV cache, processes ---- */

static void render_pools(struct textbuf *b, const struct prom_snapshot *s)
{
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} fields[] = {
		{ "spantrace_pool_live_bytes", "gauge", "Bytes currently allocated in the engine memory pool.",
		  offsetof(struct prom_pool, live_bytes) },
		{ "spantrace_pool_peak_bytes", "gauge", "Peak bytes allocated in the engine memory pool.",
		  offsetof(struct prom_pool, peak_bytes) },
		{ "spantrace_pool_reserved_bytes", "gauge",
		  "Bytes the live allocations of the engine memory pool hold from the system.",
		  offsetof(struct prom_pool, reserved_bytes) },
		{ "spantrace_pool_allocs_total", "counter", "Allocations seen in the engine memory pool.",
		  offsetof(struct prom_pool, allocs) },
		{ "spantrace_pool_frees_total", "counter", "Frees seen in the engine memory pool.",
		  offsetof(struct prom_pool, frees) },
	};
	struct labels l;
	for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
		family(b, fields[f].name, fields[f].type, fields[f].help);
		for (size_t i = 0; i < s->npools; i++) {
			const struct prom_pool *p = &s->pools[i];
			labels_start(&l);
			labels_add(&l, "pool", pool_name(p->pool));
			labels_add_proc(&l, s, p->pid);
			uint64_t v;
			memcpy(&v, (const char *)p + fields[f].off, sizeof(v));
			sample_u64(b, fields[f].name, &l, v);
		}
	}
}

static void render_clmem(struct textbuf *b, const struct prom_snapshot *s)
{
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} fields[] = {
		{ "spantrace_opencl_device_memory_bytes", "gauge",
		  "Bytes of live clCreateBuffer buffers per context (--opencl).", offsetof(struct prom_clmem, live_bytes) },
		{ "spantrace_opencl_device_memory_peak_bytes", "gauge",
		  "Peak of the live buffer bytes per context (--opencl).", offsetof(struct prom_clmem, peak_bytes) },
		{ "spantrace_opencl_buffers_created_total", "counter", "clCreateBuffer calls per context (--opencl).",
		  offsetof(struct prom_clmem, creates) },
		{ "spantrace_opencl_buffers_freed_total", "counter",
		  "Buffers whose last reference was released, per context (--opencl).", offsetof(struct prom_clmem, frees) },
	};
	struct labels l;
	char ctx[24];

	for (size_t f = 0; s->nclmems && f < sizeof(fields) / sizeof(fields[0]); f++) {
		family(b, fields[f].name, fields[f].type, fields[f].help);
		for (size_t i = 0; i < s->nclmems; i++) {
			const struct prom_clmem *m = &s->clmems[i];
			uint64_t v;
			snprintf(ctx, sizeof(ctx), "0x%llx", (unsigned long long)m->context);
			labels_start(&l);
			labels_add(&l, "context", ctx);
			labels_add_proc(&l, s, m->pid);
			memcpy(&v, (const char *)m + fields[f].off, sizeof(v));
			sample_u64(b, fields[f].name, &l, v);
		}
	}
}

static void render_kv(struct textbuf *b, const struct prom_snapshot *s)
{
	struct labels l;
	family(b, "spantrace_kv_cache_used_bytes", "gauge", "KV cache bytes in use (last kv_usage probe).");
	for (size_t i = 0; i < s->nkvs; i++) {
		labels_start(&l);
		labels_add_proc(&l, s, s->kvs[i].pid);
		sample_u64(b, "spantrace_kv_cache_used_bytes", &l, s->kvs[i].used_bytes);
	}
	family(b, "spantrace_kv_cache_capacity_bytes", "gauge", "KV cache capacity in bytes.");
	for (size_t i = 0; i < s->nkvs; i++) {
		labels_start(&l);
		labels_add_proc(&l, s, s->kvs[i].pid);
		sample_u64(b, "spantrace_kv_cache_capacity_bytes", &l, s->kvs[i].capacity_bytes);
	}
}

/* ---- serving engines: gauges and request counters ---- */

static uint64_t serving_field(const struct prom_serving *p, size_t off, int is32)
{
	const char *v = (const char *)&p->v + off;
	uint32_t u32;
	uint64_t u64;

	if (is32) {
		memcpy(&u32, v, sizeof(u32));
		return u32;
	}
	memcpy(&u64, v, sizeof(u64));
	return u64;
}

static void render_serving_fields(struct textbuf *b, const struct prom_snapshot *s)
{
#define F(field) offsetof(struct serving_val, field), sizeof(((struct serving_val *)0)->field) == 4
	static const struct {
		const char *name, *type, *help;
		size_t off;
		int is32;
	} fields[] = {
		{ "spantrace_kv_cache_blocks_used", "gauge", "KV-cache blocks in use.", F(kv_used_blocks) },
		{ "spantrace_kv_cache_blocks_capacity", "gauge", "KV-cache blocks in the pool.", F(kv_total_blocks) },
		{ "spantrace_prompt_tokens_total", "counter", "Prompt tokens of the requests begun.", F(prompt_tokens) },
		{ "spantrace_generation_tokens_total", "counter", "Tokens emitted.", F(generation_tokens) },
		{ "spantrace_preemptions_total", "counter", "Requests preempted (recomputed later).", F(preemptions) },
		{ "spantrace_steps_total", "counter", "Serving engine steps.", F(steps) },
	};
#undef F
	struct labels l;

	for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
		family(b, fields[f].name, fields[f].type, fields[f].help);
		for (size_t i = 0; i < s->nservings; i++) {
			labels_start(&l);
			labels_add_proc(&l, s, s->servings[i].pid);
			sample_u64(b, fields[f].name, &l, serving_field(&s->servings[i], fields[f].off, fields[f].is32));
		}
	}
}

/* Only once a lifecycle probe has said them: before that (just after an
 * attach) the gauges are unknown, and a series that is absent says so. */
static void render_serving_gauges(struct textbuf *b, const struct prom_snapshot *s)
{
	static const char *const names[2] = { "spantrace_requests_running", "spantrace_requests_waiting" };
	static const char *const helps[2] = { "Requests in the engine's running set.",
					      "Requests queued, waiting for KV blocks." };
	struct labels l;

	for (int g = 0; g < 2; g++) {
		family(b, names[g], "gauge", helps[g]);
		for (size_t i = 0; i < s->nservings; i++) {
			const struct serving_val *v = &s->servings[i].v;
			if (!v->gauges_seen)
				continue;
			labels_start(&l);
			labels_add_proc(&l, s, s->servings[i].pid);
			sample_u64(b, names[g], &l, g ? v->waiting : v->running);
		}
	}
}

static void render_serving(struct textbuf *b, const struct prom_snapshot *s)
{
	struct labels l;

	render_serving_gauges(b, s);
	render_serving_fields(b, s);
	family(b, "spantrace_kv_cache_usage_ratio", "gauge", "KV-cache blocks in use over the pool's blocks.");
	for (size_t i = 0; i < s->nservings; i++) {
		const struct serving_val *v = &s->servings[i].v;
		if (!v->kv_total_blocks)
			continue;
		labels_start(&l);
		labels_add_proc(&l, s, s->servings[i].pid);
		sample_double(b, "spantrace_kv_cache_usage_ratio", &l, (double)v->kv_used_blocks / v->kv_total_blocks);
	}
	family(b, "spantrace_request_success_total", "counter",
	       "Requests finished, by finish_reason (unknown: the CLI, which does not say).");
	for (size_t i = 0; i < s->nservings; i++)
		for (unsigned r = 0; r <= FINISH_REASON_COUNT; r++) {
			labels_start(&l);
			labels_add(&l, "finish_reason", finish_reason_name(r));
			labels_add_proc(&l, s, s->servings[i].pid);
			sample_u64(b, "spantrace_request_success_total", &l, s->servings[i].v.finished[r]);
		}
}

static void render_procs(struct textbuf *b, const struct prom_snapshot *s)
{
	struct labels l;
	family(b, "spantrace_tokens_per_second", "gauge",
	       "Tokens decoded per second over the last daemon interval.");
	for (size_t i = 0; i < s->nprocs; i++) {
		labels_start(&l);
		labels_add_proc(&l, s, s->procs[i].pid);
		sample_double(b, "spantrace_tokens_per_second", &l, s->procs[i].tokens_per_second);
	}
	family(b, "spantrace_process_resident_bytes", "gauge",
	       "Resident memory (RSS) of the process: part=pools is what the engine's pools hold "
	       "(reserved bytes, at most RSS), part=other the rest; they add up to RSS.");
	for (size_t i = 0; i < s->nprocs; i++) {
		if (!s->procs[i].rss_ok)
			continue;
		labels_start(&l);
		labels_add_proc(&l, s, s->procs[i].pid);
		labels_add(&l, "part", "pools");
		sample_u64(b, "spantrace_process_resident_bytes", &l, s->procs[i].rss_pools);
		labels_start(&l);
		labels_add_proc(&l, s, s->procs[i].pid);
		labels_add(&l, "part", "other");
		sample_u64(b, "spantrace_process_resident_bytes", &l, s->procs[i].rss_other);
	}
	family(b, "spantrace_traced_processes", "gauge", "Processes of the binary currently traced.");
	sample_u64(b, "spantrace_traced_processes", NULL, s->nprocs);
}

/* ---- loss accounting and the daemon itself ---- */

static const char *const event_names[EV_TYPE_COUNT] = {
	[EV_SPAN] = "span", [EV_TOKEN] = "token", [EV_REQUEST] = "request",
	[EV_ALLOC] = "alloc", [EV_FREE] = "free", [EV_KV] = "kv",
	[EV_KERNEL] = "kernel", [EV_SAMPLE] = "sample",
};

static void render_event_family(struct textbuf *b, const char *name, const char *help,
				const __u64 *per_type)
{
	struct labels l;
	family(b, name, "counter", help);
	for (unsigned t = 1; t < EV_TYPE_COUNT; t++) {
		labels_start(&l);
		labels_add(&l, "event", event_names[t]);
		sample_u64(b, name, &l, per_type[t]);
	}
}

static void render_counter1(struct textbuf *b, const char *name, const char *help, uint64_t v)
{
	family(b, name, "counter", help);
	sample_u64(b, name, NULL, v);
}

static void render_losses(struct textbuf *b, const struct prom_snapshot *s)
{
	const struct counters *c = &s->counters;
	render_event_family(b, "spantrace_events_fired_total",
			    "Events the BPF programs tried to send to userspace.", c->fired);
	render_event_family(b, "spantrace_events_dropped_total",
			    "Events lost because the ring buffer was full (fired = delivered + dropped).",
			    c->dropped);
	render_event_family(b, "spantrace_events_delivered_total",
			    "Events userspace read from the ring buffer.", s->ringbuf_delivered);
	render_counter1(b, "spantrace_span_errors_total",
			"Unbalanced or mismatched span ends, all kinds.", c->span_errors);
	render_counter1(b, "spantrace_span_orphan_ends_total",
			"Span ends whose begin came before the tracer attached.", c->orphan_ends);
	render_counter1(b, "spantrace_span_stack_overflows_total",
			"Span begins deeper than the kernel's per-thread stack.", c->stack_overflow);
	render_counter1(b, "spantrace_unknown_frees_total",
			"Frees of pointers never seen allocated.", c->unknown_frees);
	render_counter1(b, "spantrace_missed_frees_total",
			"Allocations replaced by a new one at the same pointer before their free was seen.",
			c->missed_frees);
	render_counter1(b, "spantrace_alloc_table_full_total",
			"Allocations not tracked because the kernel's table was full.", c->alloc_table_full);
	render_counter1(b, "spantrace_request_orphans_total",
			"Request probes of requests queued before the tracer attached (not timed).", c->req_orphans);
	render_counter1(b, "spantrace_request_table_full_total",
			"Requests not timed because the kernel's request table was full.", c->req_table_full);
	render_counter1(b, "spantrace_opencl_table_full_total",
			"OpenCL loader calls not recorded because a kernel table was full (--opencl).",
			c->cl_table_full);
	render_counter1(b, "spantrace_agg_table_full_total",
			"Durations not aggregated because the kernel's histogram table was full.",
			c->agg_table_full);
	render_counter1(b, "spantrace_kernel_records_truncated_total",
			"OpenCL kernel records beyond what one cl_batch probe hit reads.",
			c->kernels_truncated);
}

static void render_tail(struct textbuf *b, const struct prom_snapshot *s)
{
	const struct prom_tail *t = &s->tail;
	struct labels l;
	render_counter1(b, "spantrace_tail_spans_written_total",
			"Slow spans written to the JSONL files.", t->spans_written);
	render_counter1(b, "spantrace_tail_spans_dropped_total",
			"Slow spans not written (line over the file cap, or a write error).",
			t->spans_dropped);
	render_counter1(b, "spantrace_tail_bytes_written_total",
			"Bytes written to the JSONL files.", t->bytes_written);
	render_counter1(b, "spantrace_tail_files_deleted_total",
			"JSONL files deleted to honour the total size and retention caps.",
			t->files_deleted);
	family(b, "spantrace_tail_disk_bytes", "gauge", "Bytes the JSONL files occupy now.");
	sample_u64(b, "spantrace_tail_disk_bytes", NULL, t->disk_bytes);
	family(b, "spantrace_tail_threshold_seconds", "gauge",
	       "Duration at or above which a span is captured, by span kind.");
	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++) {
		if (t->slow_ns[k] == UINT64_MAX)
			continue;
		labels_start(&l);
		labels_add(&l, "span", span_kind_name(k));
		sample_double(b, "spantrace_tail_threshold_seconds", &l, (double)t->slow_ns[k] / 1e9);
	}
}

static void render_maps(struct textbuf *b, const struct prom_snapshot *s)
{
	struct labels l;
	family(b, "spantrace_bpf_map_bytes", "gauge", "Memory the tracer's BPF maps take, by map.");
	for (size_t i = 0; i < s->nmaps; i++) {
		labels_start(&l);
		labels_add(&l, "map", s->maps[i].name);
		sample_u64(b, "spantrace_bpf_map_bytes", &l, s->maps[i].bytes);
	}
}

/* ---- sorting for stable output ---- */

static int cmp_u32(uint32_t a, uint32_t b)
{
	return (a > b) - (a < b);
}

static int cmp_agg(const void *pa, const void *pb)
{
	const struct prom_agg *a = pa, *b = pb;
	int c = cmp_u32(a->pid, b->pid);
	if (!c)
		c = cmp_u32(a->kind, b->kind);
	if (!c)
		c = (a->layer > b->layer) - (a->layer < b->layer);
	return c;
}

static int cmp_pool(const void *pa, const void *pb)
{
	const struct prom_pool *a = pa, *b = pb;
	int c = cmp_u32(a->pid, b->pid);
	return c ? c : cmp_u32(a->pool, b->pool);
}

static int cmp_kv(const void *pa, const void *pb)
{
	return cmp_u32(((const struct prom_kv *)pa)->pid, ((const struct prom_kv *)pb)->pid);
}

static int cmp_serving(const void *pa, const void *pb)
{
	return cmp_u32(((const struct prom_serving *)pa)->pid, ((const struct prom_serving *)pb)->pid);
}

static int cmp_proc(const void *pa, const void *pb)
{
	return cmp_u32(((const struct prom_proc *)pa)->pid, ((const struct prom_proc *)pb)->pid);
}

static int cmp_map(const void *pa, const void *pb)
{
	return strcmp(((const struct prom_map_mem *)pa)->name, ((const struct prom_map_mem *)pb)->name);
}

static void snapshot_sort(struct prom_snapshot *s)
{
	if (s->naggs)
		qsort(s->aggs, s->naggs, sizeof(*s->aggs), cmp_agg);
	if (s->npools)
		qsort(s->pools, s->npools, sizeof(*s->pools), cmp_pool);
	if (s->nkvs)
		qsort(s->kvs, s->nkvs, sizeof(*s->kvs), cmp_kv);
	if (s->nservings)
		qsort(s->servings, s->nservings, sizeof(*s->servings), cmp_serving);
	if (s->nprocs)
		qsort(s->procs, s->nprocs, sizeof(*s->procs), cmp_proc);
	if (s->nmaps)
		qsort(s->maps, s->nmaps, sizeof(*s->maps), cmp_map);
}

int prom_render(struct prom_snapshot *s, char **out, size_t *len)
{
	struct textbuf b = { 0 };
	struct labels l;

	snapshot_sort(s);
	family(&b, "spantrace_up", "gauge", "1 while the spantrace daemon is running.");
	labels_start(&l);
	labels_add(&l, "binary", s->binary ? s->binary : "");
	sample_u64(&b, "spantrace_up", &l, 1);

	struct edges *edges = malloc(KIND_SLOTS * sizeof(*edges));
	if (!edges) {
		free(b.data);
		errno = ENOMEM;
		return -1;
	}
	prom_kind_edges(s, edges);
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++)
		render_histograms(&b, s, &families[f], edges);
	free(edges);
	render_span_extras(&b, s);
	render_kind_counter(&b, s, AGG_KIND_TOKEN, "spantrace_tokens_total", "Tokens decoded.");
	render_kind_counter(&b, s, AGG_KIND_REQUEST, "spantrace_requests_total", "Requests completed.");
	render_pools(&b, s);
	render_clmem(&b, s);
	render_kv(&b, s);
	render_serving(&b, s);
	render_procs(&b, s);
	render_losses(&b, s);
	if (s->has_tail)
		render_tail(&b, s);
	render_maps(&b, s);

	if (b.failed || !b.data) {
		free(b.data);
		errno = ENOMEM;
		return -1;
	}
	*out = b.data;
	*len = b.len;
	return 0;
}

void prom_snapshot_free(struct prom_snapshot *s)
{
	free(s->aggs);
	free(s->pools);
	free(s->kvs);
	free(s->clmems);
	free(s->servings);
	free(s->procs);
	free(s->maps);
	free(s->metas);
	s->metas = NULL;
	s->nmetas = 0;
	s->aggs = NULL;
	s->pools = NULL;
	s->kvs = NULL;
	s->clmems = NULL;
	s->servings = NULL;
	s->procs = NULL;
	s->maps = NULL;
	s->naggs = s->npools = s->nkvs = s->nclmems = s->nservings = s->nprocs = s->nmaps = 0;
}
