/* pool.c - accounting for the engine's memory pools.
 *
 * Counters are updated atomically: the OpenCL backend or a future server
 * thread may allocate off the main thread. Each probe name has exactly one
 * site (announce_alloc / announce_free), so a tracer attaches once. */
#include <stdlib.h>
#include "pool.h"

static PoolStats pools[POOL_COUNT];

/* noinline+noclone: keep a single probe site however often it is called. */
static __attribute__((noinline, noclone)) void
announce_alloc(enum pool_id pool, uint64_t handle, uint64_t bytes)
{
	INFER_PROBE3(alloc, (unsigned)pool, handle, bytes);
}

static __attribute__((noinline, noclone)) void
announce_free(enum pool_id pool, uint64_t handle, uint64_t bytes)
{
	INFER_PROBE3(free, (unsigned)pool, handle, bytes);
}

static void count_alloc(enum pool_id pool, uint64_t bytes)
{
	PoolStats *s = &pools[pool];
	uint64_t live;
	uint64_t peak = __atomic_load_n(&s->peak_bytes, __ATOMIC_RELAXED);

	__atomic_fetch_add(&s->allocs, 1, __ATOMIC_RELAXED);
	live = __atomic_add_fetch(&s->live_bytes, bytes, __ATOMIC_RELAXED);
	while (live > peak &&
	       !__atomic_compare_exchange_n(&s->peak_bytes, &peak, live, 1,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static void count_free(enum pool_id pool, uint64_t bytes)
{
	__atomic_fetch_add(&pools[pool].frees, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&pools[pool].live_bytes, bytes, __ATOMIC_RELAXED);
}

void *pool_alloc(enum pool_id pool, size_t bytes)
{
	void *p;

	if ((unsigned)pool >= POOL_COUNT)
		return NULL;
	p = calloc(1, bytes ? bytes : 1);
	if (!p)
		return NULL;
	count_alloc(pool, bytes);
	announce_alloc(pool, (uintptr_t)p, bytes);
	return p;
}

void pool_free(enum pool_id pool, void *p, size_t bytes)
{
	if (!p || (unsigned)pool >= POOL_COUNT)
		return;
	count_free(pool, bytes);
	announce_free(pool, (uintptr_t)p, bytes);
	free(p);
}

void pool_note_alloc(enum pool_id pool, uint64_t handle, size_t bytes)
{
	if ((unsigned)pool >= POOL_COUNT)
		return;
	count_alloc(pool, bytes);
	announce_alloc(pool, handle, bytes);
}

void pool_note_free(enum pool_id pool, uint64_t handle, size_t bytes)
{
	if ((unsigned)pool >= POOL_COUNT)
		return;
	count_free(pool, bytes);
	announce_free(pool, handle, bytes);
}

void pool_get_stats(enum pool_id pool, PoolStats *out)
{
	const PoolStats *s;

	if ((unsigned)pool >= POOL_COUNT) {
		*out = (PoolStats){ 0 };
		return;
	}
	s = &pools[pool];
	out->allocs = __atomic_load_n(&s->allocs, __ATOMIC_RELAXED);
	out->frees = __atomic_load_n(&s->frees, __ATOMIC_RELAXED);
	out->live_bytes = __atomic_load_n(&s->live_bytes, __ATOMIC_RELAXED);
	out->peak_bytes = __atomic_load_n(&s->peak_bytes, __ATOMIC_RELAXED);
}
