/* state.c - the engine's state for tracers that attach late (see state.h). */
#include "base/state.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "base/usdt.h"

#define MAX_TENSORS 1024   /* a GGUF file lists each layer's tensors: 9 a layer */

struct live_alloc {
	uint64_t handle, bytes, reserved;
	unsigned pool;
};

struct tensor_note {   /* a tensor as announced, for a late tracer (not model.h's Tensor) */
	char name[48];
	uint32_t shape[4];
	uint64_t bytes;
	unsigned dtype;   /* tensor_dtype_names (spantrace/probes.h) */
	unsigned pool, device;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct live_alloc *live;
static size_t nlive, cap_live;
static struct tensor_note tensors[MAX_TENSORS];
static size_t ntensors;
static uint64_t kv_used, kv_cap;
static uint32_t kvb_used, kvb_total, kvb_size;
static uint64_t kvb_bytes;
static int kv_known, kvb_known, gauges_known;
static uint32_t pc_entries, pc_blocks, pc_max; /* the prefix cache, as last announced */
static int pc_known;
static uint32_t g_running, g_waiting;
static uint64_t peaks[POOL_COUNT][2];   /* bytes, reserved: what pool.c last said */

void state_lock(void) { pthread_mutex_lock(&lock); }
void state_unlock(void) { pthread_mutex_unlock(&lock); }

void state_note_peaks(unsigned pool, uint64_t peak_bytes, uint64_t peak_reserved_bytes)
{
	if (pool < POOL_COUNT) {
		peaks[pool][0] = peak_bytes;
		peaks[pool][1] = peak_reserved_bytes;
	}
}

int state_track(unsigned pool, uint64_t handle, uint64_t bytes, uint64_t reserved)
{
	if (nlive == cap_live) {
		size_t ncap = cap_live ? cap_live * 2 : 64;
		struct live_alloc *n = realloc(live, ncap * sizeof(*n));
		if (!n)
			return -1;
		live = n;
		cap_live = ncap;
	}
	live[nlive++] = (struct live_alloc){ handle, bytes, reserved, pool };
	return 0;
}

/* Newest first: most frees are of recent allocations. */
void state_untrack(uint64_t handle)
{
	for (size_t i = nlive; i-- > 0;)
		if (live[i].handle == handle) {
			live[i] = live[--nlive];
			return;
		}
}

void state_note_kv(uint64_t used_bytes, uint64_t capacity_bytes)
{
	state_lock();
	kv_used = used_bytes;
	kv_cap = capacity_bytes;
	kv_known = 1;
	state_unlock();
}

void state_note_gauges(uint32_t running, uint32_t waiting)
{
	state_lock();
	g_running = running;
	g_waiting = waiting;
	gauges_known = 1;
	state_unlock();
}

void state_note_kv_blocks(uint32_t used, uint32_t total, uint32_t block_size, uint64_t block_bytes)
{
	state_lock();
	kvb_used = used;
	kvb_total = total;
	kvb_size = block_size;
	kvb_bytes = block_bytes;
	kvb_known = 1;
	state_unlock();
}

void state_note_prefix_cache(uint32_t entries, uint32_t blocks, uint32_t max_entries)
{
	state_lock();
	pc_entries = entries;
	pc_blocks = blocks;
	pc_max = max_entries;
	pc_known = 1;
	state_unlock();
}

void state_add_tensor(const char *name, const uint32_t shape[4], uint64_t bytes, unsigned pool,
		      unsigned device, unsigned dtype)
{
	state_lock();
	if (ntensors < MAX_TENSORS) {
		struct tensor_note *t = &tensors[ntensors++];
		strncpy(t->name, name, sizeof(t->name) - 1);
		t->name[sizeof(t->name) - 1] = 0;
		memcpy(t->shape, shape, sizeof(t->shape));
		t->bytes = bytes;
		t->dtype = dtype;
		t->pool = pool;
		t->device = device;
	}
	state_unlock();
}

void state_forget_tensors(unsigned pool)
{
	size_t k = 0;

	state_lock();
	for (size_t i = 0; i < ntensors; i++)
		if (tensors[i].pool != pool)
			tensors[k++] = tensors[i];
	ntensors = k;
	state_unlock();
}

/* noinline: the probes then take their arguments from registers; read
 * from globals directly they become "8@kv_used(%rip)", which tracers
 * (libbpf's USDT support among them) cannot read. */
static __attribute__((noinline)) void fire_kv(uint64_t used, uint64_t cap)
{
	usdt_state_kv(used, cap);
}

static __attribute__((noinline)) void fire_kv_blocks(uint32_t used, uint32_t total, uint32_t size,
						     uint64_t bytes)
{
	usdt_state_kv_blocks(used, total, size, bytes);
}

static __attribute__((noinline)) void fire_prefix_cache(uint32_t entries, uint32_t blocks, uint32_t max)
{
	usdt_state_prefix_cache(entries, blocks, max);
}

static __attribute__((noinline)) void fire_gauges(uint32_t running, uint32_t waiting)
{
	usdt_state_requests(running, waiting);
}

static __attribute__((noinline)) void fire_end(uint32_t allocs, uint32_t ntens)
{
	usdt_state_end(allocs, ntens);
}

static void dump_tensors(void)
{
	for (size_t i = 0; i < ntensors; i++) {
		const struct tensor_note *t = &tensors[i];

		(void)t;   /* NO_PROBES builds fire nothing */
		usdt_state_tensor((uint64_t)(uintptr_t)t->name,
			     (uint64_t)t->shape[0] << 32 | t->shape[1],
			     (uint64_t)t->shape[2] << 32 | t->shape[3], t->bytes, t->pool, t->device, t->dtype);
	}
}

void state_dump(void)
{
	state_lock();
	for (unsigned p = 0; p < POOL_COUNT; p++)
		usdt_state_pool(p, peaks[p][0], peaks[p][1]);
	for (size_t i = 0; i < nlive; i++)
		usdt_state_alloc(live[i].pool, live[i].handle, live[i].bytes, live[i].reserved);
	if (kv_known)
		fire_kv(kv_used, kv_cap);
	if (kvb_known)
		fire_kv_blocks(kvb_used, kvb_total, kvb_size, kvb_bytes);
	if (pc_known)
		fire_prefix_cache(pc_entries, pc_blocks, pc_max);
	if (gauges_known)
		fire_gauges(g_running, g_waiting);
	dump_tensors();
	fire_end((uint32_t)nlive, (uint32_t)ntensors);
	state_unlock();
}

#ifndef INFER_NO_PROBES
static void *listener(void *arg)
{
	sigset_t *set = arg;

	for (;;)
		if (sigwaitinfo(set, NULL) > 0)
			state_dump();
	return NULL;
}

/* At load, before any other thread exists: block the signal (threads made
 * later inherit the mask) and start the one thread that waits for it. */
__attribute__((constructor)) static void start_listener(void)
{
	static sigset_t set;
	pthread_attr_t attr;
	pthread_t t;

	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN + INFER_STATE_SIGNAL_OFFSET);
	if (pthread_attr_init(&attr))
		return;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	/* Blocked only if the thread starts: else the signal keeps its default
	 * action and the tracer, seeing it unblocked, never sends it. */
	if (!pthread_sigmask(SIG_BLOCK, &set, NULL) && pthread_create(&t, &attr, listener, &set))
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	pthread_attr_destroy(&attr);
}
#endif
