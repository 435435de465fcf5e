/* rssattr.h - a process's resident memory split into what the engine's
 * pools account for and the rest (the runtime, libraries, OpenCL, the
 * tracer cannot see inside). `pools` is the bytes the pools hold from the
 * system (their reserved bytes), capped at RSS: a weights mapping not yet
 * paged in is reserved but not resident. With PoCL (a CPU device) the
 * device pool's buffers are host memory too, so every pool counts. */
#ifndef SPANTRACE_RSSATTR_H
#define SPANTRACE_RSSATTR_H

#include <stdint.h>
#include <sys/types.h>
#include "spantrace/probes.h"

struct rss_split {
	uint64_t rss, pools, other;   /* pools + other == rss */
};

/* Resident bytes from /proc/PID/statm. 0 or -1. */
int rss_read(pid_t pid, uint64_t *bytes);
void rss_split_make(uint64_t rss, const uint64_t reserved[POOL_COUNT], struct rss_split *out);
/* rss_read + rss_split_make. 0 or -1. */
int rss_split_read(pid_t pid, const uint64_t reserved[POOL_COUNT], struct rss_split *out);

#endif
