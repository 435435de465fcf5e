/* jsonl.h - one JSONL line per ring-buffer record: `record`'s stream and the
 * daemon's tail files. A fixed schema with names from spantrace/probes.h's tables;
 * fields are only ever added, never renamed (docs/record.md: JSONL schema). */
#ifndef SPANTRACE_JSONL_H
#define SPANTRACE_JSONL_H

#include <stddef.h>
#include "core/events.h"
#include "output/outbuf.h"

/* The handlers of every trace record type (not samples); ctx is the
 * struct outbuf. A handler returns -1 when its line cannot be written; once
 * the outbuf has failed, later records are dropped with 0 (the failure was
 * reported), so the caller can go on consuming and counting. */
extern const struct event_handlers jsonl_handlers;

/* One record through the decoder into ob: 0, or -1 on a write error. A
 * record the decoder rejects writes nothing. */
int jsonl_write_record(struct outbuf *ob, const void *data, size_t size);

/* The "drops" record: how many events were lost, overall and per type. */
int jsonl_write_drops(struct outbuf *ob, uint64_t ts_ns, const struct counters *c, uint64_t delivered);

#endif
