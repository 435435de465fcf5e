/* events.c - the record table and the one dispatch (see events.h). */
#include "core/events.h"

#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include "core/userspans.h"

static int layer_ok(__s32 layer)
{
	return layer >= LAYER_NONE;
}

static enum event_verdict check_span(const void *rec)
{
	const struct span_event *e = rec;

	if (!span_kind_known(e->kind) || (e->parent_kind != SPAN_KIND_COUNT && !span_kind_known(e->parent_kind)) ||
	    e->depth >= SPAN_STACK_DEPTH ||
	    e->ncounters > PERF_COUNTERS_MAX || !layer_ok(e->layer) || !layer_ok(e->parent_layer))
		return EVENT_BAD_FIELD;
	return EVENT_OK;
}

static enum event_verdict check_alloc(const void *rec)
{
	const struct alloc_event *e = rec;

	/* unknown: 1 only on a free (never seen allocated), 2 only on an
	 * alloc (made before the attach, from a state dump). */
	return e->pool < POOL_COUNT && (e->unknown == 0 || e->unknown == (e->h.type == EV_FREE ? 1u : 2u))
		       ? EVENT_OK : EVENT_BAD_FIELD;
}

static enum event_verdict check_tensor(const void *rec)
{
	const struct tensor_event *e = rec;

	return e->pool < POOL_COUNT && e->device <= 1 && memchr(e->name, 0, sizeof(e->name))
		       ? EVENT_OK : EVENT_BAD_FIELD;
}

static enum event_verdict check_kernel(const void *rec)
{
	const struct kernel_event *e = rec;

	return e->kernel_id < KERNEL_COUNT && layer_ok(e->layer) ? EVENT_OK : EVENT_BAD_FIELD;
}

static enum event_verdict check_sample(const void *rec)
{
	const struct sample_event *e = rec;

	return (e->kind == SPAN_KIND_COUNT || span_kind_known(e->kind)) && layer_ok(e->layer) ? EVENT_OK
											      : EVENT_BAD_FIELD;
}

static enum event_verdict check_request(const void *rec)
{
	const struct request_event *e = rec;

	return e->finish_reason <= FINISH_REASON_COUNT ? EVENT_OK : EVENT_BAD_FIELD;
}

static enum event_verdict check_req_state(const void *rec)
{
	const struct req_state_event *e = rec;

	return e->state < REQ_STATE_COUNT ? EVENT_OK : EVENT_BAD_FIELD;
}

/* A kernel name is a NUL-terminated string inside its field. */
static int name_ok(const char *name, size_t size)
{
	return memchr(name, 0, size) != NULL;
}

static enum event_verdict check_cl_kernel(const void *rec)
{
	const struct cl_kernel_event *e = rec;

	return name_ok(e->name, sizeof(e->name)) ? EVENT_OK : EVENT_BAD_FIELD;
}

static enum event_verdict check_cl_call(const void *rec)
{
	const struct cl_call_event *e = rec;

	return e->op < CL_OP_COUNT && e->blocking <= 1 ? EVENT_OK : EVENT_BAD_FIELD;
}

static enum event_verdict check_cl_mem(const void *rec)
{
	const struct cl_mem_event *e = rec;

	return e->op < CL_MEM_OP_COUNT && e->freed <= 1 && e->unknown <= 1 ? EVENT_OK : EVENT_BAD_FIELD;
}

static enum event_verdict check_cl_devtime(const void *rec)
{
	const struct cl_devtime_event *e = rec;

	return e->mask <= 15 && e->named <= 1 && name_ok(e->name, sizeof(e->name)) ? EVENT_OK : EVENT_BAD_FIELD;
}

static enum event_verdict check_probe(const void *rec)
{
	const struct probe_event *e = rec;

	return e->probe < PROBE_ID_COUNT && e->nargs <= PROBE_ARGS_MAX ? EVENT_OK : EVENT_BAD_FIELD;
}

/* Method and path are NUL-terminated inside their fields; times in order. */
static enum event_verdict check_http(const void *rec)
{
	const struct http_event *e = rec;

	if (!name_ok(e->method, sizeof(e->method)) || !name_ok(e->path, sizeof(e->path)) ||
	    e->end >= HTTP_END_COUNT || e->end_ns < e->start_ns || e->read_ns < e->start_ns)
		return EVENT_BAD_FIELD;
	return EVENT_OK;
}

static enum event_verdict check_nothing(const void *rec)
{
	(void)rec;
	return EVENT_OK;
}

/* The table: every record type the BPF side sends. */
static const struct {
	const char *name;
	size_t size;
	enum event_verdict (*check)(const void *rec);
} types[EV_TYPE_COUNT] = {
	[EV_SPAN] = { "span", sizeof(struct span_event), check_span },
	[EV_DL_CHANGE] = { "dl_change", sizeof(struct event_header), check_nothing },
	[EV_TOKEN] = { "token", sizeof(struct token_event), check_nothing },
	[EV_REQUEST] = { "request", sizeof(struct request_event), check_request },
	[EV_ALLOC] = { "alloc", sizeof(struct alloc_event), check_alloc },
	[EV_FREE] = { "free", sizeof(struct alloc_event), check_alloc },
	[EV_KV] = { "kv", sizeof(struct kv_event), check_nothing },
	[EV_KERNEL] = { "kernel", sizeof(struct kernel_event), check_kernel },
	[EV_SAMPLE] = { "sample", sizeof(struct sample_event), check_sample },
	[EV_STEP] = { "step", sizeof(struct step_event), check_nothing },
	[EV_EMIT] = { "emit", sizeof(struct emit_event), check_nothing },
	[EV_REQ_STATE] = { "req_state", sizeof(struct req_state_event), check_req_state },
	[EV_CL_KERNEL] = { "cl_kernel", sizeof(struct cl_kernel_event), check_cl_kernel },
	[EV_CL_WAIT] = { "cl_wait", sizeof(struct cl_call_event), check_cl_call },
	[EV_CL_TRANSFER] = { "cl_transfer", sizeof(struct cl_call_event), check_cl_call },
	[EV_CL_BUILD] = { "cl_build", sizeof(struct cl_call_event), check_cl_call },
	[EV_CL_MEM] = { "cl_mem", sizeof(struct cl_mem_event), check_cl_mem },
	[EV_CL_DEVTIME] = { "cl_devtime", sizeof(struct cl_devtime_event), check_cl_devtime },
	[EV_TENSOR] = { "tensor", sizeof(struct tensor_event), check_tensor },
	[EV_PROBE] = { "probe", sizeof(struct probe_event), check_probe },
	[EV_HTTP] = { "http", sizeof(struct http_event), check_http },
};

const char *http_end_name(unsigned end)
{
	static const char *const names[HTTP_END_COUNT] = {
		[HTTP_END_RESPONSE] = "response", [HTTP_END_CLOSE] = "close",
		[HTTP_END_RESET] = "reset", [HTTP_END_EXIT] = "exit",
		[HTTP_END_UNPARSED] = "unparsed",
	};
	return end < HTTP_END_COUNT ? names[end] : "unknown";
}

uint64_t http_first_token_ns(const struct http_event *e)
{
	return e->first_event_ns ? e->first_event_ns : e->resp_ns;
}

const char *request_link_name(const struct request_event *e)
{
	if (!(e->flags & (REQ_F_TWIN | REQ_F_UNLINKED | REQ_F_CROSSED)))
		return NULL;
	return e->flags & REQ_F_CROSSED ? "crossed" : e->flags & REQ_F_UNLINKED ? "ambiguous" : "identical_twin";
}

int request_token_before_engine(const struct request_event *r, const struct http_event *h)
{
	uint64_t first = http_first_token_ns(h);

	return r->ttft_ns && first && r->h.ts_ns + r->ttft_ns > first;
}

uint64_t request_engine_had_ns(const struct request_event *r)
{
	return r->flags & REQ_F_TWIN ? r->h.ts_ns + r->queue_ns : r->h.ts_ns;
}

/* The socket's kernel address must not leave (it would undo KASLR): it is
 * mixed with this process's random salt, the same for every output. */
uint64_t http_conn_id(uint64_t sock)
{
	static uint64_t salt;
	uint64_t z;

	if (!salt && getrandom(&salt, sizeof(salt), 0) != sizeof(salt))
		salt = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	z = (sock ^ salt) + 0x9e3779b97f4a7c15ull;   /* splitmix64's finalizer */
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (z ^ (z >> 31)) & 0xffffffffull;
}

static int capture_tokens;

void events_set_capture_tokens(int on)
{
	capture_tokens = on != 0;
}

int events_capture_tokens(void)
{
	return capture_tokens;
}

const char *event_type_name(unsigned type)
{
	return type < EV_TYPE_COUNT && types[type].name ? types[type].name : "unknown";
}

size_t event_record_size(unsigned type)
{
	return type < EV_TYPE_COUNT ? types[type].size : 0;
}

const char *event_verdict_name(enum event_verdict v)
{
	static const char *const names[EVENT_VERDICT_COUNT] = {
		[EVENT_OK] = "ok", [EVENT_SHORT] = "short", [EVENT_UNKNOWN_TYPE] = "unknown type",
		[EVENT_BAD_FIELD] = "bad field",
	};
	return v < EVENT_VERDICT_COUNT ? names[v] : "?";
}

enum event_verdict event_check(const void *data, size_t size)
{
	const struct event_header *h = data;

	if (size < sizeof(*h))
		return EVENT_SHORT;
	if (h->type >= EV_TYPE_COUNT || !types[h->type].name)
		return EVENT_UNKNOWN_TYPE;
	if (size < types[h->type].size)
		return EVENT_SHORT;
	return types[h->type].check(data);
}

/* The handler of sink s for a checked record of type t. */
static int handle(const struct event_sink *s, unsigned t, const void *rec)
{
	const struct event_handlers *on = s->on;

	switch (t) {
	case EV_SPAN: return on->span ? on->span(s->ctx, rec) : 0;
	case EV_TOKEN: return on->token ? on->token(s->ctx, rec) : 0;
	case EV_REQUEST: return on->request ? on->request(s->ctx, rec) : 0;
	case EV_ALLOC: return on->alloc ? on->alloc(s->ctx, rec) : 0;
	case EV_FREE: return on->free ? on->free(s->ctx, rec) : 0;
	case EV_KV: return on->kv ? on->kv(s->ctx, rec) : 0;
	case EV_KERNEL: return on->kernel ? on->kernel(s->ctx, rec) : 0;
	case EV_SAMPLE: return on->sample ? on->sample(s->ctx, rec) : 0;
	case EV_STEP: return on->step ? on->step(s->ctx, rec) : 0;
	case EV_EMIT: return on->emit ? on->emit(s->ctx, rec) : 0;
	case EV_REQ_STATE: return on->req_state ? on->req_state(s->ctx, rec) : 0;
	case EV_CL_KERNEL: return on->cl_kernel ? on->cl_kernel(s->ctx, rec) : 0;
	case EV_CL_WAIT:
	case EV_CL_TRANSFER:
	case EV_CL_BUILD: return on->cl_call ? on->cl_call(s->ctx, rec) : 0;
	case EV_CL_MEM: return on->cl_mem ? on->cl_mem(s->ctx, rec) : 0;
	case EV_CL_DEVTIME: return on->cl_devtime ? on->cl_devtime(s->ctx, rec) : 0;
	case EV_TENSOR: return on->tensor ? on->tensor(s->ctx, rec) : 0;
	case EV_PROBE: return on->probe ? on->probe(s->ctx, rec) : 0;
	case EV_HTTP: return on->http ? on->http(s->ctx, rec) : 0;
	default: return 0;
	}
}

int event_dispatch(const void *data, size_t size, const struct event_sink *sinks, size_t nsinks,
		   enum event_verdict *verdict)
{
	enum event_verdict v = event_check(data, size);
	unsigned type;

	if (verdict)
		*verdict = v;
	if (v != EVENT_OK)
		return 0;
	type = ((const struct event_header *)data)->type;
	for (size_t i = 0; i < nsinks; i++) {
		int rc = handle(&sinks[i], type, data);
		if (rc)
			return rc;
	}
	return 0;
}

uint64_t event_types_sum(const __u64 per_type[EV_TYPE_COUNT])
{
	uint64_t n = 0;

	for (int t = 0; t < EV_TYPE_COUNT; t++)
		n += per_type[t];
	return n;
}
