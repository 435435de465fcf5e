/* pool.c - accounting for the engine's memory pools.
 *
 * Counters are updated atomically: the OpenCL backend and the serving
 * engine's threads (HTTP, step workers) may allocate off the main thread. Each probe name has exactly one
 * site (announce_alloc / announce_free), so a tracer attaches once. Each
 * alloc/free is counted, announced and noted in the live table (state.c)
 * under one lock, so a state dump sits at one point of the probe stream. */
#include <malloc.h>
#include <stdlib.h>
#include "base/pool.h"
#include "base/state.h"
#include "base/usdt.h"

static PoolStats pools[POOL_COUNT];

/* noinline+noclone: keep a single probe site however often it is called. */
static __attribute__((noinline, noclone)) void
announce_alloc(enum pool_id pool, uint64_t handle, uint64_t bytes, uint64_t reserved)
{
	usdt_alloc((unsigned)pool, handle, bytes, reserved);
}

static __attribute__((noinline, noclone)) void
announce_free(enum pool_id pool, uint64_t handle, uint64_t bytes)
{
	usdt_free((unsigned)pool, handle, bytes);
}

static void raise_peak(uint64_t *peak, uint64_t now)
{
	uint64_t seen = __atomic_load_n(peak, __ATOMIC_RELAXED);

	while (now > seen &&
	       !__atomic_compare_exchange_n(peak, &seen, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* Inside the state lock: the peaks go to the live table too, for a dump. */
static void count_alloc(enum pool_id pool, uint64_t bytes, uint64_t reserved)
{
	PoolStats *s = &pools[pool];

	__atomic_fetch_add(&s->allocs, 1, __ATOMIC_RELAXED);
	raise_peak(&s->peak_bytes, __atomic_add_fetch(&s->live_bytes, bytes, __ATOMIC_RELAXED));
	raise_peak(&s->peak_reserved_bytes,
		   __atomic_add_fetch(&s->reserved_bytes, reserved, __ATOMIC_RELAXED));
	state_note_peaks(pool, __atomic_load_n(&s->peak_bytes, __ATOMIC_RELAXED),
			 __atomic_load_n(&s->peak_reserved_bytes, __ATOMIC_RELAXED));
}

static void count_free(enum pool_id pool, uint64_t bytes, uint64_t reserved)
{
	__atomic_fetch_add(&pools[pool].frees, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&pools[pool].reserved_bytes, reserved, __ATOMIC_RELAXED);
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
	size_t reserved = malloc_usable_size(p);
	state_lock();
	count_alloc(pool, bytes, reserved);
	announce_alloc(pool, (uintptr_t)p, bytes, reserved);
	state_track(pool, (uintptr_t)p, bytes, reserved);
	state_unlock();
	return p;
}

void pool_free(enum pool_id pool, void *p, size_t bytes)
{
	if (!p || (unsigned)pool >= POOL_COUNT)
		return;
	state_lock();
	count_free(pool, bytes, malloc_usable_size(p));
	announce_free(pool, (uintptr_t)p, bytes);
	state_untrack((uintptr_t)p);
	state_unlock();
	free(p);
}

void pool_note_alloc(enum pool_id pool, uint64_t handle, size_t bytes, size_t reserved)
{
	if ((unsigned)pool >= POOL_COUNT)
		return;
	if (reserved < bytes)  /* nothing holds less than it was given */
		reserved = bytes;
	state_lock();
	count_alloc(pool, bytes, reserved);
	announce_alloc(pool, handle, bytes, reserved);
	state_track(pool, handle, bytes, reserved);
	state_unlock();
}

void pool_note_free(enum pool_id pool, uint64_t handle, size_t bytes, size_t reserved)
{
	if ((unsigned)pool >= POOL_COUNT)
		return;
	if (reserved < bytes)  /* as pool_note_alloc */
		reserved = bytes;
	state_lock();
	count_free(pool, bytes, reserved);
	announce_free(pool, handle, bytes);
	state_untrack(handle);
	state_unlock();
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
	out->reserved_bytes = __atomic_load_n(&s->reserved_bytes, __ATOMIC_RELAXED);
	out->peak_reserved_bytes = __atomic_load_n(&s->peak_reserved_bytes, __ATOMIC_RELAXED);
}
