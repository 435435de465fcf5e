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
	labels_add(l, "binary", s->binary ? s->binary : "");
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

enum agg_class { CLASS_SPAN, CLASS_TOKEN, CLASS_REQUEST, CLASS_KERNEL, CLASS_NONE };

static enum agg_class class_of(uint32_t kind)
{
	if (kind < SPAN_KIND_COUNT)
		return CLASS_SPAN;
	if (kind == AGG_KIND_TOKEN)
		return CLASS_TOKEN;
	if (kind == AGG_KIND_REQUEST)
		return CLASS_REQUEST;
	if (kind >= AGG_KIND_KERNEL_BASE && kind < AGG_KIND_KERNEL_BASE + KERNEL_COUNT)
		return CLASS_KERNEL;
	return CLASS_NONE;
}

static const struct {
	const char *hist, *hist_help;
} class_info[] = {
	[CLASS_SPAN] = { "spantrace_span_duration_seconds",
			 "Engine span durations (span_begin/op_begin to end) by span kind and layer." },
	[CLASS_TOKEN] = { "spantrace_token_duration_seconds",
			  "Per-token decode time (token_begin to token_end)." },
	[CLASS_REQUEST] = { "spantrace_request_duration_seconds",
			    "Request durations (request_begin to request_end)." },
	[CLASS_KERNEL] = { "spantrace_kernel_duration_seconds",
			   "OpenCL kernel device time (profiling end - start) by kernel and layer." },
};

static void agg_labels(struct labels *l, const struct prom_snapshot *s, const struct prom_agg *a)
{
	labels_start(l);
	switch (class_of(a->kind)) {
	case CLASS_SPAN:
		labels_add(l, "span", span_kind_name(a->kind));
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
struct edges {
	unsigned lo, hi;     /* bucket range; lo > hi: none yet */
};

#define KIND_SLOTS (AGG_KIND_KERNEL_BASE + KERNEL_COUNT)

static void kind_edges(const struct prom_snapshot *s, struct edges e[KIND_SLOTS])
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

static void histogram_series(struct textbuf *b, const char *name, const struct labels *l,
			     const struct prom_agg *a, const struct edges *e)
{
	char le[40], sum[40];
	uint64_t cum = 0, total = 0;

	for (unsigned k = 0; k < HIST_BUCKETS; k++)
		total += a->buckets[k];
	for (unsigned k = 0; e && k <= e->hi && k < HIST_BUCKETS; k++) {
		cum += a->buckets[k];
		if (k < e->lo)
			continue;
		fmt_double(le, sizeof(le), prom_bucket_le_seconds(k));
		out_printf(b, "%s_bucket{%s,le=\"%s\"} %" PRIu64 "\n", name, l->text, le, cum);
	}
	/* _count is the +Inf bucket, as the format requires. */
	out_printf(b, "%s_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n", name, l->text, total);
	fmt_double(sum, sizeof(sum), (double)a->sum_ns / 1e9);
	out_printf(b, "%s_sum{%s} %s\n", name, l->text, sum);
	out_printf(b, "%s_count{%s} %" PRIu64 "\n", name, l->text, total);
}

static void render_histograms(struct textbuf *b, const struct prom_snapshot *s, enum agg_class c,
			      const struct edges *e)
{
	struct labels l;
	family(b, class_info[c].hist, "histogram", class_info[c].hist_help);
	for (size_t i = 0; i < s->naggs; i++) {
		const struct prom_agg *a = &s->aggs[i];
		if (class_of(a->kind) != c)
			continue;
		agg_labels(&l, s, a);
		histogram_series(b, class_info[c].hist, &l, a, a->kind < KIND_SLOTS ? &e[a->kind] : NULL);
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
static void render_class_counter(struct textbuf *b, const struct prom_snapshot *s,
				 enum agg_class c, const char *name, const char *help)
{
	struct labels l;
	family(b, name, "counter", help);
	for (size_t i = 0; i < s->naggs; i++) {
		if (class_of(s->aggs[i].kind) != c)
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
	kind_edges(s, edges);
	for (enum agg_class c = CLASS_SPAN; c < CLASS_NONE; c++)
		render_histograms(&b, s, c, edges);
	free(edges);
	render_span_extras(&b, s);
	render_class_counter(&b, s, CLASS_TOKEN, "spantrace_tokens_total", "Tokens decoded.");
	render_class_counter(&b, s, CLASS_REQUEST, "spantrace_requests_total", "Requests completed.");
	render_pools(&b, s);
	render_kv(&b, s);
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
	free(s->procs);
	free(s->maps);
	s->aggs = NULL;
	s->pools = NULL;
	s->kvs = NULL;
	s->procs = NULL;
	s->maps = NULL;
	s->naggs = s->npools = s->nkvs = s->nprocs = s->nmaps = 0;
}
