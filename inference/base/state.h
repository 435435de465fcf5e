/* state.h - what exists in the engine, re-fired through the state_* probes
 * when a tracer asks (see spantrace/probes.def): live allocations, pool peaks, the last
 * KV figures and the weight tensors. A tracer that attaches to a running
 * engine thus sees what was allocated before it came, exactly.
 *
 * Why re-emission and not a table the tracer reads: the dump runs under the
 * same lock as every alloc/free probe, so it lands in the event stream at one
 * consistent point, and the tracer's in-kernel bookkeeping (insert what it
 * has not seen) stays exact with allocations racing the attach. Untraced, it
 * costs one sleeping thread and a lock + array update per allocation (a few
 * per request). */
#ifndef INFER_STATE_H
#define INFER_STATE_H

#include <stdint.h>
#include "spantrace/probes.h"

/* pool.c: every alloc/free's accounting and probe run inside lock/unlock. */
void state_lock(void);
void state_unlock(void);
/* Inside the lock. Returns 0, -1 when out of memory (then the allocation is
 * simply absent from later dumps). */
int state_track(unsigned pool, uint64_t handle, uint64_t bytes, uint64_t reserved);
void state_untrack(uint64_t handle);
/* Inside the lock, after each allocation: the pool's peaks, for the dump.
 * (pool.c tells them here, so the live table needs nothing of pool.h.) */
void state_note_peaks(unsigned pool, uint64_t peak_bytes, uint64_t peak_reserved_bytes);

void state_note_kv(uint64_t used_bytes, uint64_t capacity_bytes);
void state_note_gauges(uint32_t running, uint32_t waiting);
void state_note_kv_blocks(uint32_t used, uint32_t total, uint32_t block_size, uint64_t block_bytes);
void state_note_prefix_cache(uint32_t entries, uint32_t blocks, uint32_t max_entries);

/* A weight tensor: shape has up to 4 dims (0 = unused); device 0 host,
 * 1 OpenCL. Kept until state_forget_tensors(pool). */
void state_add_tensor(const char *name, const uint32_t shape[4], uint64_t bytes, unsigned pool,
		      unsigned device, unsigned dtype);
void state_forget_tensors(unsigned pool);

/* Re-fires everything (the signal thread calls it; tests may too). */
void state_dump(void);

#endif
