/* events.h - the one decoder of ring-buffer records (bpf/spantrace.h).
 *
 * One table gives each record type its name, its size and the checks of
 * its fields; one dispatch checks a record and then hands it, typed, to
 * each consumer ("sink") in turn. Every command reads records only through
 * event_dispatch(), so no consumer ever reads a type-specific field of a
 * record that has not passed the checks:
 *   - the record is at least as long as its type's struct;
 *   - the type is one the table knows;
 *   - every enum field indexes the vocabulary's tables (span kind, pool,
 *     kernel id, probe row, stack depth, counter count), and layers are >= -1.
 * A record that fails is not handed to any sink; its verdict says why. */
#ifndef SPANTRACE_EVENTS_H
#define SPANTRACE_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include "spantrace.h"

/* A consumer's handlers; NULL skips that type. A non-zero return stops the
 * dispatch (later sinks do not see the record) and is passed back. */
struct event_handlers {
	int (*span)(void *ctx, const struct span_event *e);
	int (*token)(void *ctx, const struct token_event *e);
	int (*request)(void *ctx, const struct request_event *e);
	int (*alloc)(void *ctx, const struct alloc_event *e);
	int (*free)(void *ctx, const struct alloc_event *e);
	int (*kv)(void *ctx, const struct kv_event *e);
	int (*kernel)(void *ctx, const struct kernel_event *e);
	int (*sample)(void *ctx, const struct sample_event *e);
	int (*step)(void *ctx, const struct step_event *e);
	int (*emit)(void *ctx, const struct emit_event *e);
	int (*req_state)(void *ctx, const struct req_state_event *e);
	/* --opencl (bpf/opencl_events.h) */
	int (*cl_kernel)(void *ctx, const struct cl_kernel_event *e);
	int (*cl_call)(void *ctx, const struct cl_call_event *e);  /* wait, transfer, build */
	int (*cl_mem)(void *ctx, const struct cl_mem_event *e);
	int (*cl_devtime)(void *ctx, const struct cl_devtime_event *e);
	int (*tensor)(void *ctx, const struct tensor_event *e);
	int (*probe)(void *ctx, const struct probe_event *e);   /* probe_generic rows */
	int (*http)(void *ctx, const struct http_event *e);     /* --http: a request on a socket */
};

struct event_sink {
	const struct event_handlers *on;
	void *ctx;
};

enum event_verdict {
	EVENT_OK = 0,
	EVENT_SHORT,          /* shorter than a header, or than its type's record */
	EVENT_UNKNOWN_TYPE,
	EVENT_BAD_FIELD,      /* an enum field outside the vocabulary */
	EVENT_VERDICT_COUNT
};

/* Checks one record. */
enum event_verdict event_check(const void *data, size_t size);

/* Checks the record; if it passes, calls each sink's handler for its type,
 * in order. Returns 0 or the first non-zero handler return; *verdict (if
 * not NULL) says whether the record was handed on. */
int event_dispatch(const void *data, size_t size, const struct event_sink *sinks, size_t nsinks,
		   enum event_verdict *verdict);

/* "span", "token", ... as in the JSONL "type" field; "unknown" otherwise. */
const char *event_type_name(unsigned type);
/* How a request's link to its HTTP request was found, where not plainly:
 * "crossed", "ambiguous" or "identical_twin"; NULL for a plain one. */
const char *request_link_name(const struct request_event *e);
/* An http record's end (enum http_end) by name: "response", "close", ... */
const char *http_end_name(unsigned end);
/* When an http record's first token left: its first SSE event written, else
 * (not streamed) its response's first byte; 0 if neither happened. */
uint64_t http_first_token_ns(const struct http_event *e);
/* When the engine surely had a request: its queued time, or for a twin
 * (REQ_F_TWIN: its queued time is the guessed twin's tokenizing) its first
 * admission, which is its own. */
uint64_t request_engine_had_ns(const struct request_event *r);
/* h's socket wrote r's first token before the engine made it (both
 * known): h cannot be the HTTP request r came on. */
int request_token_before_engine(const struct request_event *r, const struct http_event *h);
/* An http record's connection as outputs name it: its socket, hashed with
 * a per-run salt (32 bits), never the kernel address. */
uint64_t http_conn_id(uint64_t sock);
/* Content: token ids (token_in/token_out, emit token_id) are what users
 * were told, and leave spantrace only when asked for (--capture-tokens,
 * or SPANTRACE_CAPTURE_TOKENS=1); every writer asks this before writing
 * one, and leaves the field out otherwise. Counts, lengths and times are
 * not content. */
void events_set_capture_tokens(int on);
int events_capture_tokens(void);
/* "short", "unknown type", "bad field" ("ok" for EVENT_OK). */
const char *event_verdict_name(enum event_verdict v);
/* The size of a record of this type, 0 for an unknown type. */
size_t event_record_size(unsigned type);

/* The sum over all event types of a per-type counter (struct counters'
 * fired and dropped, a session's delivered). */
uint64_t event_types_sum(const __u64 per_type[EV_TYPE_COUNT]);

#endif
