/* export.h - renders BPF events (bpf/spantrace.h) as JSONL and CSV lines.
 * Fixed schema, names from the fixed tables of probes.h; fields are only
 * ever added, never renamed. */
#ifndef SPANTRACE_EXPORT_H
#define SPANTRACE_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include "output/outbuf.h"
#include "spantrace.h"

/* Offsets that turn kernel clocks into wall-clock ns since the epoch. */
struct export_clock {
	int64_t mono_to_wall;   /* add to CLOCK_MONOTONIC ns */
	int64_t raw_to_wall;    /* add to CLOCK_MONOTONIC_RAW ns (OpenCL device times) */
};

void export_clock_init(struct export_clock *c);

/* One JSONL line for a ring buffer record; 0, or -1 on a write error. Unknown
 * or short records are skipped (return 0). */
int export_jsonl_event(struct outbuf *ob, const void *data, size_t size);

#define CSV_HEADER "timestamp,device,worker,duration_ms,token,layer,operation,success,memory_used_mb,error"
/* One CSV row for a span or kernel record (others are skipped);
 * live_bytes is the process's current live memory. */
int export_csv_event(struct outbuf *ob, const void *data, size_t size, const struct export_clock *clk,
		     uint64_t live_bytes);

/* Human name of an event type, as in the "type" field. */
const char *event_type_name(unsigned type);

/* The size a ring buffer record of this type must have at least, or 0 for a
 * type that is no trace record (unknown, or EV_SAMPLE: profile's own). Every
 * consumer checks records against this one table. */
size_t event_record_size(unsigned type);
/* 1 if data holds a whole trace record of a known type, else 0. */
int event_record_whole(const void *data, size_t size);

/* The sum over all event types of a per-type counter (struct counters'
 * fired, dropped). */
uint64_t event_types_sum(const __u64 per_type[EV_TYPE_COUNT]);

/* "coarse" / "detail", as in --level and the session record. */
const char *trace_level_name(enum trace_level level);
/* 0 and *out set for "coarse" or "detail", else -1. */
int trace_level_parse(const char *name, enum trace_level *out);

#endif
