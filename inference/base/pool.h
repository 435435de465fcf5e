/* pool.h - named memory pools. Every engine allocation goes through here so
 * the engine's own accounting and the alloc/free probes see the same bytes. */
#ifndef INFER_POOL_H
#define INFER_POOL_H

#include <stddef.h>
#include <stdint.h>
#include "spantrace/probes.h"

typedef struct {
	uint64_t allocs, frees;
	uint64_t live_bytes, peak_bytes;
	uint64_t reserved_bytes; /* held from the system by the live allocations */
	uint64_t peak_reserved_bytes;
} PoolStats;

/* Zeroed host memory from pool; NULL on failure (nothing is counted then). */
void *pool_alloc(enum pool_id pool, size_t bytes);
/* bytes must be what was asked for at pool_alloc. NULL is ignored. */
void pool_free(enum pool_id pool, void *p, size_t bytes);

/* For memory the pool does not allocate itself (the weights mmap, cl_mem
 * buffers): account for it and fire the probe with handle as the pointer.
 * reserved is what it holds from the system (>= bytes); the free must pass
 * the same bytes and reserved. */
void pool_note_alloc(enum pool_id pool, uint64_t handle, size_t bytes, size_t reserved);
void pool_note_free(enum pool_id pool, uint64_t handle, size_t bytes, size_t reserved);

void pool_get_stats(enum pool_id pool, PoolStats *out);

#endif
