/* chrome.h - a streaming writer of Chrome trace event JSON, the format
 * Perfetto (ui.perfetto.dev) and chrome://tracing load.
 *
 * The file is one object:
 *   {"traceEvents":[...], "displayTimeUnit":"ns", "otherData":{...}}
 * Timestamps are microseconds (the format's unit) printed with three
 * decimals, so they keep the nanosecond precision of the host clock
 * (CLOCK_MONOTONIC, what bpf_ktime_get_ns reads); they are not rebased.
 *
 * Tracks:
 *  - spans: complete ("X") events on the thread that ran them, on the host
 *    clock (args.clock "host"; args.device_ns: their kernels' device time,
 *    null where those records were lost). Spans arrive
 *    when they end (children before parents), so each thread's spans are
 *    held until its outermost span ends and then written sorted by begin
 *    time, longest first on ties: parents always precede their children.
 *  - OpenCL kernels: "X" events on one synthetic thread per queue,
 *    tid = CHROME_QUEUE_TID_BASE + queue, named "OpenCL queue N (device
 *    clock)", in the target's process; args.op names the op span it ran in. Device timestamps are shifted onto the host timeline
 *    by the device offset (see chrome_set_device_offset).
 *  - tokens: thread-scoped instant ("i") events at the token's end.
 *  - counters ("C"): KV-cache bytes and live bytes per pool, per process.
 *  - the serving engine: its steps as "X" events on one track "engine steps"
 *    (tid CHROME_STEP_TID), each named with its batch (sequences, prefill and
 *    decode tokens); each request on a track of its own (tid
 *    CHROME_REQUEST_TID_BASE + req mod CHROME_REQUEST_TIDS), the request
 *    with its queued, prefill and decode phases inside it; and a flow arrow
 *    (cat "ride") from the request to each step it got a token from.
 *  - HTTP requests from the socket (--http): a track per connection (tid
 *    CHROME_HTTP_TID_BASE + its id mod CHROME_HTTP_TIDS, "http conn ID"),
 *    each request from its arrival to its response's end, with its unread,
 *    to-first-token and events phases inside it (host clock).
 *
 * At most max_events events (process/thread name metadata excluded) are
 * written; the rest are counted, announced once on stderr, and the count is
 * stored as otherData.truncated. chrome_close always completes the JSON. */
#ifndef SPANTRACE_CHROME_H
#define SPANTRACE_CHROME_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "core/events.h"
#include "spantrace.h"

#define CHROME_QUEUE_TID_BASE 1000000u
#define CHROME_DEFAULT_MAX_EVENTS 1000000u
#define CHROME_STEP_TID (CHROME_QUEUE_TID_BASE - 1)
#define CHROME_REQUEST_TID_BASE 2000000u
#define CHROME_REQUEST_TIDS 1000000u
#define CHROME_HTTP_TID_BASE 3000000u
#define CHROME_HTTP_TIDS 1000000u

struct chrome_writer;

/* Creates path (O_NOFOLLOW, mode 0640, truncating). max_events 0 means
 * CHROME_DEFAULT_MAX_EVENTS. NULL with a message in err on failure. */
struct chrome_writer *chrome_open(const char *path, uint64_t max_events,
			  char *err, size_t errlen);

/* Names for span_event.counters[0..n) (perf counters), shown in span args.
 * The strings must outlive the writer. */
void chrome_set_counter_names(struct chrome_writer *cw, const char *const *names,
			      unsigned n);

/* host_ns = device_ns + offset_ns for kernel timestamps (clock_raw_to_mono_ns()
 * for PoCL, core/clock.h). */
void chrome_set_device_offset(struct chrome_writer *cw, int64_t offset_ns);

/* Free-form key/value for otherData (e.g. the command line). */
int chrome_add_meta(struct chrome_writer *cw, const char *key, const char *value);

/* Explicit names; otherwise names come from /proc (comm) or "pid N". */
int chrome_process_name(struct chrome_writer *cw, __u32 pid, const char *name);
int chrome_thread_name(struct chrome_writer *cw, __u32 pid, __u32 tid, const char *name);

int chrome_span(struct chrome_writer *cw, const struct span_event *ev);
int chrome_kernel(struct chrome_writer *cw, const struct kernel_event *ev);
int chrome_token(struct chrome_writer *cw, const struct token_event *ev);
int chrome_kv(struct chrome_writer *cw, const struct kv_event *ev);
int chrome_alloc(struct chrome_writer *cw, const struct alloc_event *ev);
int chrome_step(struct chrome_writer *cw, const struct step_event *ev);
int chrome_request(struct chrome_writer *cw, const struct request_event *ev);
int chrome_emit(struct chrome_writer *cw, const struct emit_event *ev);
int chrome_http(struct chrome_writer *cw, const struct http_event *ev);
/* A generic counter track `name` with one series `series`. */
int chrome_counter(struct chrome_writer *cw, __u32 pid, __u64 ts_ns, const char *name,
		   const char *series, uint64_t value);

/* The session's handlers (spans, tokens, kernels, kv, alloc/free, steps,
 * requests, emits); ctx is
 * the writer. They never stop the tracing: a record the writer cannot keep
 * is counted, and chrome_close() fails saying how many. */
extern const struct event_handlers chrome_handlers;

/* One record through the decoder: -1 if it fails the decoder's checks or
 * cannot be kept. */
int chrome_write_record(struct chrome_writer *cw, const void *data, size_t size);

uint64_t chrome_events_written(const struct chrome_writer *cw);
uint64_t chrome_events_truncated(const struct chrome_writer *cw);

/* Flushes held spans, writes otherData, closes the file and frees cw
 * (also on error). 0 on success, -1 with err set if any write failed. */
int chrome_close(struct chrome_writer *cw, char *err, size_t errlen);

#endif
