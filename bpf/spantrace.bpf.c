// SPDX-License-Identifier: GPL-2.0
/* spantrace.bpf.c - matches the engine's USDT begin/end probes in the kernel.
 *
 * Layout: each *.bpf.c holds programs, each *.bpf.h the maps and helpers
 * they share (core.bpf.h: knobs, maps, counting, the span matcher, pools).
 * The objects are linked into one (bpftool gen object) for one skeleton.
 * This file: the span, token, memory, generic-probe and cl_batch programs,
 * CPU samples, and the exit cleanup.
 *
 * Spans: a per-thread stack (map `threads`, keyed by tid, removed on
 * sched_process_exit) holds {kind, layer, start}. An end that matches the top
 * pops it. An end that matches a deeper frame pops down to it: the frames
 * above were never closed, each is counted in span_errors and dropped, and the
 * matched span is emitted with SPAN_F_MISMATCH. An end that matches nothing is
 * counted and leaves the stack untouched, so one bad end never shifts later
 * spans. Begins past SPAN_STACK_DEPTH are counted (stack_overflow) and their
 * ends swallowed.
 *
 * Every matched duration also goes into the always-on aggregation maps (agg,
 * pools, kv) that the daemon and the record summary read without streaming
 * anything. agg keeps hist.h's log-linear buckets, the one histogram
 * definition userspace shares.
 *
 * Ring buffer: events are submitted without waking the consumer (a wakeup per
 * event costs microseconds); only when the unread data passes wakeup_bytes is
 * the consumer forced awake. Userspace polls with a short timeout instead.
 * fired[t] counts every event offered to the ring buffer, dropped[t] every
 * failed reserve, so delivered + dropped == fired. */
#include "core.bpf.h"
#include "requests.bpf.h"
#include "opencl.bpf.h"
#include "engines.bpf.h"
#include "http.bpf.h"

char LICENSE[] SEC("license") = "GPL";

SEC("usdt")
int BPF_USDT(span_begin_prog, __u32 kind, __s32 layer)
{
	return span_begin(kind, layer);
}

/* Ends read the clock before decoding their arguments (see span_begin). */
static __always_inline int span_end_args(struct pt_regs *ctx, __u32 flags)
{
	__u64 now = bpf_ktime_get_ns();
	long kind = 0, layer = 0;

	if (bpf_usdt_arg(ctx, 0, &kind) || bpf_usdt_arg(ctx, 1, &layer))
		return 0;
	if (flags & SPAN_F_STRUCTURAL) {
		long launch = 0;

		/* an older engine's span_end has no third argument: not told */
		if (!bpf_usdt_arg(ctx, 2, &launch))
			flags |= ((__u32)launch << SPAN_F_LAUNCH_SHIFT) & SPAN_F_LAUNCH_MASK;
	}
	return span_end(now, (__u32)kind, (__s32)layer, flags);
}

SEC("usdt")
int span_end_prog(struct pt_regs *ctx)
{
	return span_end_args(ctx, SPAN_F_STRUCTURAL);
}

SEC("usdt")
int BPF_USDT(op_begin_prog, __u32 kind, __s32 layer)
{
	return span_begin(kind, layer);
}

SEC("usdt")
int op_end_prog(struct pt_regs *ctx)
{
	return span_end_args(ctx, 0);
}

/* ---- tokens ---- */

SEC("usdt")
int BPF_USDT(token_begin_prog, __u64 req, __u32 pos, __u32 token_in)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct thread_state *st;

	if (!traced_tgid())
		return 0;
	st = thread_get(tid, 1);
	if (!st)
		return 0;
	st->req = req;
	st->pos = pos;
	st->token_in = token_in;
	st->token_start_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("usdt")
int BPF_USDT(token_end_prog, __u64 req, __u32 pos, __u32 token_out)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns(), dur;
	struct thread_state *st;
	struct token_event *e;
	__u32 pid = traced_tgid();

	if (!pid)
		return 0;
	st = thread_get(tid, 0);
	if (!st || !st->token_start_ns) {
		span_orphan(0); /* the token began before the attach */
		return 0;
	}
	if (st->pos != pos || st->req != req) {
		span_error();
		return 0;
	}
	dur = now - st->token_start_ns;
	agg_add(pid, AGG_KIND_TOKEN, LAYER_NONE, dur, 0);
	req_emit(pid, req, now, pos, token_out, 0);
	if (stream_mode == STREAM_ALL) {
		e = reserve(EV_TOKEN, sizeof(*e));
		if (e) {
			fill_header(&e->h, EV_TOKEN, st->token_start_ns);
			e->dur_ns = dur;
			e->req = req;
			e->pos = pos;
			e->token_in = st->token_in;
			e->token_out = token_out;
			e->pad = 0;
			submit(e);
		}
	}
	st->token_start_ns = 0;
	return 0;
}

SEC("usdt")
int BPF_USDT(alloc_prog, __u32 pool, __u64 ptr, __u64 bytes, __u64 reserved)
{
	__u32 pid = traced_tgid();

	/* An engine from before `reserved` passes no fourth argument (it reads
	 * 0); an allocation holds at least what it asked for. */
	if (pid)
		pool_alloc(pid, pool, ptr, bytes, reserved < bytes ? bytes : reserved);
	return 0;
}

SEC("usdt")
int BPF_USDT(free_prog, __u32 pool, __u64 ptr, __u64 bytes)
{
	__u32 pid = traced_tgid();

	if (pid)
		pool_free(pid, pool, ptr, bytes);
	return 0;
}

/* Any probe row with no program of its own (probes.def): the row's id is
 * the link's USDT cookie; every argument goes out as read. */
SEC("usdt")
int probe_generic(struct pt_regs *ctx)
{
	struct probe_event *e;
	__u32 pid = traced_tgid();
	long n = bpf_usdt_arg_cnt(ctx);

	if (!pid)
		return 0;
	serving_probe_generic(ctx, pid, (__u32)bpf_usdt_cookie(ctx));
	e = reserve(EV_PROBE, sizeof(*e));
	if (!e)
		return 0;
	fill_header(&e->h, EV_PROBE, bpf_ktime_get_ns());
	e->probe = (__u32)bpf_usdt_cookie(ctx);
	e->nargs = n < 0 ? 0 : n > PROBE_ARGS_MAX ? PROBE_ARGS_MAX : (__u32)n;
	for (int i = 0; i < PROBE_ARGS_MAX; i++) {
		long v = 0;

		if (i < e->nargs)
			bpf_usdt_arg(ctx, i, &v);
		e->args[i] = (__u64)v;
	}
	submit(e);
	return 0;
}

SEC("usdt")
int BPF_USDT(kv_usage_prog, __u64 used, __u64 capacity)
{
	struct kv_val val = {};
	struct kv_event *e;
	__u32 pid = traced_tgid();

	if (!pid)
		return 0;
	val.used_bytes = used;
	val.capacity_bytes = capacity;
	val.ts_ns = bpf_ktime_get_ns();
	bpf_map_update_elem(&kv, &pid, &val, BPF_ANY);
	if (stream_mode != STREAM_ALL)
		return 0;
	e = reserve(EV_KV, sizeof(*e));
	if (!e)
		return 0;
	fill_header(&e->h, EV_KV, val.ts_ns);
	e->used_bytes = used;
	e->capacity_bytes = capacity;
	submit(e);
	return 0;
}

/* ---- OpenCL kernel batches ---- */
struct batch_ctx {
	__u64 records;
	__u64 req;
	__u32 pos;
	__u32 pid;
	__u64 ts;
	struct device_sums dev; /* the thread's, copied in and back out */
};

/* A global function, verified once on its own: inlined at each flush site
 * of the batch loop, agg_add's branches outgrow the verifier's budget. */
__noinline int device_agg_add(__u32 pid, __u32 kind, __s32 layer, __u64 dur)
{
	agg_add(pid, AGG_KIND_DEVICE_BASE + kind, layer, dur, 0);
	return 0;
}

static __always_inline void device_flush_op(struct batch_ctx *bc)
{
	struct device_sums *d = &bc->dev;

	if (d->op_kind < SPAN_KIND_COUNT && d->op_kind != SPAN_FORWARD)
		device_agg_add(bc->pid, d->op_kind, d->op_layer, d->op_ns);
	d->op_kind = SPAN_KIND_COUNT;
	d->op_ns = 0;
}

static __always_inline void device_flush_layer(struct batch_ctx *bc)
{
	struct device_sums *d = &bc->dev;

	if (d->layer != LAYER_NONE)
		device_agg_add(bc->pid, SPAN_LAYER, d->layer, d->layer_ns);
	d->layer = LAYER_NONE;
	d->layer_ns = 0;
}

/* Records arrive in enqueue order, so a span's kernels are consecutive:
 * a change of (span, layer) closes the previous span's sum. The forward's
 * sum closes with its last record (forward_kernels). */
static __always_inline void device_add(struct batch_ctx *bc, const struct cl_kernel_record *r,
				       __u64 dur)
{
	struct device_sums *d = &bc->dev;
	__u32 kind = cl_kernel_span_kind(r->kernel_id);

	if (kind != d->op_kind || r->layer != d->op_layer) {
		device_flush_op(bc);
		d->op_kind = kind;
		d->op_layer = r->layer;
	}
	d->op_ns += dur;
	if (r->layer != d->layer) {
		device_flush_layer(bc);
		d->layer = r->layer;
	}
	d->layer_ns += dur;
	d->total_ns += dur;
	d->seen++;
	if (r->forward_kernels && d->seen >= r->forward_kernels) {
		device_flush_op(bc);
		device_flush_layer(bc);
		device_agg_add(bc->pid, SPAN_FORWARD, LAYER_NONE, d->total_ns);
		d->total_ns = 0;
		d->seen = 0;
	}
}

static long emit_kernel_record(__u64 index, void *data)
{
	struct batch_ctx *bc = data;
	struct cl_kernel_record r;
	struct kernel_event *e;
	__u64 dur;

	if (bpf_probe_read_user(&r, sizeof(r), (void *)(bc->records + index * sizeof(r))))
		return 1; /* unreadable: stop; the rest count as truncated below */
	dur = r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0;
	agg_add(bc->pid, AGG_KIND_KERNEL_BASE + (r.kernel_id & 63), r.layer, dur, 0);
	device_add(bc, &r, dur);
	if (stream_mode != STREAM_ALL)
		return 0;
	e = reserve(EV_KERNEL, sizeof(*e));
	if (!e)
		return 0;
	fill_header(&e->h, EV_KERNEL, bc->ts);
	e->kernel_id = r.kernel_id;
	e->queue = r.queue;
	e->layer = r.layer;
	e->index = index;
	e->queued_ns = r.queued_ns;
	e->submit_ns = r.submit_ns;
	e->start_ns = r.start_ns;
	e->end_ns = r.end_ns;
	e->req = bc->req;
	e->pos = bc->pos;
	e->forward_kernels = r.forward_kernels;
	submit(e);
	return 0;
}

SEC("usdt")
int BPF_USDT(cl_batch_prog, __u64 records, __u32 count)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct batch_ctx bc = {};
	struct thread_state *st;
	__u32 n = count;

	bc.pid = traced_tgid();
	if (!bc.pid)
		return 0;
	bc.records = records;
	bc.ts = bpf_ktime_get_ns();
	st = thread_get(tid, 1);
	if (!st)
		return 0;
	bc.req = st->req;
	bc.pos = st->pos;
	bc.dev = st->dev;
	if (bc.dev.seen == 0) { /* a new forward */
		bc.dev.op_kind = SPAN_KIND_COUNT;
		bc.dev.layer = LAYER_NONE;
	}
	if (n > CL_BATCH_MAX) {
		COUNT_N(kernels_truncated, n - CL_BATCH_MAX);
		n = CL_BATCH_MAX;
	}
	bpf_loop(n, emit_kernel_record, &bc, 0);
	st = thread_get(tid, 0);
	if (st)
		st->dev = bc.dev;
	return 0;
}

/* ---- profile mode: CPU samples tagged with the span they fell in ---- */
SEC("perf_event")
int profile_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	struct thread_state *st;
	struct proc_span *ps;
	struct sample_event *e;
	__u32 d;

	if (tid == 0)
		return 0; /* idle */
	ps = bpf_map_lookup_elem(&proc_span, &tgid);
	/* Without a pid filter (--binary), only processes that ran a span. */
	if (target_tgid ? tgid != target_tgid : !ps)
		return 0;
	e = reserve(EV_SAMPLE, sizeof(*e));
	if (!e)
		return 0;
	fill_header(&e->h, EV_SAMPLE, bpf_ktime_get_ns());
	e->kind = SPAN_KIND_COUNT;
	e->layer = LAYER_NONE;
	e->flags = 0;
	e->pad = 0;
	e->req = 0;
	e->pos = 0;
	e->pad2 = 0;
	st = bpf_map_lookup_elem(&threads, &tid);
	if (st) {
		e->req = st->req;
		e->pos = st->pos;
		d = st->depth;
		if (d > 0 && d <= SPAN_STACK_DEPTH) {
			d = (d - 1) & (SPAN_STACK_DEPTH - 1);
			e->kind = st->stack[d].kind;
			e->layer = st->stack[d].layer;
		}
	}
	if (e->kind == SPAN_KIND_COUNT && ps && ps->kind < SPAN_KIND_COUNT) {
		e->kind = ps->kind;
		e->layer = ps->layer;
		e->flags |= SAMPLE_F_INHERITED;
	}
	e->ustack_id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	e->kstack_id = bpf_get_stackid(ctx, &stacks, 0);
	/* A user thread interrupted in user mode has no kernel stack (-EFAULT):
	 * that is not an error, a missing user stack is. */
	if (e->ustack_id < 0 || (e->kstack_id < 0 && e->kstack_id != -14)) {
		COUNT(stack_errors);
	}
	submit(e);
	return 0;
}

/* ---- cleanup: a thread's stack goes with the thread ---- */
static long drop_pid_alloc(struct bpf_map *map, struct alloc_key *key,
			   struct alloc_val *val, void *data)
{
	if (key->pid == *(__u32 *)data)
		bpf_map_delete_elem(map, key);
	return 0;
}

/* A raw tracepoint: needs no tracefs mount (this machine has none). */
SEC("raw_tp/sched_process_exit")
int handle_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;

	bpf_map_delete_elem(&threads, &tid);
	bpf_map_delete_elem(&engine_calls, &tid);
	bpf_map_delete_elem(&http_reading, &tid);   /* a reused tid read nothing yet */
	cl_forget_thread(tid);
	if (perf_ncounters)
		bpf_map_delete_elem(&thread_counters, &tid);
	/* When the whole process goes, so do its outstanding allocations. The
	 * pools/kv/agg entries stay for the reader, which removes dead pids. */
	/* a process traced for --http may be a traced tree's, outside target_tgid */
	if (tid == tgid && (loaded & LOADED_HTTP))
		http_forget_pid(tgid);
	if (tid == tgid && (!target_tgid || tgid == target_tgid)) {
		if (loaded & (LOADED_PROBES | LOADED_ENGINES))
			bpf_for_each_map_elem(&allocs, drop_pid_alloc, &tgid, 0);
		/* another engine's open requests end with it, before the rest go */
		if (loaded & LOADED_ENGINES)
			bpf_for_each_map_elem(&seqs, seq_end_of_pid, &tgid, 0);
		if (loaded & (LOADED_PROBES | LOADED_ENGINES))
			bpf_for_each_map_elem(&requests, drop_pid_request, &tgid, 0);
		if (loaded & LOADED_OPENCL)
			bpf_for_each_map_elem(&cl_mems, cl_drop_pid_mem, &tgid, 0);
		if (perf_mode)
			bpf_map_delete_elem(&proc_span, &tgid);
	}
	return 0;
}
