/* otlp_trace.h - the OTLP traces sink: engine records as OTLP spans, sent
 * through otlp.h to ENDPOINT/v1/traces as JSON (ExportTraceServiceRequest).
 *
 * Ids are derived, not stored: a span's id is a hash of what identifies it
 * (pid, request, position, kind, layer, depth and the thread's count of
 * finished outermost spans), so a child, which ends and arrives before its
 * parent, can name its parent's id from its own record. A random salt per
 * run keeps runs apart.
 *   - Single stream (spans carry a request): a request is a trace; request
 *     -> token -> forward, sample -> layer -> op; OpenCL kernels are spans
 *     under their token, timed by the device (moved onto the wall clock).
 *   - Serving engine: each request is a trace (request -> token, one per
 *     emitted token, from the previous one); each engine step is a trace of
 *     its own (step -> forward -> layer -> op, kernels under the step), and
 *     every token span links to the step that produced it. */
#ifndef SPANTRACE_OTLP_TRACE_H
#define SPANTRACE_OTLP_TRACE_H

#include <stdint.h>
#include "core/clock.h"
#include "core/events.h"
#include "output/otlp.h"

#define OTLP_BATCH_SPANS 512   /* spans per export request, at most */

struct otlp_trace;

/* x: the transport (owned by the caller). clk: the offsets to wall time. */
struct otlp_trace *otlp_trace_new(struct otlp_exporter *x, const struct wall_clock *clk,
				  const char *host);
void otlp_trace_free(struct otlp_trace *t);

/* Queues the spans built so far (call once a second and at the end). */
void otlp_trace_flush(struct otlp_trace *t);

/* Spans built (each one then sent, or dropped and counted by the transport). */
uint64_t otlp_trace_spans(const struct otlp_trace *t);

/* ctx is the struct otlp_trace. */
extern const struct event_handlers otlp_trace_handlers;

#endif
