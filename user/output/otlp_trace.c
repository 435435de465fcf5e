/* otlp_trace.c - engine records as OTLP spans (see otlp_trace.h). */
#include "output/otlp_trace.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include "spantrace/probes.h"

#define MAX_THREADS 1024

enum id_role { ROLE_REQUEST = 1, ROLE_TOKEN, ROLE_SPAN, ROLE_STEP, ROLE_KERNEL, ROLE_EMIT, ROLE_TRACE, ROLE_HTTP };

/* Per engine thread: its outermost spans finished so far (the epoch that
 * tells repeated spans apart), and per process its last step. */
struct thread_slot {
	__u32 pid, tid;
	uint64_t epoch;
	uint64_t last_step;
};

struct otlp_trace {
	struct otlp_exporter *x;
	const struct wall_clock *clk;
	char host[256];
	uint64_t salt;
	json_object *spans;       /* the batch being built (NULL after a failed allocation) */
	uint64_t built;
	int failed;               /* an allocation for the span being built failed */
	struct thread_slot threads[MAX_THREADS];
	size_t nthreads;
};

/* ---- ids ---- */

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 29;
	return h ? h : 1;   /* an all-zero id is invalid in OTLP */
}

static uint64_t hash5(const struct otlp_trace *t, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	return mix(mix(mix(mix(mix(t->salt, a), b), c), d), e);
}

/* Checked json-c builders (otlp.h): span_add drops, and counts, a span
 * whose building failed. */
static void add(struct otlp_trace *t, json_object *o, const char *key, json_object *v)
{
	otlp_json_add(&t->failed, o, key, v);
}

static void push(struct otlp_trace *t, json_object *array, json_object *v)
{
	otlp_json_push(&t->failed, array, v);
}

static void put_hex(struct otlp_trace *t, json_object *o, const char *key, uint64_t hi, uint64_t lo, int bytes)
{
	char buf[33];

	if (bytes == 16)
		snprintf(buf, sizeof(buf), "%016llx%016llx", (unsigned long long)hi, (unsigned long long)lo);
	else
		snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)lo);
	add(t, o, key, json_object_new_string(buf));
}

/* A trace: one per (pid, request), or per (pid, step) with is_step. */
struct trace_id { uint64_t hi, lo; };

static struct trace_id trace_of(const struct otlp_trace *t, __u32 pid, uint64_t key, int is_step)
{
	return (struct trace_id){ hash5(t, ROLE_TRACE, pid, key, is_step, 1),
				  hash5(t, ROLE_TRACE, pid, key, is_step, 2) };
}

static uint64_t request_id(const struct otlp_trace *t, __u32 pid, uint64_t req)
{
	return hash5(t, ROLE_REQUEST, pid, req, 0, 0);
}

static uint64_t token_id(const struct otlp_trace *t, __u32 pid, uint64_t req, __u32 pos)
{
	return hash5(t, ROLE_TOKEN, pid, req, pos, 0);
}

static uint64_t step_id(const struct otlp_trace *t, __u32 pid, uint64_t step)
{
	return hash5(t, ROLE_STEP, pid, step, 0, 0);
}

static uint64_t span_id(const struct otlp_trace *t, const struct thread_slot *s, unsigned kind, int32_t layer,
			unsigned depth)
{
	return mix(hash5(t, ROLE_SPAN, s->pid, s->tid, s->epoch, kind), ((uint64_t)(uint32_t)layer << 8) | depth);
}

static struct thread_slot *thread_get(struct otlp_trace *t, __u32 pid, __u32 tid)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].pid == pid && t->threads[i].tid == tid)
			return &t->threads[i];
	if (t->nthreads == MAX_THREADS)   /* reuse the oldest: ids stay unique by epoch */
		t->nthreads = 0;
	t->threads[t->nthreads] = (struct thread_slot){ .pid = pid, .tid = tid };
	return &t->threads[t->nthreads++];
}

/* The process's last step, from any of its threads' slots. */
static struct thread_slot *pid_slot(struct otlp_trace *t, __u32 pid)
{
	return thread_get(t, pid, 0);   /* tid 0 never fires probes: the process's own slot */
}

/* ---- building spans ---- */

/* {"key": key, "value": {type: v}} */
static void attr(struct otlp_trace *t, json_object *attrs, const char *key, const char *type, json_object *v)
{
	json_object *a = json_object_new_object(), *val = json_object_new_object();

	add(t, val, type, v);
	add(t, a, "key", json_object_new_string(key));
	add(t, a, "value", val);
	push(t, attrs, a);
}

static void attr_int(struct otlp_trace *t, json_object *attrs, const char *key, int64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%lld", (long long)v);   /* int64 is a string in OTLP JSON */
	attr(t, attrs, key, "intValue", json_object_new_string(buf));
}

static void attr_str(struct otlp_trace *t, json_object *attrs, const char *key, const char *v)
{
	attr(t, attrs, key, "stringValue", json_object_new_string(v));
}

static void put_time(struct otlp_trace *t, json_object *o, const char *key, uint64_t unix_ns)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)unix_ns);
	add(t, o, key, json_object_new_string(buf));
}

/* A span with its ids and times (CLOCK_MONOTONIC begin + duration); its
 * attributes array is returned through *attrs. */
static json_object *span_new(struct otlp_trace *t, const char *name, struct trace_id tr, uint64_t id,
			     uint64_t parent, uint64_t mono_begin, uint64_t dur, json_object **attrs)
{
	json_object *s = json_object_new_object();
	uint64_t begin = (uint64_t)((int64_t)mono_begin + t->clk->mono_to_wall);

	t->failed = !s;
	put_hex(t, s, "traceId", tr.hi, tr.lo, 16);
	put_hex(t, s, "spanId", 0, id, 8);
	if (parent)
		put_hex(t, s, "parentSpanId", 0, parent, 8);
	add(t, s, "name", json_object_new_string(name));
	add(t, s, "kind", json_object_new_int(parent ? 1 : 2)); /* INTERNAL, or SERVER at a root */
	put_time(t, s, "startTimeUnixNano", begin);
	put_time(t, s, "endTimeUnixNano", begin + dur);
	*attrs = json_object_new_array();
	json_object_get(*attrs);   /* ours until span_add, even if adding it fails */
	add(t, s, "attributes", *attrs);
	return s;
}

/* A span whose building failed is dropped and counted (a NULL body is
 * counted as dropped by the exporter). */
static void span_add(struct otlp_trace *t, json_object *s, json_object *attrs)
{
	json_object_put(attrs);
	if (!t->spans)
		t->spans = json_object_new_array();
	if (t->failed || !t->spans || json_object_array_add(t->spans, s)) {
		json_object_put(s);
		t->failed = 0;
		otlp_enqueue(t->x, NULL, 1);
		return;
	}
	t->built++;
	if (json_object_array_length(t->spans) >= OTLP_BATCH_SPANS)
		otlp_trace_flush(t);
}

static void common_attrs(struct otlp_trace *t, json_object *attrs, const struct event_header *h)
{
	attr_int(t, attrs, "process.pid", h->pid);
	attr_int(t, attrs, "thread.id", h->tid);
}

/* ---- the handlers ---- */

/* The trace and the outermost parent of work on a thread: the request's
 * token, or (serving engine: no request in force) the step in progress,
 * which is the one after the process's last finished step. */
static void work_context(struct otlp_trace *t, __u32 pid, uint64_t req, __u32 pos, struct trace_id *tr,
			 uint64_t *outer)
{
	uint64_t next_step = pid_slot(t, pid)->last_step + 1;

	if (req) {
		*tr = trace_of(t, pid, req, 0);
		*outer = token_id(t, pid, req, pos);
	} else {
		*tr = trace_of(t, pid, next_step, 1);
		*outer = step_id(t, pid, next_step);
	}
}

/* The engine's load and unload are no request's work nor a step's: such
 * a span tree (its outermost span one of these kinds, and its children)
 * is a trace of its own, rooted at that span. */
static int own_trace(unsigned kind)
{
	return kind == SPAN_MODEL_LOAD || kind == SPAN_UNLOAD || kind == SPAN_CTX_INIT;
}

static int on_span(void *ctx, const struct span_event *e)
{
	struct otlp_trace *t = ctx;
	struct trace_id tr;
	uint64_t outer, parent, id;
	json_object *s, *attrs;
	struct thread_slot *th = thread_get(t, e->h.pid, e->h.tid);

	if ((e->depth == 0 && own_trace(e->kind)) || (e->depth == 1 && own_trace(e->parent_kind))) {
		/* the thread's epoch names its outermost span until that ends */
		tr = trace_of(t, e->h.pid, ((uint64_t)e->h.tid << 32) | th->epoch, 2);
		outer = 0;
	} else {
		work_context(t, e->h.pid, e->req, e->pos, &tr, &outer);
	}
	id = span_id(t, th, e->kind, e->layer, e->depth);
	parent = e->depth == 0 || e->parent_kind >= SPAN_KIND_COUNT
			 ? outer : span_id(t, th, e->parent_kind, e->parent_layer, e->depth - 1);
	if (e->depth == 0)
		th->epoch++;   /* the next outermost span and its children get new ids */
	s = span_new(t, span_kind_name(e->kind), tr, id, parent, e->h.ts_ns, e->dur_ns, &attrs);
	add(t, s, "kind", json_object_new_int(1));
	common_attrs(t, attrs, &e->h);
	if (e->layer >= 0)
		attr_int(t, attrs, "spantrace.layer", e->layer);
	attr_int(t, attrs, "spantrace.depth", e->depth);
	if (e->req) {
		attr_int(t, attrs, "spantrace.request", (int64_t)e->req);
		attr_int(t, attrs, "spantrace.position", e->pos);
	}
	/* the span's times are the host's; its kernels' time is the device's */
	attr_str(t, attrs, "spantrace.clock", "host");
	if (e->device_ns == DEVICE_NS_LOST)
		attr(t, attrs, "spantrace.device_lost", "boolValue", json_object_new_boolean(1));
	else if (e->device_ns != DEVICE_NS_NONE)
		attr_int(t, attrs, "spantrace.device_ns", (int64_t)e->device_ns);
	if (e->kind == SPAN_FORWARD)
		attr_str(t, attrs, "spantrace.launch", span_launch_name(span_launch_of(e->flags)));
	if (e->flags & SPAN_F_BATCH) {   /* another engine's forward: its batch */
		attr_int(t, attrs, "spantrace.batch.tokens", e->n_tokens);
		attr_int(t, attrs, "spantrace.batch.sequences", e->n_seqs);
		attr_int(t, attrs, "spantrace.batch.outputs", e->n_outputs);
	}
	span_add(t, s, attrs);
	return 0;
}

static int on_token(void *ctx, const struct token_event *e)
{
	struct otlp_trace *t = ctx;
	json_object *s, *attrs;

	s = span_new(t, "token", trace_of(t, e->h.pid, e->req, 0), token_id(t, e->h.pid, e->req, e->pos),
		     request_id(t, e->h.pid, e->req), e->h.ts_ns, e->dur_ns, &attrs);
	common_attrs(t, attrs, &e->h);
	attr_int(t, attrs, "spantrace.request", (int64_t)e->req);
	attr_int(t, attrs, "spantrace.position", e->pos);
	if (events_capture_tokens()) {
		attr_int(t, attrs, "spantrace.token_in", e->token_in);
		attr_int(t, attrs, "spantrace.token_out", e->token_out);
	}
	span_add(t, s, attrs);
	return 0;
}

/* An HTTP request's SERVER span: its id, from what both its http record
 * and its joined request record know (the arrival is the request's ts). */
static uint64_t http_span_id(struct otlp_trace *t, uint32_t pid, uint64_t sock, uint32_t seq, uint64_t start_ns)
{
	return hash5(t, ROLE_HTTP, pid, sock, seq, start_ns);
}

static int on_request(void *ctx, const struct request_event *e)
{
	struct otlp_trace *t = ctx;
	json_object *s, *attrs;
	/* joined (core/reqjoin.h): inside its HTTP request's SERVER span, when
	 * that span went out after it knew the request (not REQ_F_HTTP_FIRST) */
	uint64_t parent = e->from == REQ_FROM_SOCKET && !(e->flags & REQ_F_HTTP_FIRST) ?
		http_span_id(t, e->h.pid, e->http_sock, e->http_seq, e->h.ts_ns) : 0;

	s = span_new(t, "request", trace_of(t, e->h.pid, e->req, 0), request_id(t, e->h.pid, e->req), parent,
		     e->h.ts_ns, e->dur_ns, &attrs);
	common_attrs(t, attrs, &e->h);
	attr_str(t, attrs, "spantrace.from", e->from == REQ_FROM_SOCKET ? "socket" : "engine");
	if (request_link_name(e))   /* a guess, or a link that failed: its times say whose clock */
		attr_str(t, attrs, "spantrace.link", request_link_name(e));
	if (e->from == REQ_FROM_SOCKET) {
		attr_int(t, attrs, "spantrace.engine.ttft_ns", (int64_t)e->engine_ttft_ns);
		attr_int(t, attrs, "spantrace.engine.duration_ns", (int64_t)e->engine_dur_ns);
	}
	attr_int(t, attrs, "spantrace.request", (int64_t)e->req);
	attr_int(t, attrs, "gen_ai.usage.input_tokens", e->prompt_tokens);
	attr_int(t, attrs, "gen_ai.usage.output_tokens", e->generated_tokens);
	if (e->ttft_ns)
		attr_int(t, attrs, "spantrace.ttft_ns", (int64_t)e->ttft_ns);
	if (e->queue_ns)
		attr_int(t, attrs, "spantrace.queue_ns", (int64_t)e->queue_ns);
	if (e->preemptions)
		attr_int(t, attrs, "spantrace.preemptions", e->preemptions);
	if (e->finish_reason < FINISH_REASON_COUNT)
		attr_str(t, attrs, "gen_ai.response.finish_reasons", finish_reason_name(e->finish_reason));
	span_add(t, s, attrs);
	return 0;
}

static int on_step(void *ctx, const struct step_event *e)
{
	struct otlp_trace *t = ctx;
	json_object *s, *attrs;

	pid_slot(t, e->h.pid)->last_step = e->step;
	s = span_new(t, "step", trace_of(t, e->h.pid, e->step, 1), step_id(t, e->h.pid, e->step), 0, e->h.ts_ns,
		     e->dur_ns, &attrs);
	add(t, s, "kind", json_object_new_int(1));
	common_attrs(t, attrs, &e->h);
	attr_int(t, attrs, "spantrace.step", (int64_t)e->step);
	attr_int(t, attrs, "spantrace.sequences", e->nseqs);
	attr_int(t, attrs, "spantrace.prefill_tokens", e->prefill_tokens);
	attr_int(t, attrs, "spantrace.decode_tokens", e->decode_tokens);
	attr_int(t, attrs, "spantrace.kv_used_blocks", e->kv_used_blocks);
	span_add(t, s, attrs);
	return 0;
}

/* A serving token: from the request's previous token (or its queueing) to
 * this one, linked to the step it came out of. */
static int on_emit(void *ctx, const struct emit_event *e)
{
	struct otlp_trace *t = ctx;
	json_object *s, *attrs, *links, *link;
	struct trace_id st = trace_of(t, e->h.pid, e->step, 1);
	uint64_t gap = e->gap_ns < e->h.ts_ns ? e->gap_ns : 0;

	if (!e->step)   /* the single-stream CLI: its token records are the token spans */
		return 0;

	s = span_new(t, "token", trace_of(t, e->h.pid, e->req, 0), hash5(t, ROLE_EMIT, e->h.pid, e->req, e->pos, 0),
		     request_id(t, e->h.pid, e->req), e->h.ts_ns - gap, gap, &attrs);
	common_attrs(t, attrs, &e->h);
	attr_int(t, attrs, "spantrace.request", (int64_t)e->req);
	attr_int(t, attrs, "spantrace.position", e->pos);
	if (events_capture_tokens())
		attr_int(t, attrs, "spantrace.token_out", e->token_id);
	attr_int(t, attrs, "spantrace.step", (int64_t)e->step);
	if (e->step) {
		links = json_object_new_array();
		link = json_object_new_object();
		put_hex(t, link, "traceId", st.hi, st.lo, 16);
		put_hex(t, link, "spanId", 0, step_id(t, e->h.pid, e->step), 8);
		push(t, links, link);
		add(t, s, "links", links);
	}
	span_add(t, s, attrs);
	return 0;
}

/* An OpenCL kernel, timed by the device: PoCL's clock is the host's
 * CLOCK_MONOTONIC_RAW, which raw_to_wall puts on the wall clock. */
static int on_kernel(void *ctx, const struct kernel_event *e)
{
	struct otlp_trace *t = ctx;
	struct trace_id tr;
	uint64_t outer, dur = e->end_ns > e->start_ns ? e->end_ns - e->start_ns : 0;
	int64_t mono_start = (int64_t)e->start_ns + t->clk->raw_to_wall - t->clk->mono_to_wall;
	json_object *s, *attrs;
	char name[64];

	work_context(t, e->h.pid, e->req, e->pos, &tr, &outer);
	snprintf(name, sizeof(name), "opencl %s", cl_kernel_name(e->kernel_id));
	s = span_new(t, name, tr, hash5(t, ROLE_KERNEL, e->h.pid, e->h.ts_ns, e->index, e->kernel_id), outer,
		     (uint64_t)mono_start, dur, &attrs);
	add(t, s, "kind", json_object_new_int(1));
	common_attrs(t, attrs, &e->h);
	if (e->layer >= 0)
		attr_int(t, attrs, "spantrace.layer", e->layer);
	attr_int(t, attrs, "spantrace.queue", e->queue);
	attr_int(t, attrs, "spantrace.index", e->index);
	attr_int(t, attrs, "spantrace.device.queued_ns", (int64_t)e->queued_ns);
	attr_int(t, attrs, "spantrace.device.submit_ns", (int64_t)e->submit_ns);
	attr_int(t, attrs, "spantrace.device.start_ns", (int64_t)e->start_ns);
	attr_int(t, attrs, "spantrace.device.end_ns", (int64_t)e->end_ns);
	span_add(t, s, attrs);
	return 0;
}

/* --http: a request as the server's socket saw it, a SERVER span of a trace
 * of its own, named by its method (OpenTelemetry's HTTP conventions: the
 * route is not known here, and a path is no route), with their attributes. */
static int on_http(void *ctx, const struct http_event *e)
{
	struct otlp_trace *t = ctx;
	uint64_t first = http_first_token_ns(e);
	char method[HTTP_METHOD_LEN + 1], path[HTTP_PATH_LEN + 1];
	struct trace_id tr = { hash5(t, ROLE_HTTP, e->h.pid, e->sock, e->seq, 1),
			       hash5(t, ROLE_HTTP, e->h.pid, e->sock, e->seq, 2) };
	json_object *s, *attrs;

	if (e->req)   /* the engine's request it became: one trace (core/reqjoin.h) */
		tr = trace_of(t, e->h.pid, e->req, 0);
	snprintf(method, sizeof(method), "%.*s", (int)sizeof(e->method), e->method);
	snprintf(path, sizeof(path), "%.*s", (int)sizeof(e->path), e->path);
	s = span_new(t, method, tr, http_span_id(t, e->h.pid, e->sock, e->seq, e->start_ns), 0,
		     e->start_ns, e->end_ns - e->start_ns, &attrs);   /* a root: SERVER */
	common_attrs(t, attrs, &e->h);
	attr_str(t, attrs, "http.request.method", method);
	attr_str(t, attrs, "url.path", path);
	if (e->status)
		attr_int(t, attrs, "http.response.status_code", e->status);
	attr_str(t, attrs, "network.transport", "tcp");
	attr_str(t, attrs, "spantrace.from", "socket");
	if (first)
		attr_int(t, attrs, "spantrace.ttft_ns", (int64_t)(first - e->start_ns));
	attr_int(t, attrs, "spantrace.http.events", e->events);
	attr_str(t, attrs, "spantrace.http.end", http_end_name(e->end));
	if (e->req) {
		attr_int(t, attrs, "gen_ai.usage.input_tokens", e->prompt_tokens);
		attr_int(t, attrs, "gen_ai.usage.output_tokens", e->generated_tokens);
	}
	span_add(t, s, attrs);
	return 0;
}

const struct event_handlers otlp_trace_handlers = {
	.span = on_span,
	.token = on_token,
	.request = on_request,
	.kernel = on_kernel,
	.step = on_step,
	.emit = on_emit,
	.http = on_http,
};

/* ---- batches ---- */

/* The export request around a batch; NULL if an allocation failed (the
 * batch is freed with it). */
static json_object *resource_spans(struct otlp_trace *t, json_object *spans)
{
	json_object *req = json_object_new_object(), *rss = json_object_new_array(),
		    *rs = json_object_new_object(), *res = json_object_new_object(),
		    *attrs = json_object_new_array(), *scopes = json_object_new_array(),
		    *scope_spans = json_object_new_object(), *scope = json_object_new_object();

	t->failed = 0;
	json_object_get(spans);   /* ours until the end, whatever fails */
	attr_str(t, attrs, "service.name", "infer");
	attr_str(t, attrs, "host.name", t->host);
	attr_str(t, attrs, "telemetry.sdk.name", "spantrace");
	add(t, res, "attributes", attrs);
	add(t, rs, "resource", res);
	add(t, scope, "name", json_object_new_string("spantrace"));
	add(t, scope_spans, "scope", scope);
	add(t, scope_spans, "spans", spans);
	push(t, scopes, scope_spans);
	add(t, rs, "scopeSpans", scopes);
	push(t, rss, rs);
	add(t, req, "resourceSpans", rss);
	json_object_put(spans);
	if (t->failed) {
		t->failed = 0;
		json_object_put(req);
		return NULL;
	}
	return req;
}

void otlp_trace_flush(struct otlp_trace *t)
{
	size_t n = t->spans ? json_object_array_length(t->spans) : 0;
	json_object *req;
	const char *text;

	if (!n)
		return;
	req = resource_spans(t, t->spans);
	text = req ? json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN) : NULL;
	otlp_enqueue(t->x, text ? strdup(text) : NULL, n);   /* a NULL body is counted as dropped */
	json_object_put(req);
	t->spans = json_object_new_array();   /* NULL: span_add tries again */
}

struct otlp_trace *otlp_trace_new(struct otlp_exporter *x, const struct wall_clock *clk, const char *host)
{
	struct otlp_trace *t = calloc(1, sizeof(*t));

	if (!t || !(t->spans = json_object_new_array())) {
		free(t);
		return NULL;
	}
	t->x = x;
	t->clk = clk;
	snprintf(t->host, sizeof(t->host), "%s", host);
	if (getrandom(&t->salt, sizeof(t->salt), 0) != sizeof(t->salt))
		t->salt = (uint64_t)clock_read_ns(CLOCK_REALTIME);
	return t;
}

void otlp_trace_free(struct otlp_trace *t)
{
	if (!t)
		return;
	json_object_put(t->spans);
	free(t);
}

uint64_t otlp_trace_spans(const struct otlp_trace *t)
{
	return t->built;
}
