// SPDX-License-Identifier: GPL-2.0
/* core.bpf.h - what every BPF object of spantrace shares: the knobs, the
 * maps, the counting and ring-buffer helpers, the span matcher and the pool
 * accounting (spantrace.bpf.c says how they work). The objects are linked
 * into one (bpftool gen object), so the knobs and maps are defined here as
 * weak symbols: each object that includes this file carries the same
 * definition, and the linker keeps one. */
#ifndef SPANTRACE_CORE_BPF_H
#define SPANTRACE_CORE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>
#include "spantrace.h"
#include "maps.bpf.h"

/* ---- knobs, set before load ---- */
const volatile __u32 target_tgid __weak = 0;           /* 0 = every process */
const volatile __u32 level __weak = LEVEL_DETAIL;      /* enum trace_level */
const volatile __u64 min_dur_ns __weak = 0;            /* shorter spans aggregated only */
const volatile __u32 perf_mode __weak = 0;             /* 1 = CPU sampling (profile) */
const volatile __u32 perf_ncounters __weak = 0;        /* span counters, 0 = off */
const volatile __u32 stream_mode __weak = STREAM_ALL;  /* enum stream_mode */
const volatile __u64 wakeup_bytes __weak = 64 * 1024;  /* force a wakeup past this */
const volatile __u32 loaded __weak = LOADED_ALL;       /* LOADED_* families */
/* Set by userspace once every probe is attached, cleared before detaching. */
__u32 armed __weak = 0;
/* Set by userspace before the links go: their removal takes a grace period
 * and runs in parallel, so ends may go before begins, and a begin then
 * would stay open (16 of them overflow the stack). Nothing begun now can
 * end in this session anyway. */
__u32 detaching __weak = 0;

/* ---- maps ---- */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* sized before load: 2 MiB, or --ringbuf-kb */
} rb __weak SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counters);
} counters __weak SEC(".maps");

struct frame {
	__u32 kind;
	__s32 layer;
	__u64 start_ns;
	__u64 site_ip, site_sp; /* a function-entry begin's user ip and sp, else 0 */
};

/* Counter values at each open frame's begin: a map of its own, sized only
 * in perf mode, so that `threads` (and every session's memory) stays small. */
struct frame_counters {
	__u32 cpu;      /* where the counters were read at begin */
	__u32 valid;    /* every begin read succeeded */
	__u64 c[PERF_COUNTERS_MAX];
};

struct thread_counters {
	struct frame_counters f[SPAN_STACK_DEPTH];
};

/* A thread's device time so far, per span of its current forward: the
 * open op's sum, the open layer's and the forward's, flushed into `agg`
 * (AGG_KIND_DEVICE_BASE) as each closes. Kept per thread because a forward's
 * records may arrive in several cl_batch hits. */
struct device_sums {
	__u32 op_kind;     /* SPAN_KIND_COUNT: none open */
	__s32 op_layer;
	__s32 layer;       /* LAYER_NONE: none open */
	__u32 seen;        /* records of this forward so far */
	__u64 op_ns, layer_ns, total_ns;
};

/* The batch of the forward a thread is in (engine profiles' decode), for
 * its span record. */
struct batch_info {
	__u32 n_tokens, n_seqs, n_outputs, pad;
};

struct thread_state {
	__u64 req;
	__u64 token_start_ns;
	__u32 pos;
	__u32 token_in;
	__u32 depth;
	__u32 overflow;   /* begins past the stack, awaiting their ends */
	struct frame stack[SPAN_STACK_DEPTH];
	struct device_sums dev;
	struct batch_info batch;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);            /* tid */
	__type(value, struct thread_state);
} threads __weak SEC(".maps");

struct alloc_key {
	__u32 pid;
	__u32 pad;
	__u64 ptr;
};

struct alloc_val {
	__u64 bytes;
	__u64 reserved;
	__u32 pool;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ALLOC_MAX_ENTRIES);
	__type(key, struct alloc_key);
	__type(value, struct alloc_val);
} allocs __weak SEC(".maps");

/* No preallocation: an entry is 4 KB, and a process uses 10 (coarse) to
 * ~200 (detail, OpenCL) of them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AGG_MAX_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct agg_key);
	__type(value, struct agg_val);
} agg __weak SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct pool_key);
	__type(value, struct pool_val);
} pools __weak SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct kv_val);
} kv __weak SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SPAN_KIND_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} slow_ns __weak SEC(".maps");

/* ---- profile mode maps (sized 1 unless in use; see spantrace.h) ---- */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(max_entries, 1);   /* ncpus * perf_ncounters, set before load */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} perf_counters __weak SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);   /* 16384 (as `threads`) when counting */
	__type(key, __u32);       /* tid */
	__type(value, struct thread_counters);
} thread_counters __weak SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 1);   /* PROFILE_STACK_ENTRIES when sampling */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, PROFILE_STACK_DEPTH * sizeof(__u64));
} stacks __weak SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);            /* tgid */
	__type(value, struct proc_span);
} proc_span __weak SEC(".maps");

static const struct agg_val zero_agg;
static const struct thread_counters zero_thread_counters;
static const struct thread_state zero_thread;
static const struct pool_val zero_pool;

/* ---- small helpers ---- */
static __always_inline struct counters *cnt(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&counters, &zero);
}

/* counters.field += n on this CPU. */
#define COUNT_N(field, n) do { struct counters *c__ = cnt(); if (c__) c__->field += (n); } while (0)
#define COUNT(field) COUNT_N(field, 1)

/* Returns the tgid when this process is traced, 0 when it is filtered out. */
static __always_inline __u32 traced_tgid(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (target_tgid && tgid != target_tgid)
		return 0;
	return tgid;
}

static __always_inline void fill_header(struct event_header *h, __u32 type, __u64 ts)
{
	__u64 id = bpf_get_current_pid_tgid();
	h->type = type;
	h->pid = id >> 32;
	h->tid = (__u32)id;
	h->cpu = bpf_get_smp_processor_id();
	h->ts_ns = ts;
}

/* Reserves an event of `type`, counting it as fired (and dropped on failure). */
static __always_inline void *reserve(__u32 type, __u64 size)
{
	void *e;

	if (type >= EV_TYPE_COUNT)
		return 0;
	COUNT(fired[type]);
	e = bpf_ringbuf_reserve(&rb, size, 0);
	if (!e)
		COUNT(dropped[type]);
	return e;
}

static __always_inline void submit(void *e)
{
	/* Wake the consumer only when enough has piled up; it also polls. */
	__u64 avail = bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA);
	bpf_ringbuf_submit(e, avail > wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/* n observations of one duration (the first; any others 0) into their
 * histogram; CPUs share the entry. */
static __always_inline void agg_add_n(__u32 pid, __u32 kind, __s32 layer, __u64 dur, __u64 n, int error)
{
	struct agg_key key = { .pid = pid, .kind = kind, .layer = layer };
	struct agg_val *v = lookup_or_init(&agg, &key, &zero_agg);
	__u32 b = hist_bucket(dur), b0 = hist_bucket(0);

	if (!v) {
		COUNT(agg_table_full);
		return;
	}
	__sync_fetch_and_add(&v->count, n);
	__sync_fetch_and_add(&v->sum_ns, dur);
	atomic_max(&v->max_ns, dur);
	if (error)
		__sync_fetch_and_add(&v->errors, 1);
	if (b < HIST_BUCKETS)
		__sync_fetch_and_add(&v->buckets[b], 1);
	if (n > 1 && b0 < HIST_BUCKETS)
		__sync_fetch_and_add(&v->buckets[b0], n - 1);
}

/* One duration into its histogram. */
static __always_inline void agg_add(__u32 pid, __u32 kind, __s32 layer, __u64 dur, int error)
{
	agg_add_n(pid, kind, layer, dur, 1, error);
}

static __always_inline struct thread_state *thread_get(__u32 tid, int create)
{
	return create ? lookup_or_init(&threads, &tid, &zero_thread) : bpf_map_lookup_elem(&threads, &tid);
}

/* ---- profile mode: counters and the process's current span ---- */
/* Reads counter i of this CPU, scaled for multiplexing like perf does. */
static __always_inline int counter_read(__u32 cpu, __u32 i, __u64 *out)
{
	struct bpf_perf_event_value v;
	__u64 idx = (__u64)cpu * perf_ncounters + i;

	if (bpf_perf_event_read_value(&perf_counters, idx, &v, sizeof(v)))
		return -1;
	*out = v.running && v.running < v.enabled ? v.counter * v.enabled / v.running : v.counter;
	return 0;
}

static __always_inline struct frame_counters *frame_counters_get(__u32 d, int create)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct thread_counters *tc = create ? lookup_or_init(&thread_counters, &tid, &zero_thread_counters)
					   : bpf_map_lookup_elem(&thread_counters, &tid);

	return tc ? &tc->f[d & (SPAN_STACK_DEPTH - 1)] : 0;
}

/* Frame d's begin values; a frame that got none stays invalid. */
static __always_inline void counters_begin(__u32 d)
{
	struct frame_counters *f = frame_counters_get(d, 1);
	__u32 cpu = bpf_get_smp_processor_id();

	if (!f)
		return;
	f->cpu = cpu;
	f->valid = 1;
	for (__u32 i = 0; i < PERF_COUNTERS_MAX; i++) {
		if (i >= perf_ncounters)
			break;
		if (counter_read(cpu, i, &f->c[i]))
			f->valid = 0;
	}
}

/* Fills e->counters with end - begin, or counts the span as unmeasured:
 * per-CPU counters only mean something for a span that stayed on its CPU. */
static __always_inline void counters_end(__u32 d, struct span_event *e)
{
	struct frame_counters *f = frame_counters_get(d, 0);
	__u32 cpu = bpf_get_smp_processor_id();
	__u64 now;

	if (f && f->valid && f->cpu == cpu) {
		f->valid = 0; /* the frame is closed */
		e->ncounters = perf_ncounters;
		for (__u32 i = 0; i < PERF_COUNTERS_MAX; i++) {
			if (i >= perf_ncounters)
				break;
			if (counter_read(cpu, i, &now)) {
				e->ncounters = 0;
				break;
			}
			e->counters[i] = now - f->c[i];
		}
		if (e->ncounters)
			return;
		__builtin_memset(e->counters, 0, sizeof(e->counters));
	}
	COUNT(counters_invalid);
}

static const struct proc_span no_proc_span = { .kind = SPAN_KIND_COUNT, .layer = LAYER_NONE };

/* Makes the process's current span the thread's new stack top (depth
 * frames open), so that worker threads' samples are attributed to it. */
static __always_inline void proc_span_set(struct thread_state *st, __u32 depth)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct proc_span ps = no_proc_span;

	if (depth > 0 && depth <= SPAN_STACK_DEPTH) {
		ps.kind = st->stack[(depth - 1) & (SPAN_STACK_DEPTH - 1)].kind;
		ps.layer = st->stack[(depth - 1) & (SPAN_STACK_DEPTH - 1)].layer;
	}
	bpf_map_update_elem(&proc_span, &tgid, &ps, BPF_ANY);
}

/* ---- spans ---- */
/* Position of a new frame begun at a function entry (ip, sp) on a stack
 * of depth d: under the frames on top begun at the same entry, in the same
 * call. Two probes on one function (the llama.cpp profile's and a --span on
 * llama_decode, say) begin in attach order, and the kernel runs their
 * return probes in that same order, so the first to begin ends first: it
 * must be the innermost. Only function entries compare: a USDT site in a
 * helper (the engine's trace_span_begin) fires at one ip and sp for every
 * span its caller begins. */
static __always_inline __u32 begin_slot(const struct thread_state *st, __u32 d, __u64 ip, __u64 sp)
{
	for (__u32 k = 0; k < SPAN_STACK_DEPTH; k++) {
		const struct frame *f;

		if (d == 0 || !ip)
			break;
		f = &st->stack[(d - 1) & (SPAN_STACK_DEPTH - 1)];
		if (f->site_ip != ip || f->site_sp != sp)
			break;
		d--;
	}
	return d;
}

/* Pushes a frame; ip and sp are the user registers of a function-entry
 * uprobe, or 0 (see begin_slot). */
static __always_inline int span_push(__u32 kind, __s32 layer, __u64 ip, __u64 sp)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct thread_state *st;
	__u32 d, slot;

	if (detaching || !traced_tgid())
		return 0;
	st = thread_get(tid, 1);
	if (!st)
		return 0;
	d = st->depth;
	if (d >= SPAN_STACK_DEPTH) {
		st->overflow++;
		COUNT(stack_overflow);
		return 0;
	}
	slot = begin_slot(st, d, ip, sp);
	/* Frames above the slot move up one; each position keeps its clock
	 * and counters, all read in the same hit. */
	for (__u32 k = 0; k < SPAN_STACK_DEPTH; k++) {
		struct frame *to, *from;

		if (d - k <= slot)
			break;
		to = &st->stack[(d - k) & (SPAN_STACK_DEPTH - 1)];
		from = &st->stack[(d - k - 1) & (SPAN_STACK_DEPTH - 1)];
		to->kind = from->kind;
		to->layer = from->layer;
	}
	st->stack[slot & (SPAN_STACK_DEPTH - 1)].kind = kind;
	st->stack[slot & (SPAN_STACK_DEPTH - 1)].layer = layer;
	st->stack[d & (SPAN_STACK_DEPTH - 1)].site_ip = ip;
	st->stack[d & (SPAN_STACK_DEPTH - 1)].site_sp = sp;
	st->depth = d + 1;
	if (perf_mode)
		proc_span_set(st, d + 1);
	if (perf_ncounters)
		counters_begin(d);
	/* Clock last at a begin and first at an end (before the USDT
	 * arguments are decoded): the span then covers as little of the
	 * probe's own cost as possible. */
	st->stack[d & (SPAN_STACK_DEPTH - 1)].start_ns = bpf_ktime_get_ns();
	return 0;
}

/* A span begun by a USDT probe. */
static __always_inline int span_begin(__u32 kind, __s32 layer)
{
	return span_push(kind, layer, 0, 0);
}

/* A span begun by a uprobe at a function's entry (ctx its registers). */
static __always_inline int span_begin_entry(struct pt_regs *ctx, __u32 kind, __s32 layer)
{
	return span_push(kind, layer, PT_REGS_IP(ctx), PT_REGS_SP(ctx));
}

static __always_inline void span_error(void)
{
	COUNT(span_errors);
}

/* An end whose begin was never seen. Ends are attached before begins, so
 * once everything is armed the observed stack is the top of the real one:
 * a span that began before the attach can only end when the observed stack
 * is empty. An unmatched end on a non-empty stack after arming is a real
 * nesting error; before arming, begins may still be unattached. */
static __always_inline void span_orphan(__u32 depth)
{

	if (depth && armed) {
		span_error();
		return;
	}
	COUNT(orphan_ends);
}

static __always_inline int stream_span(__u32 kind, __u64 dur)
{
	if (stream_mode == STREAM_TAIL) {
		__u32 k = kind;
		__u64 *thr = bpf_map_lookup_elem(&slow_ns, &k);
		return thr && dur >= *thr;
	}
	return dur >= min_dur_ns;
}

static __always_inline void emit_span(struct thread_state *st, __u32 pid, __u32 i,
				      __u64 now, __u32 flags)
{
	struct frame *f, *p;
	struct span_event *e;
	__u64 dur;
	__u32 kind;
	__s32 layer;

	i &= SPAN_STACK_DEPTH - 1;
	f = &st->stack[i];
	kind = f->kind;
	layer = f->layer;
	dur = now - f->start_ns;
	agg_add(pid, kind, layer, dur, flags & SPAN_F_MISMATCH);
	if (!stream_span(kind, dur))
		return;
	e = reserve(EV_SPAN, sizeof(*e));
	if (!e)
		return;
	fill_header(&e->h, EV_SPAN, f->start_ns);
	e->dur_ns = dur;
	e->kind = kind;
	e->layer = layer;
	e->depth = i;
	if (i > 0) {
		p = &st->stack[(i - 1) & (SPAN_STACK_DEPTH - 1)];
		e->parent_kind = p->kind;
		e->parent_layer = p->layer;
	} else {
		e->parent_kind = SPAN_KIND_COUNT;
		e->parent_layer = LAYER_NONE;
	}
	e->flags = flags;
	e->req = st->req;
	e->pos = st->pos;
	e->ncounters = 0;
	__builtin_memset(e->counters, 0, sizeof(e->counters));
	e->device_ns = DEVICE_NS_NONE; /* userspace joins the kernels */
	if (flags & SPAN_F_BATCH) {
		e->n_tokens = st->batch.n_tokens;
		e->n_seqs = st->batch.n_seqs;
		e->n_outputs = st->batch.n_outputs;
	} else {
		e->n_tokens = e->n_seqs = e->n_outputs = 0;
	}
	e->pad = 0;
	if (perf_ncounters)
		counters_end(i, e);
	submit(e);
}

static __always_inline int span_end(__u64 now, __u32 kind, __s32 layer, __u32 flags)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct thread_state *st;
	__u32 pid, d, i, depth;

	pid = traced_tgid();
	if (!pid)
		return 0;
	st = thread_get(tid, 0);
	if (!st) {
		span_orphan(0);
		return 0;
	}
	if (st->overflow) {
		/* LIFO: this end closes the newest begin that did not fit. */
		st->overflow--;
		return 0;
	}
	depth = st->depth;
	if (depth == 0 || depth > SPAN_STACK_DEPTH) {
		span_orphan(0);
		return 0;
	}
	/* Find the innermost open frame with this kind and layer. */
	for (d = 0; d < SPAN_STACK_DEPTH; d++) {
		if (d >= depth)
			break;
		i = (depth - 1 - d) & (SPAN_STACK_DEPTH - 1);
		if (st->stack[i].kind == kind && st->stack[i].layer == layer) {
			/* d frames above it were never closed: each is an error. */
			if (d) {
				COUNT_N(span_errors, d);
				flags |= SPAN_F_MISMATCH;
			}
			emit_span(st, pid, i, now, flags);
			st->depth = i;
			if (perf_mode)
				proc_span_set(st, i);
			return 0;
		}
	}
	span_orphan(depth);
	return 0;
}

/* ---- memory ---- */
static __always_inline struct pool_val *pool_get(__u32 pid, __u32 pool)
{
	struct pool_key key = { .pid = pid, .pool = pool };

	return lookup_or_init(&pools, &key, &zero_pool);
}

static __always_inline void emit_alloc(__u32 type, __u32 pool, __u64 ptr, __u64 bytes,
				       __u64 reserved, struct pool_val *pv, __u32 unknown)
{
	struct alloc_event *e;

	if (stream_mode != STREAM_ALL)
		return;
	e = reserve(type, sizeof(*e));
	if (!e)
		return;
	fill_header(&e->h, type, bpf_ktime_get_ns());
	e->ptr = ptr;
	e->bytes = bytes;
	e->reserved = reserved;
	e->live_bytes = pv ? pv->live_bytes : 0;
	e->peak_bytes = pv ? pv->peak_bytes : 0;
	e->reserved_bytes = pv ? pv->reserved_bytes : 0;
	e->pool = pool;
	e->unknown = unknown;
	submit(e);
}

/* Takes an outstanding allocation's bytes back out of its pool. */
static __always_inline struct pool_val *pool_release(__u32 pid, const struct alloc_val *v)
{
	struct pool_val *pv = pool_get(pid, v->pool);

	if (pv) {
		__sync_fetch_and_add(&pv->live_bytes, -v->bytes);
		__sync_fetch_and_add(&pv->reserved_bytes, -v->reserved);
		__sync_fetch_and_add(&pv->frees, 1);
	}
	return pv;
}

/* An allocation of ptr into pool (the alloc probe's, or another engine's
 * buffer); bytes it asked for, reserved it holds from the system. */
static __always_inline void pool_alloc(__u32 pid, __u32 pool, __u64 ptr, __u64 bytes, __u64 reserved)
{
	struct alloc_key key = { .pid = pid, .ptr = ptr };
	struct alloc_val val = {}, *old;
	struct pool_val *pv;
	__u64 live, held;

	old = bpf_map_lookup_elem(&allocs, &key);
	if (old && old->pool < POOL_COUNT) {   /* POOL_COUNT: a placeholder (engines.bpf.h) */
		/* Its free was never seen: without this its bytes stay live. */
		val = *old;
		pool_release(pid, &val);
		COUNT(missed_frees);
	}
	val.bytes = bytes;
	val.reserved = reserved;
	val.pool = pool;
	if (bpf_map_update_elem(&allocs, &key, &val, BPF_ANY)) {
		/* Not tracked, so not counted live either: its free will show
		 * up as unknown, like that of an allocation made before the
		 * attach, and the pool's figures stay consistent. */
		COUNT(alloc_table_full);
		emit_alloc(EV_ALLOC, pool, ptr, bytes, reserved, pool_get(pid, pool), 0);
		return;
	}
	pv = pool_get(pid, pool);
	if (pv) {
		live = __sync_fetch_and_add(&pv->live_bytes, bytes) + bytes;
		if (live > pv->peak_bytes)
			pv->peak_bytes = live;
		held = __sync_fetch_and_add(&pv->reserved_bytes, reserved) + reserved;
		if (held > pv->peak_reserved_bytes)
			pv->peak_reserved_bytes = held;
		__sync_fetch_and_add(&pv->allocs, 1);
	}
	emit_alloc(EV_ALLOC, pool, ptr, bytes, reserved, pv, 0);
}

/* The free of ptr; pool and bytes are only what the caller says (for the
 * record of a free never seen allocated). */
static __always_inline void pool_free(__u32 pid, __u32 pool, __u64 ptr, __u64 bytes)
{
	struct alloc_key key = { .pid = pid, .ptr = ptr };
	struct alloc_val *found, val;
	struct pool_val *pv;

	found = bpf_map_lookup_elem(&allocs, &key);
	if (!found) {
		/* Allocated before we attached, or never: do not guess its size. */
		COUNT(unknown_frees);
		emit_alloc(EV_FREE, pool, ptr, bytes, 0, 0, 1);
		return;
	}
	val = *found;
	bpf_map_delete_elem(&allocs, &key);
	pv = pool_release(pid, &val);
	emit_alloc(EV_FREE, val.pool, ptr, val.bytes, val.reserved, pv, 0);
}

#endif
