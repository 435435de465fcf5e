/* procs.h - what each traced process has shown through its records: live,
 * peak and reserved bytes per pool (from the alloc/free records, which
 * carry the kernel's running totals) and its latest KV-cache use. Fed as a
 * sink; record's CSV and metrics stream and top's memory lines read it. */
#ifndef SPANTRACE_PROCS_H
#define SPANTRACE_PROCS_H

#include <stddef.h>
#include <stdint.h>
#include "core/events.h"

struct proc_state {
	__u32 pid;
	uint64_t live[POOL_COUNT], peak[POOL_COUNT], reserved[POOL_COUNT];
	uint64_t kv_used, kv_cap;
	int kv_seen;
};

struct proc_table {
	struct proc_state *procs;
	size_t n, cap;
	size_t max;            /* 0 = no limit */
	uint64_t untracked;    /* records of processes beyond max */
};

/* alloc, free (an unknown free carries no pool state) and kv; ctx is the
 * struct proc_table. Never fails: a process it cannot add is counted. */
extern const struct event_handlers proc_table_handlers;

/* The process's state, added on first sight; NULL past max or out of memory. */
struct proc_state *proc_table_get(struct proc_table *t, __u32 pid);
/* The process's state if known, else NULL. */
const struct proc_state *proc_table_find(const struct proc_table *t, __u32 pid);
uint64_t proc_live_total(const struct proc_state *p);
void proc_table_free(struct proc_table *t);

#endif
