/* csv.h - one CSV row per span and per OpenCL kernel (record --csv), in
 * seed 000's columns. Times are wall clock; memory is the process's live
 * bytes at the row, from the proc_table sink that precedes this one. */
#ifndef SPANTRACE_CSV_H
#define SPANTRACE_CSV_H

#include "analysis/procs.h"
#include "core/clock.h"
#include "core/events.h"
#include "output/outbuf.h"

#define CSV_HEADER "timestamp,device,worker,duration_ms,token,layer,operation,success,memory_used_mb,error"

struct csv_writer {
	struct outbuf *ob;
	struct wall_clock clk;
	const struct proc_table *procs;   /* NULL: memory 0 */
};

/* span and kernel rows; ctx is the struct csv_writer. -1 on a write error. */
extern const struct event_handlers csv_handlers;

#endif
