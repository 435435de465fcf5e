/* export.c - fixed-schema JSONL/CSV rendering of BPF events. */
#include "output/export.h"

#include <string.h>
#include <time.h>

static const char *const type_names[EV_TYPE_COUNT] = {
	[EV_SPAN] = "span", [EV_TOKEN] = "token", [EV_REQUEST] = "request",
	[EV_ALLOC] = "alloc", [EV_FREE] = "free", [EV_KV] = "kv",
	[EV_KERNEL] = "kernel", [EV_SAMPLE] = "sample",
};

const char *event_type_name(unsigned type)
{
	return type < EV_TYPE_COUNT && type_names[type] ? type_names[type] : "unknown";
}

uint64_t event_types_sum(const __u64 per_type[EV_TYPE_COUNT])
{
	uint64_t n = 0;
	for (int t = 0; t < EV_TYPE_COUNT; t++)
		n += per_type[t];
	return n;
}

const char *trace_level_name(enum trace_level level)
{
	return level == LEVEL_COARSE ? "coarse" : "detail";
}

int trace_level_parse(const char *name, enum trace_level *out)
{
	if (!strcmp(name, "coarse"))
		*out = LEVEL_COARSE;
	else if (!strcmp(name, "detail"))
		*out = LEVEL_DETAIL;
	else
		return -1;
	return 0;
}

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void export_clock_init(struct export_clock *c)
{
	int64_t wall = clock_ns(CLOCK_REALTIME);
	c->mono_to_wall = wall - clock_ns(CLOCK_MONOTONIC);
	c->raw_to_wall = wall - clock_ns(CLOCK_MONOTONIC_RAW);
}

static void header_fields(struct outbuf *ob, const struct event_header *h)
{
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
}

static void span_fields(struct outbuf *ob, const struct span_event *e)
{
	ob_key(ob, "dur_ns");
	ob_u64(ob, e->dur_ns);
	ob_lit(ob, ",\"name\":\"");
	ob_lit(ob, span_kind_name(e->kind));
	ob_lit(ob, "\"");
	ob_key(ob, "layer");
	ob_s64(ob, e->layer);
	ob_key(ob, "depth");
	ob_u64(ob, e->depth);
	ob_key(ob, "parent");
	if (e->parent_kind < SPAN_KIND_COUNT) {
		ob_lit(ob, "\"");
		ob_lit(ob, span_kind_name(e->parent_kind));
		ob_lit(ob, "\"");
	} else {
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
	/* perf counter deltas (record --perf, profile), in the order of the
	 * session record's "perf_counters" names */
	if (e->ncounters > 0 && e->ncounters <= PERF_COUNTERS_MAX) {
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

static void kernel_fields(struct outbuf *ob, const struct kernel_event *e)
{
	ob_lit(ob, ",\"name\":\"");
	ob_lit(ob, cl_kernel_name(e->kernel_id));
	ob_lit(ob, "\"");
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

static void alloc_fields(struct outbuf *ob, const struct alloc_event *e)
{
	ob_lit(ob, ",\"pool\":\"");
	ob_lit(ob, pool_name(e->pool));
	ob_lit(ob, "\"");
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
	}
}

size_t event_record_size(unsigned type)
{
	switch (type) {
	case EV_SPAN: return sizeof(struct span_event);
	case EV_TOKEN: return sizeof(struct token_event);
	case EV_REQUEST: return sizeof(struct request_event);
	case EV_ALLOC:
	case EV_FREE: return sizeof(struct alloc_event);
	case EV_KV: return sizeof(struct kv_event);
	case EV_KERNEL: return sizeof(struct kernel_event);
	default: return 0;
	}
}

int event_record_whole(const void *data, size_t size)
{
	const struct event_header *h = data;
	size_t need;

	if (size < sizeof(*h))
		return 0;
	need = event_record_size(h->type);
	return need && size >= need;
}

int export_jsonl_event(struct outbuf *ob, const void *data, size_t size)
{
	const struct event_header *h = data;

	if (!event_record_whole(data, size))
		return 0;
	if (ob_begin(ob))
		return -1;
	header_fields(ob, h);
	switch (h->type) {
	case EV_SPAN:
		span_fields(ob, data);
		break;
	case EV_TOKEN: {
		const struct token_event *e = data;
		ob_key(ob, "dur_ns"); ob_u64(ob, e->dur_ns);
		ob_key(ob, "req"); ob_u64(ob, e->req);
		ob_key(ob, "pos"); ob_u64(ob, e->pos);
		ob_key(ob, "token_in"); ob_u64(ob, e->token_in);
		ob_key(ob, "token_out"); ob_u64(ob, e->token_out);
		break;
	}
	case EV_REQUEST: {
		const struct request_event *e = data;
		ob_key(ob, "dur_ns"); ob_u64(ob, e->dur_ns);
		ob_key(ob, "req"); ob_u64(ob, e->req);
		ob_key(ob, "prompt_tokens"); ob_u64(ob, e->prompt_tokens);
		ob_key(ob, "generated_tokens"); ob_u64(ob, e->generated_tokens);
		break;
	}
	case EV_ALLOC:
	case EV_FREE:
		alloc_fields(ob, data);
		break;
	case EV_KV: {
		const struct kv_event *e = data;
		ob_key(ob, "used_bytes"); ob_u64(ob, e->used_bytes);
		ob_key(ob, "capacity_bytes"); ob_u64(ob, e->capacity_bytes);
		break;
	}
	case EV_KERNEL:
		kernel_fields(ob, data);
		break;
	}
	ob_lit(ob, "}");
	ob_end(ob);
	return 0;
}

/* timestamp as epoch seconds with microseconds */
static void csv_time(struct outbuf *ob, int64_t wall_ns)
{
	ob_fixed(ob, wall_ns > 0 ? (uint64_t)wall_ns / 1000 : 0, 6);
}

int export_csv_event(struct outbuf *ob, const void *data, size_t size, const struct export_clock *clk,
		     uint64_t live_bytes)
{
	const struct event_header *h = data;
	int is_span;

	if (!event_record_whole(data, size) || (h->type != EV_SPAN && h->type != EV_KERNEL))
		return 0;
	is_span = h->type == EV_SPAN;
	if (ob_begin(ob))
		return -1;
	if (is_span) {
		const struct span_event *e = data;
		int bad = e->flags & SPAN_F_MISMATCH;
		csv_time(ob, (int64_t)e->h.ts_ns + clk->mono_to_wall);
		ob_lit(ob, ",cpu,");
		ob_u64(ob, e->h.tid);
		ob_lit(ob, ",");
		ob_fixed(ob, e->dur_ns, 6);
		ob_lit(ob, ",");
		ob_u64(ob, e->pos);
		ob_lit(ob, ",");
		ob_s64(ob, e->layer);
		ob_lit(ob, ",");
		ob_lit(ob, span_kind_name(e->kind));
		ob_lit(ob, bad ? ",0," : ",1,");
		ob_fixed(ob, live_bytes / 1000, 3);   /* MB = 10^6 bytes */
		ob_lit(ob, bad ? ",mismatched" : ",");
	} else {
		const struct kernel_event *e = data;
		uint64_t dur = e->end_ns > e->start_ns ? e->end_ns - e->start_ns : 0;
		csv_time(ob, (int64_t)e->start_ns + clk->raw_to_wall);
		ob_lit(ob, ",opencl,");
		ob_u64(ob, e->h.tid);
		ob_lit(ob, ",");
		ob_fixed(ob, dur, 6);
		ob_lit(ob, ",");
		ob_u64(ob, e->pos);
		ob_lit(ob, ",");
		ob_s64(ob, e->layer);
		ob_lit(ob, ",cl_");
		ob_lit(ob, cl_kernel_name(e->kernel_id));
		ob_lit(ob, ",1,");
		ob_fixed(ob, live_bytes / 1000, 3);
		ob_lit(ob, ",");
	}
	ob_end(ob);
	return 0;
}
