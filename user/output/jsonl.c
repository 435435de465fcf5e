/* jsonl.c - fixed-schema JSONL lines for ring-buffer records (see jsonl.h). */
#include "output/jsonl.h"
#include <string.h>
#include <unistd.h>

/* {"type":…,"ts_ns":…,"pid":…,"tid":…,"cpu":…  then the type's fields, then }.
 * A failed write is reported once (-1); the records after it are dropped
 * quietly, so the tracer can still consume and count everything. */
static int line(struct outbuf *ob, const struct event_header *h,
		void (*fields)(struct outbuf *ob, const void *e), const void *e)
{
	if (ob->error)
		return 0;
	if (ob_begin(ob))
		return -1;
	ob_lit(ob, "{\"type\":\"");
	ob_lit(ob, event_type_name(h->type));
	ob_lit(ob, "\",\"ts_ns\":");
	ob_u64(ob, h->ts_ns);
	ob_key(ob, "pid");
	ob_u64(ob, h->pid);
	ob_key(ob, "tid");
	ob_u64(ob, h->tid);
	ob_key(ob, "cpu");
	ob_u64(ob, h->cpu);
	fields(ob, e);
	ob_lit(ob, "}");
	ob_end(ob);
	return 0;
}

static void span_fields(struct outbuf *ob, const void *rec)
{
	const struct span_event *e = rec;

	ob_key(ob, "dur_ns");
	ob_u64(ob, e->dur_ns);
	ob_key_name(ob, "name", span_kind_name(e->kind));
	ob_key(ob, "layer");
	ob_s64(ob, e->layer);
	ob_key(ob, "depth");
	ob_u64(ob, e->depth);
	if (e->parent_kind != SPAN_KIND_COUNT) {
		ob_key_name(ob, "parent", span_kind_name(e->parent_kind));
	} else {
		ob_key(ob, "parent");
		ob_lit(ob, "null");
	}
	ob_key(ob, "parent_layer");
	ob_s64(ob, e->parent_layer);
	ob_key(ob, "req");
	ob_u64(ob, e->req);
	ob_key(ob, "pos");
	ob_u64(ob, e->pos);
	ob_key(ob, "mismatch");
	ob_lit(ob, (e->flags & SPAN_F_MISMATCH) ? "true" : "false");
	/* dur_ns is the host's clock; device_ns the device's, for spans that
	 * launched kernels (null: their records were lost) */
	if (e->device_ns == DEVICE_NS_LOST) {
		ob_key(ob, "device_ns");
		ob_lit(ob, "null");
	} else if (e->device_ns != DEVICE_NS_NONE) {
		ob_key(ob, "device_ns");
		ob_u64(ob, e->device_ns);
	}
	if (e->kind == SPAN_FORWARD && span_launch_of(e->flags) != LAUNCH_UNKNOWN)
		ob_key_name(ob, "launch", span_launch_name(span_launch_of(e->flags)));
	/* another engine's forward: its batch */
	if (e->flags & SPAN_F_BATCH) {
		ob_key(ob, "n_tokens");
		ob_u64(ob, e->n_tokens);
		ob_key(ob, "n_seqs");
		ob_u64(ob, e->n_seqs);
		ob_key(ob, "n_outputs");
		ob_u64(ob, e->n_outputs);
	}
	/* perf counter deltas (record --perf, profile), in the order of the
	 * session record's "perf_counters" names */
	if (e->ncounters > 0) {
		ob_key(ob, "counters");
		ob_lit(ob, "[");
		for (unsigned i = 0; i < e->ncounters; i++) {
			if (i)
				ob_lit(ob, ",");
			ob_u64(ob, e->counters[i]);
		}
		ob_lit(ob, "]");
	}
}

static void token_fields(struct outbuf *ob, const void *rec)
{
	const struct token_event *e = rec;

	ob_key(ob, "dur_ns");
	ob_u64(ob, e->dur_ns);
	ob_key(ob, "req");
	ob_u64(ob, e->req);
	ob_key(ob, "pos");
	ob_u64(ob, e->pos);
	if (events_capture_tokens()) {
		ob_key(ob, "token_in");
		ob_u64(ob, e->token_in);
		ob_key(ob, "token_out");
		ob_u64(ob, e->token_out);
	}
}

static void request_fields(struct outbuf *ob, const void *rec)
{
	const struct request_event *e = rec;

	ob_key(ob, "dur_ns");
	ob_u64(ob, e->dur_ns);
	ob_key(ob, "req");
	ob_u64(ob, e->req);
	ob_key(ob, "prompt_tokens");
	ob_u64(ob, e->prompt_tokens);
	ob_key(ob, "generated_tokens");
	ob_u64(ob, e->generated_tokens);
	ob_key(ob, "queue_ns");
	ob_u64(ob, e->queue_ns);
	ob_key(ob, "ttft_ns");
	ob_u64(ob, e->ttft_ns);
	ob_key(ob, "prefill_ns");
	ob_u64(ob, e->prefill_ns);
	ob_key(ob, "decode_ns");
	ob_u64(ob, e->decode_ns);
	ob_key(ob, "itl_p50_ns");
	ob_u64(ob, e->itl_p50_ns);
	ob_key(ob, "itl_p95_ns");
	ob_u64(ob, e->itl_p95_ns);
	ob_key(ob, "itl_max_ns");
	ob_u64(ob, e->itl_max_ns);
	ob_key(ob, "itl_count");
	ob_u64(ob, e->itl_count);
	ob_key(ob, "preemptions");
	ob_u64(ob, e->preemptions);
	if (e->finish_reason < FINISH_REASON_COUNT) {
		ob_key_name(ob, "finish_reason", finish_reason_name(e->finish_reason));
	} else {
		ob_key(ob, "finish_reason");
		ob_lit(ob, "null");
	}
	ob_key(ob, "served");
	ob_lit(ob, e->flags & REQ_F_SERVED ? "true" : "false");
	ob_key_name(ob, "clock", "host");
	ob_key_name(ob, "from", e->from == REQ_FROM_SOCKET ? "socket" : "engine");
	if (request_link_name(e))   /* how its link was found, if not plainly */
		ob_key_name(ob, "link", request_link_name(e));
	if (e->from != REQ_FROM_SOCKET)
		return;
	/* joined with its HTTP request (core/reqjoin.h): ts, ttft and dur are the socket's */
	ob_key(ob, "engine_ts_ns");
	ob_u64(ob, e->engine_ts_ns);
	ob_key(ob, "engine_ttft_ns");
	ob_u64(ob, e->engine_ttft_ns);
	ob_key(ob, "engine_dur_ns");
	ob_u64(ob, e->engine_dur_ns);
	ob_key(ob, "before_engine_ns");
	ob_u64(ob, e->engine_ts_ns - e->h.ts_ns);
	ob_key(ob, "status");
	ob_u64(ob, e->http_status);
	ob_key(ob, "events");
	ob_u64(ob, e->http_events);
	ob_key(ob, "conn");
	ob_u64(ob, http_conn_id(e->http_sock));
	ob_key(ob, "http_seq");
	ob_u64(ob, e->http_seq);
}

static void step_fields(struct outbuf *ob, const void *rec)
{
	const struct step_event *e = rec;

	ob_key(ob, "dur_ns");
	ob_u64(ob, e->dur_ns);
	ob_key(ob, "step");
	ob_u64(ob, e->step);
	ob_key(ob, "nseqs");
	ob_u64(ob, e->nseqs);
	ob_key(ob, "prefill_tokens");
	ob_u64(ob, e->prefill_tokens);
	ob_key(ob, "decode_tokens");
	ob_u64(ob, e->decode_tokens);
	ob_key(ob, "kv_used_blocks");
	ob_u64(ob, e->kv_used_blocks);
}

static void emit_fields(struct outbuf *ob, const void *rec)
{
	const struct emit_event *e = rec;

	ob_key(ob, "req");
	ob_u64(ob, e->req);
	ob_key(ob, "pos");
	ob_u64(ob, e->pos);
	if (events_capture_tokens()) {
		ob_key(ob, "token_id");
		ob_u64(ob, e->token_id);
	}
	ob_key(ob, "gap_ns");
	ob_u64(ob, e->gap_ns);
	ob_key(ob, "first");
	ob_lit(ob, e->first ? "true" : "false");
	ob_key(ob, "step");
	ob_u64(ob, e->step);
}

static const char *const req_state_names[REQ_STATE_COUNT] = { "queued", "admitted", "preempted" };

static void req_state_fields(struct outbuf *ob, const void *rec)
{
	const struct req_state_event *e = rec;

	ob_key(ob, "req");
	ob_u64(ob, e->req);
	ob_key_name(ob, "state", req_state_names[e->state]);
	/* a and b, named for the state they come with */
	ob_key(ob, e->state == REQ_QUEUED ? "prompt_tokens" : e->state == REQ_ADMITTED ? "prefill_tokens"
											  : "generated_tokens");
	ob_u64(ob, e->a);
	ob_key(ob, e->state == REQ_QUEUED ? "max_tokens" : e->state == REQ_ADMITTED ? "generated_tokens"
										       : "blocks_freed");
	ob_u64(ob, e->b);
	ob_key(ob, "running");
	ob_u64(ob, e->running);
	ob_key(ob, "waiting");
	ob_u64(ob, e->waiting);
}

static void alloc_fields(struct outbuf *ob, const void *rec)
{
	const struct alloc_event *e = rec;

	ob_key_name(ob, "pool", pool_name(e->pool));
	ob_key(ob, "ptr");
	ob_u64(ob, e->ptr);
	ob_key(ob, "bytes");
	ob_u64(ob, e->bytes);
	ob_key(ob, "reserved");
	ob_u64(ob, e->reserved);
	ob_key(ob, "live_bytes");
	ob_u64(ob, e->live_bytes);
	ob_key(ob, "peak_bytes");
	ob_u64(ob, e->peak_bytes);
	ob_key(ob, "reserved_bytes");
	ob_u64(ob, e->reserved_bytes);
	if (e->h.type == EV_FREE) {
		ob_key(ob, "unknown");
		ob_lit(ob, e->unknown ? "true" : "false");
	} else if (e->unknown == 2) {
		ob_key(ob, "at_attach");   /* made before the attach, from a state dump */
		ob_lit(ob, "true");
	}
}

static void tensor_fields(struct outbuf *ob, const void *rec)
{
	const struct tensor_event *e = rec;

	ob_key(ob, "name");
	ob_jstr(ob, e->name, sizeof(e->name));
	ob_key(ob, "shape");
	ob_lit(ob, "[");
	for (int i = 0; i < 4 && e->shape[i]; i++) {
		if (i)
			ob_lit(ob, ",");
		ob_u64(ob, e->shape[i]);
	}
	ob_lit(ob, "]");
	ob_key(ob, "bytes");
	ob_u64(ob, e->bytes);
	ob_key(ob, "dtype");
	ob_jstr(ob, tensor_dtype_name(e->dtype), 16);
	ob_key_name(ob, "pool", pool_name(e->pool));
	ob_key_name(ob, "device", e->device ? "opencl" : "host");
}

/* A probe_generic record: its row's name, and each argument by the row's
 * names (s32 arguments signed). */
static void probe_fields(struct outbuf *ob, const void *rec)
{
	const struct probe_event *e = rec;
	const struct probe_row *row = &probe_rows[e->probe];

	ob_key_name(ob, "probe", row->name);
	ob_key(ob, "args");
	ob_lit(ob, "{");
	for (unsigned i = 0; i < e->nargs && i < row->nargs; i++) {
		if (i)
			ob_lit(ob, ",");
		ob_jstr(ob, row->arg_names[i], 64);
		ob_lit(ob, ":");
		if (!strcmp(row->arg_types[i], "__s32"))
			ob_s64(ob, (int32_t)e->args[i]);
		else
			ob_u64(ob, e->args[i]);
	}
	ob_lit(ob, "}");
}

static void kv_fields(struct outbuf *ob, const void *rec)
{
	const struct kv_event *e = rec;

	ob_key(ob, "used_bytes");
	ob_u64(ob, e->used_bytes);
	ob_key(ob, "capacity_bytes");
	ob_u64(ob, e->capacity_bytes);
}

static void kernel_fields(struct outbuf *ob, const void *rec)
{
	const struct kernel_event *e = rec;

	ob_key_name(ob, "name", cl_kernel_name(e->kernel_id));
	ob_key(ob, "kernel_id");
	ob_u64(ob, e->kernel_id);
	ob_key(ob, "queue");
	ob_u64(ob, e->queue);
	ob_key(ob, "layer");
	ob_s64(ob, e->layer);
	ob_key(ob, "index");
	ob_u64(ob, e->index);
	ob_key(ob, "queued_ns");
	ob_u64(ob, e->queued_ns);
	ob_key(ob, "submit_ns");
	ob_u64(ob, e->submit_ns);
	ob_key(ob, "start_ns");
	ob_u64(ob, e->start_ns);
	ob_key(ob, "end_ns");
	ob_u64(ob, e->end_ns);
	ob_key(ob, "dur_ns");
	ob_u64(ob, e->end_ns > e->start_ns ? e->end_ns - e->start_ns : 0);
	ob_key(ob, "req");
	ob_u64(ob, e->req);
	ob_key(ob, "pos");
	ob_u64(ob, e->pos);
}

/* ---- --opencl records: what the loader could not tell is null ---- */
static void u64_or_null(struct outbuf *ob, const char *key, int known, uint64_t v)
{
	ob_key(ob, key);
	if (known)
		ob_u64(ob, v);
	else
		ob_lit(ob, "null");
}

static void cl_name_field(struct outbuf *ob, int known, const char *name, size_t size)
{
	ob_key(ob, "name");
	if (known)
		ob_jstr(ob, name, size);
	else
		ob_lit(ob, "null");
}

static void cl_sizes(struct outbuf *ob, const char *key, int known, const __u64 *v, unsigned dim)
{
	ob_key(ob, key);
	if (!known) {
		ob_lit(ob, "null");
		return;
	}
	ob_lit(ob, "[");
	for (unsigned i = 0; i < dim && i < 3; i++) {
		if (i)
			ob_lit(ob, ",");
		ob_u64(ob, v[i]);
	}
	ob_lit(ob, "]");
}

static void cl_kernel_fields(struct outbuf *ob, const void *rec)
{
	const struct cl_kernel_event *e = rec;

	cl_name_field(ob, e->flags & CL_K_NAMED, e->name, sizeof(e->name));
	ob_key(ob, "api");
	ob_lit(ob, "\"opencl\"");
	ob_key(ob, "kernel");
	ob_u64(ob, e->kernel);
	ob_key(ob, "queue");
	ob_u64(ob, e->queue);
	ob_key(ob, "work_dim");
	ob_u64(ob, e->work_dim);
	cl_sizes(ob, "global", 1, e->global, e->work_dim);
	cl_sizes(ob, "local", e->flags & CL_K_LOCAL, e->local, e->work_dim);
	ob_key(ob, "host_ns");
	ob_u64(ob, e->host_ns);
	ob_key(ob, "status");
	ob_s64(ob, e->status);
	u64_or_null(ob, "event", e->flags & CL_K_EVENT, e->event);
	/* Device times are known only from a cl_devtime record (same event). */
	ob_lit(ob, ",\"queued_ns\":null,\"submit_ns\":null,\"start_ns\":null,\"end_ns\":null");
}

static const char *const cl_op_names[CL_OP_COUNT] = {
	"clFinish", "clWaitForEvents", "clEnqueueReadBuffer", "clEnqueueWriteBuffer",
	"clEnqueueMapBuffer", "clBuildProgram",
};

/* read: device to host; write: host to device; map: by its flags (1 read). */
static const char *cl_direction(const struct cl_call_event *e)
{
	if (e->op == CL_OP_READ)
		return "d2h";
	if (e->op == CL_OP_WRITE)
		return "h2d";
	return (e->flags & 2) ? "map_write" : "map_read";
}

static void cl_call_fields(struct outbuf *ob, const void *rec)
{
	const struct cl_call_event *e = rec;

	ob_key_name(ob, "call", e->op < CL_OP_COUNT ? cl_op_names[e->op] : "?");
	ob_key(ob, "host_ns");
	ob_u64(ob, e->host_ns);
	ob_key(ob, e->op == CL_OP_BUILD ? "program" : "queue");
	ob_u64(ob, e->handle);
	ob_key(ob, "status");
	ob_s64(ob, e->status);
	if (e->op == CL_OP_WAIT_EVENTS) {
		ob_key(ob, "events");
		ob_u64(ob, e->bytes);
	}
	if (e->h.type != EV_CL_TRANSFER && e->op != CL_OP_READ && e->op != CL_OP_WRITE && e->op != CL_OP_MAP)
		return;
	ob_key(ob, "bytes");
	ob_u64(ob, e->bytes);
	ob_key_name(ob, "direction", cl_direction(e));
	ob_key(ob, "blocking");
	ob_lit(ob, e->blocking ? "true" : "false");
	/* A non-blocking call only enqueues: its host time says nothing of the copy. */
	ob_key(ob, "gbps");
	if (e->blocking && e->host_ns)
		ob_double(ob, (double)e->bytes / (double)e->host_ns);
	else
		ob_lit(ob, "null");
}

static void cl_mem_fields(struct outbuf *ob, const void *rec)
{
	const struct cl_mem_event *e = rec;

	ob_key_name(ob, "op", e->op == CL_MEM_CREATE ? "create" : "release");
	ob_key(ob, "mem");
	ob_u64(ob, e->mem);
	u64_or_null(ob, "context", !e->unknown, e->context);
	u64_or_null(ob, "bytes", !e->unknown, e->bytes);
	u64_or_null(ob, "live_bytes", !e->unknown, e->live_bytes);
	u64_or_null(ob, "peak_bytes", !e->unknown, e->peak_bytes);
	ob_key(ob, "freed");
	ob_lit(ob, e->freed ? "true" : "false");
	ob_key(ob, "unknown");
	ob_lit(ob, e->unknown ? "true" : "false");
	ob_key(ob, "status");
	ob_s64(ob, e->status);
}

static void cl_devtime_fields(struct outbuf *ob, const void *rec)
{
	const struct cl_devtime_event *e = rec;
	static const char *const keys[4] = { "queued_ns", "submit_ns", "start_ns", "end_ns" };

	cl_name_field(ob, e->named, e->name, sizeof(e->name));
	ob_key(ob, "event");
	ob_u64(ob, e->event);
	ob_key(ob, "kernel");
	ob_u64(ob, e->kernel);
	ob_key(ob, "queue");
	ob_u64(ob, e->queue);
	for (int i = 0; i < 4; i++)
		u64_or_null(ob, keys[i], e->mask & (1u << i), e->t[i]);
	u64_or_null(ob, "dur_ns", (e->mask & (CL_T_START | CL_T_END)) == (CL_T_START | CL_T_END) &&
		    e->t[3] >= e->t[2], e->t[3] - e->t[2]);
}

/* --http: a request as its server's socket saw it; times on the host clock,
 * ttft_ns and dur_ns from its arrival (start_ns). */
static void http_fields(struct outbuf *ob, const void *rec)
{
	const struct http_event *e = rec;
	uint64_t first = http_first_token_ns(e);

	ob_key_name(ob, "from", "socket");
	ob_key_name(ob, "clock", "host");
	ob_key(ob, "method");
	ob_jstr(ob, e->method, sizeof(e->method));
	ob_key(ob, "path");
	ob_jstr(ob, e->path, sizeof(e->path));
	if (e->flags & HTTP_F_PATH_CUT)
		ob_lit(ob, ",\"path_truncated\":true");
	ob_key(ob, "status");
	ob_u64(ob, e->status);
	ob_lit(ob, e->flags & HTTP_F_SSE ? ",\"stream\":true" : ",\"stream\":false");
	ob_key_name(ob, "start", e->flags & HTTP_F_ARRIVAL ? "arrival" : "read");
	ob_key(ob, "start_ns");
	ob_u64(ob, e->start_ns);
	ob_key(ob, "read_wait_ns");
	ob_u64(ob, e->read_ns - e->start_ns);
	u64_or_null(ob, "ttft_ns", first != 0, first - e->start_ns);
	ob_key(ob, "dur_ns");
	ob_u64(ob, e->end_ns - e->start_ns);
	ob_key(ob, "events");
	ob_u64(ob, e->events);
	u64_or_null(ob, "itl_mean_ns", e->events > 1, e->events > 1 ? e->gap_sum_ns / (e->events - 1) : 0);
	u64_or_null(ob, "itl_max_ns", e->events > 1, e->gap_max_ns);
	ob_key(ob, "req_bytes");
	ob_u64(ob, e->req_bytes);
	ob_key(ob, "resp_bytes");
	ob_u64(ob, e->resp_bytes);
	ob_key_name(ob, "end", http_end_name(e->end));
	ob_key(ob, "conn");
	ob_u64(ob, http_conn_id(e->sock));
	ob_key(ob, "seq");
	ob_u64(ob, e->seq);
	if (e->req) {   /* the engine's request it became (core/reqjoin.h) */
		ob_key(ob, "req");
		ob_u64(ob, e->req);
	}
}

static int on_span(void *ob, const struct span_event *e) { return line(ob, &e->h, span_fields, e); }
static int on_token(void *ob, const struct token_event *e) { return line(ob, &e->h, token_fields, e); }
static int on_request(void *ob, const struct request_event *e) { return line(ob, &e->h, request_fields, e); }
static int on_alloc(void *ob, const struct alloc_event *e) { return line(ob, &e->h, alloc_fields, e); }
static int on_kv(void *ob, const struct kv_event *e) { return line(ob, &e->h, kv_fields, e); }
static int on_kernel(void *ob, const struct kernel_event *e) { return line(ob, &e->h, kernel_fields, e); }
static int on_step(void *ob, const struct step_event *e) { return line(ob, &e->h, step_fields, e); }
static int on_emit(void *ob, const struct emit_event *e) { return line(ob, &e->h, emit_fields, e); }
static int on_req_state(void *ob, const struct req_state_event *e) { return line(ob, &e->h, req_state_fields, e); }
static int on_cl_kernel(void *ob, const struct cl_kernel_event *e) { return line(ob, &e->h, cl_kernel_fields, e); }
static int on_cl_call(void *ob, const struct cl_call_event *e) { return line(ob, &e->h, cl_call_fields, e); }
static int on_cl_mem(void *ob, const struct cl_mem_event *e) { return line(ob, &e->h, cl_mem_fields, e); }
static int on_cl_devtime(void *ob, const struct cl_devtime_event *e) { return line(ob, &e->h, cl_devtime_fields, e); }
static int on_tensor(void *ob, const struct tensor_event *e) { return line(ob, &e->h, tensor_fields, e); }
static int on_probe(void *ob, const struct probe_event *e) { return line(ob, &e->h, probe_fields, e); }
static int on_http(void *ob, const struct http_event *e) { return line(ob, &e->h, http_fields, e); }

const struct event_handlers jsonl_handlers = {
	.span = on_span,
	.token = on_token,
	.request = on_request,
	.alloc = on_alloc,
	.free = on_alloc,
	.kv = on_kv,
	.kernel = on_kernel,
	.step = on_step,
	.emit = on_emit,
	.req_state = on_req_state,
	.cl_kernel = on_cl_kernel,
	.cl_call = on_cl_call,
	.cl_mem = on_cl_mem,
	.cl_devtime = on_cl_devtime,
	.tensor = on_tensor,
	.probe = on_probe,
	.http = on_http,
};

int jsonl_write_record(struct outbuf *ob, const void *data, size_t size)
{
	struct event_sink sink = { &jsonl_handlers, ob };

	return event_dispatch(data, size, &sink, 1, NULL);
}

int jsonl_write_drops(struct outbuf *ob, uint64_t ts_ns, const struct counters *c, uint64_t delivered)
{
	if (ob_begin(ob))
		return -1;
	ob_lit(ob, "{\"type\":\"drops\",\"ts_ns\":");
	ob_u64(ob, ts_ns);
	ob_key(ob, "fired");
	ob_u64(ob, event_types_sum(c->fired));
	ob_key(ob, "delivered");
	ob_u64(ob, delivered);
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
}
