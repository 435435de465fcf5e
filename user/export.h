/* export.h - renders BPF events (bpf/spantrace.h) as JSONL and CSV lines.
 * Fixed schema, names from the fixed tables of probes.h; fields are only
 * ever added, never renamed. */
#ifndef SPANTRACE_EXPORT_H
#define SPANTRACE_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include "outbuf.h"

/* Offsets that turn kernel clocks into wall-clock ns since the epoch. */
struct export_clock {
	int64_t mono_to_wall;   /* add to CLOCK_MONOTONIC ns */
	int64_t raw_to_wall;    /* add to CLOCK_MONOTONIC_RAW ns (OpenCL device times) */
};

void export_clock_init(struct export_clock *c);

/* One JSONL line for a ring buffer record; 0, or -1 on a write error. Unknown
 * or short records are skipped (return 0). */
int export_jsonl_event(OutBuf *ob, const void *data, size_t size);

#define CSV_HEADER "timestamp,device,worker,duration_ms,token,layer,operation,success,memory_used_mb,error"
/* One CSV row for a span or kernel record (others are skipped);
 * live_bytes is the process's current live memory. */
int export_csv_event(OutBuf *ob, const void *data, size_t size, const struct export_clock *clk,
		     uint64_t live_bytes);

/* Human name of an event type, as in the "type" field. */
const char *event_type_name(unsigned type);

#endif
