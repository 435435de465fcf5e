// SPDX-License-Identifier: GPL-2.0
/* state.bpf.c - the engine's state dump (inference/base/state.h), on the pool
 * accounting of core.bpf.h. An allocation the
 * tracer has not seen (made before the attach) is added to its pool and to
 * `allocs`, so its free later matches; one it has seen is left alone, so a
 * dump is exact whether it races allocations or repeats. state_kv and
 * state_kv_blocks use kv_usage_prog and kv_blocks_prog. */
#include "core.bpf.h"
#include "requests.bpf.h"

static __always_inline void raise_to(__u64 *peak, __u64 v)
{
	if (v > *peak)
		*peak = v;
}

SEC("usdt")
int BPF_USDT(state_pool_prog, __u32 pool, __u64 peak_bytes, __u64 peak_reserved)
{
	__u32 pid = traced_tgid();
	struct pool_val *pv;

	if (!pid || !(pv = pool_get(pid, pool)))
		return 0;
	raise_to(&pv->peak_bytes, peak_bytes);
	raise_to(&pv->peak_reserved_bytes, peak_reserved);
	return 0;
}

SEC("usdt")
int BPF_USDT(state_alloc_prog, __u32 pool, __u64 ptr, __u64 bytes, __u64 reserved)
{
	struct alloc_key key = {};
	struct alloc_val val = {};
	struct pool_val *pv;

	key.pid = traced_tgid();
	if (!key.pid)
		return 0;
	key.ptr = ptr;
	val.bytes = bytes;
	val.reserved = reserved < bytes ? bytes : reserved;
	val.pool = pool;
	if (bpf_map_update_elem(&allocs, &key, &val, BPF_NOEXIST)) {
		/* Seen already (-EEXIST), or the table is full (counted). */
		if (bpf_map_lookup_elem(&allocs, &key) == NULL)
			COUNT(alloc_table_full);
		return 0;
	}
	pv = pool_get(key.pid, pool);
	if (pv) {
		raise_to(&pv->peak_bytes, __sync_fetch_and_add(&pv->live_bytes, bytes) + bytes);
		raise_to(&pv->peak_reserved_bytes,
			 __sync_fetch_and_add(&pv->reserved_bytes, val.reserved) + val.reserved);
	}
	emit_alloc(EV_ALLOC, pool, ptr, bytes, val.reserved, pv, 2);
	return 0;
}

/* The serving gauges as of the engine's last lifecycle probe: known from
 * the attach on, not from the next admission or finish. */
SEC("usdt")
int BPF_USDT(state_requests_prog, __u32 running, __u32 waiting)
{
	__u32 pid = traced_tgid();

	if (pid)
		serving_gauges(pid, running, waiting);
	return 0;
}

SEC("usdt")
int BPF_USDT(state_tensor_prog, __u64 name, __u64 shape01, __u64 shape23, __u64 bytes, __u32 pool,
	     __u32 device, __u32 dtype)
{
	struct tensor_event *e;

	if (!traced_tgid() || stream_mode != STREAM_ALL)
		return 0;
	e = reserve(EV_TENSOR, sizeof(*e));
	if (!e)
		return 0;
	fill_header(&e->h, EV_TENSOR, bpf_ktime_get_ns());
	if (bpf_probe_read_user_str(e->name, sizeof(e->name), (const void *)name) < 0)
		e->name[0] = 0;
	e->shape[0] = shape01 >> 32;
	e->shape[1] = (__u32)shape01;
	e->shape[2] = shape23 >> 32;
	e->shape[3] = (__u32)shape23;
	e->bytes = bytes;
	e->pool = pool;
	e->device = device;
	e->dtype = dtype;
	e->pad = 0;
	submit(e);
	return 0;
}
