/* opencl.bpf.h - `--opencl`: the maps and helpers (programs: opencl.bpf.c):
 * uprobes and uretprobes on the OpenCL ICD loader's entry points
 * (libOpenCL.so.1), so any program that calls OpenCL through the loader is
 * traced from outside, by pid, with no preload and no restart.
 *
 * An entry saves what the return needs in `cl_pending`, keyed by {tid, op}
 * (loader calls do not nest on a thread); the return times the call and
 * sends one record (opencl_events.h). Kernel names come from clCreateKernel
 * (`cl_names`, {pid, kernel}); buffers and their reference counts from
 * clCreateBuffer/clRetainMemObject/clReleaseMemObject (`cl_mems`), summed
 * per context in `cl_ctxmem`. A kernel enqueued with an event is remembered
 * (`cl_events`, LRU) while the program reads its times with
 * clGetEventProfilingInfo; they are sent when it has read all four, or
 * releases the event (clReleaseEvent) after reading some. Times it never
 * read stay unknown.
 *
 * Without --opencl userspace shrinks every map here to one entry (the LRU
 * maps are preallocated).
 *
 * Arguments past the sixth are on the stack (x86-64 SysV): at a function's
 * first instruction sp points at the return address, argument 7 at sp+8. */
#ifndef SPANTRACE_OPENCL_BPF_H
#define SPANTRACE_OPENCL_BPF_H

#include "core.bpf.h"

#include <bpf/bpf_core_read.h>

#define CL_PENDING_MAX 4096

struct cl_pending_key {
	__u32 tid;
	__u32 op;
};

struct cl_pending {
	__u64 ts;
	__u64 a[6];
};

/* ops of cl_pending beyond enum cl_op (calls that send no call record) */
#define CL_PEND_NDRANGE      (CL_OP_COUNT + 0)
#define CL_PEND_CREATE_KERN  (CL_OP_COUNT + 1)
#define CL_PEND_CREATE_BUF   (CL_OP_COUNT + 2)
#define CL_PEND_PROFILING    (CL_OP_COUNT + 3)

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CL_PENDING_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct cl_pending_key);
	__type(value, struct cl_pending);
} cl_pending __weak SEC(".maps");

/* The kernel record under construction, per thread (too big for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CL_PENDING_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct cl_kernel_event);
} cl_enqueues __weak SEC(".maps");

struct cl_handle_key {
	__u32 pid;
	__u32 pad;
	__u64 handle;
};

struct cl_name {
	char s[CL_NAME_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cl_handle_key);
	__type(value, struct cl_name);
} cl_names __weak SEC(".maps");

struct cl_mem_val {
	__u64 bytes, context;
	__u64 refs;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ALLOC_MAX_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct cl_handle_key);
	__type(value, struct cl_mem_val);
} cl_mems __weak SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct cl_ctx_key);
	__type(value, struct cl_ctx_val);
} cl_ctxmem __weak SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cl_handle_key);
	__type(value, struct cl_devtime_event);
} cl_events __weak SEC(".maps");

static const struct cl_kernel_event zero_cl_kernel;
static const struct cl_devtime_event zero_cl_devtime;
static const struct cl_ctx_val zero_cl_ctx;

/* libbpf 1.1 has no PT_REGS_PARM6 (x86-64: r9). */
#define CL_PARM6(x) ((x)->r9)

/* --binary: only processes running this executable (its inode and device,
 * as the kernel encodes it); 0 = every process target_tgid lets through.
 * The loader is shared by every OpenCL program, so the filter is here. */
const volatile __u64 cl_exe_ino __weak = 0;
const volatile __u32 cl_exe_dev __weak = 0;

/* The tgid when this process's OpenCL calls are traced, else 0. */
static __always_inline __u32 cl_traced(void)
{
	struct task_struct *task;
	__u32 tgid = traced_tgid();

	if (!tgid || !cl_exe_ino)
		return tgid;
	task = (struct task_struct *)bpf_get_current_task();
	if (BPF_CORE_READ(task, mm, exe_file, f_inode, i_ino) != cl_exe_ino ||
	    BPF_CORE_READ(task, mm, exe_file, f_inode, i_sb, s_dev) != cl_exe_dev)
		return 0;
	return tgid;
}

static __always_inline __u64 cl_stack_arg(struct pt_regs *ctx, int n)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)(PT_REGS_SP(ctx) + 8 * (n - 6)));
	return v;
}

/* Saves the entry of op on this thread; 0 when the process is not traced. */
static __always_inline int cl_enter(__u32 op, __u64 a0, __u64 a1, __u64 a2, __u64 a3, __u64 a4, __u64 a5)
{
	struct cl_pending_key k = { .tid = (__u32)bpf_get_current_pid_tgid(), .op = op };
	struct cl_pending p = { .a = { a0, a1, a2, a3, a4, a5 } };

	if (!cl_traced())
		return 0;
	p.ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&cl_pending, &k, &p, BPF_ANY))
		COUNT(cl_table_full);
	return 0;
}

/* Takes the entry of op back at its return; 0 when there was none. */
static __always_inline int cl_leave(__u32 op, struct cl_pending *out)
{
	struct cl_pending_key k = { .tid = (__u32)bpf_get_current_pid_tgid(), .op = op };
	struct cl_pending *p = bpf_map_lookup_elem(&cl_pending, &k);

	if (!p)
		return 0;
	*out = *p;
	bpf_map_delete_elem(&cl_pending, &k);
	return 1;
}

static __always_inline void cl_send_call(__u32 type, __u32 op, const struct cl_pending *p, __u64 now,
					 __u64 bytes, __s32 status, __u32 blocking, __u32 flags)
{
	struct cl_call_event *e;
	__u32 kind = type == EV_CL_WAIT ? AGG_KIND_CL_WAIT :
		     type == EV_CL_TRANSFER ? AGG_KIND_CL_TRANSFER : AGG_KIND_CL_BUILD;

	agg_add(bpf_get_current_pid_tgid() >> 32, kind, LAYER_NONE, now - p->ts, status != 0);
	if (stream_mode != STREAM_ALL)
		return;
	e = reserve(type, sizeof(*e));
	if (!e)
		return;
	fill_header(&e->h, type, p->ts);
	e->host_ns = now - p->ts;
	e->handle = p->a[0];
	e->bytes = bytes;
	e->op = op;
	e->status = status;
	e->blocking = blocking;
	e->flags = flags;
	submit(e);
}

/* ---- transfers: a blocking one is also a wait ---- */
static __always_inline int cl_transfer_ret(__u32 op, int status)
{
	struct cl_pending p;
	__u64 now = bpf_ktime_get_ns();
	__u32 blocking;

	if (!cl_leave(op, &p))
		return 0;
	blocking = p.a[2] != 0;
	/* a[4]: bytes; a[5]: map flags (map only) */
	cl_send_call(EV_CL_TRANSFER, op, &p, now, p.a[4], status, blocking, (__u32)p.a[5]);
	if (blocking)
		cl_send_call(EV_CL_WAIT, op, &p, now, p.a[4], status, 1, (__u32)p.a[5]);
	return 0;
}

/* ---- kernel enqueues ---- */
static __always_inline void cl_read_sizes(__u64 *dst, __u64 src, __u32 dim)
{
	if (dim > 3)
		dim = 3;
	if (src && dim)
		bpf_probe_read_user(dst, dim * sizeof(__u64) & 31, (void *)src);
}

/* Remembers an enqueue whose event the program may read times from. */
static __always_inline void cl_event_note(const struct cl_kernel_event *src, __u32 pid)
{
	struct cl_handle_key k = { .pid = pid, .handle = src->event };
	struct cl_devtime_event *d;

	d = lookup_or_init(&cl_events, &k, &zero_cl_devtime);
	if (!d)
		return;
	bpf_probe_read_kernel(d, sizeof(*d), &zero_cl_devtime);
	d->h.ts_ns = src->h.ts_ns;
	d->event = src->event;
	d->kernel = src->kernel;
	d->queue = src->queue;
	d->named = (src->flags & CL_K_NAMED) != 0;
	bpf_probe_read_kernel(d->name, sizeof(d->name), src->name);
}

#define CL_PROFILING_COMMAND_QUEUED 0x1280

/* Sends the times read so far of one event and forgets it. */
static __always_inline void cl_devtime_send(struct cl_handle_key *k, struct cl_devtime_event *d)
{
	struct cl_devtime_event *out;

	if ((d->mask & (CL_T_START | CL_T_END)) == (CL_T_START | CL_T_END) && d->t[3] >= d->t[2])
		agg_add(k->pid, AGG_KIND_CL_DEVICE, LAYER_NONE, d->t[3] - d->t[2], 0);
	out = stream_mode == STREAM_ALL ? reserve(EV_CL_DEVTIME, sizeof(*out)) : 0;
	if (out) {
		bpf_probe_read_kernel(out, sizeof(*out), d);
		fill_header(&out->h, EV_CL_DEVTIME, d->h.ts_ns);
		submit(out);
	}
	bpf_map_delete_elem(&cl_events, k);
}

/* ---- device memory per context ---- */
static __always_inline struct cl_ctx_val *cl_ctx_get(__u32 pid, __u64 context)
{
	struct cl_ctx_key k = { .pid = pid, .context = context };

	return lookup_or_init(&cl_ctxmem, &k, &zero_cl_ctx);
}

static __always_inline void cl_send_mem(__u32 op, __u64 mem, const struct cl_mem_val *m,
					const struct cl_ctx_val *c, __u32 freed, __u32 unknown, __s32 status)
{
	struct cl_mem_event *e;

	if (stream_mode != STREAM_ALL)
		return;
	e = reserve(EV_CL_MEM, sizeof(*e));
	if (!e)
		return;
	fill_header(&e->h, EV_CL_MEM, bpf_ktime_get_ns());
	e->mem = mem;
	e->context = m->context;
	e->bytes = m->bytes;
	e->live_bytes = c ? c->live_bytes : 0;
	e->peak_bytes = c ? c->peak_bytes : 0;
	e->op = op;
	e->freed = freed;
	e->unknown = unknown;
	e->status = status;
	submit(e);
}

/* A thread's enqueue slot goes with it, a process's buffers with it
 * (called from handle_exit). */
static __always_inline void cl_forget_thread(__u32 tid)
{
	bpf_map_delete_elem(&cl_enqueues, &tid);
}


static inline long cl_drop_pid_mem(struct bpf_map *map, struct cl_handle_key *key, struct cl_mem_val *val,
			    void *data)
{
	if (key->pid == *(__u32 *)data)
		bpf_map_delete_elem(map, key);
	return 0;
}

#endif
