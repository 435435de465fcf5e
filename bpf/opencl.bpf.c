// SPDX-License-Identifier: GPL-2.0
/* opencl.bpf.c - the programs of opencl.bpf.h (which says what they do). */
#include "core.bpf.h"
#include "opencl.bpf.h"

/* ---- waits and builds: entry saves args, return sends one record ---- */
SEC("uprobe")
int BPF_KPROBE(cl_finish_entry, __u64 queue)
{
	return cl_enter(CL_OP_FINISH, queue, 0, 0, 0, 0, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(cl_finish_ret, int status)
{
	struct cl_pending p;
	__u64 now = bpf_ktime_get_ns();

	if (cl_leave(CL_OP_FINISH, &p))
		cl_send_call(EV_CL_WAIT, CL_OP_FINISH, &p, now, 0, status, 1, 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(cl_wait_entry, __u32 nevents)
{
	/* handle: no queue; bytes carries the number of events */
	return cl_enter(CL_OP_WAIT_EVENTS, 0, nevents, 0, 0, 0, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(cl_wait_ret, int status)
{
	struct cl_pending p;
	__u64 now = bpf_ktime_get_ns();

	if (cl_leave(CL_OP_WAIT_EVENTS, &p))
		cl_send_call(EV_CL_WAIT, CL_OP_WAIT_EVENTS, &p, now, p.a[1], status, 1, 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(cl_build_entry, __u64 program)
{
	return cl_enter(CL_OP_BUILD, program, 0, 0, 0, 0, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(cl_build_ret, int status)
{
	struct cl_pending p;
	__u64 now = bpf_ktime_get_ns();

	if (cl_leave(CL_OP_BUILD, &p))
		cl_send_call(EV_CL_BUILD, CL_OP_BUILD, &p, now, 0, status, 0, 0);
	return 0;
}

/* clEnqueueRead/WriteBuffer(queue, buffer, blocking, offset, size, ptr, ...) */
SEC("uprobe")
int BPF_KPROBE(cl_read_entry, __u64 queue, __u64 buf, __u32 blocking, __u64 off, __u64 size)
{
	return cl_enter(CL_OP_READ, queue, buf, blocking, off, size, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(cl_read_ret, int status)
{
	return cl_transfer_ret(CL_OP_READ, status);
}

SEC("uprobe")
int BPF_KPROBE(cl_write_entry, __u64 queue, __u64 buf, __u32 blocking, __u64 off, __u64 size)
{
	return cl_enter(CL_OP_WRITE, queue, buf, blocking, off, size, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(cl_write_ret, int status)
{
	return cl_transfer_ret(CL_OP_WRITE, status);
}

/* clEnqueueMapBuffer(queue, buffer, blocking, flags, offset, size, ...):
 * returns a pointer, so its status is not known here (sent as 0). */
SEC("uprobe")
int cl_map_entry(struct pt_regs *ctx)
{
	return cl_enter(CL_OP_MAP, PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), (__u32)PT_REGS_PARM3(ctx),
			PT_REGS_PARM5(ctx), CL_PARM6(ctx), PT_REGS_PARM4(ctx));
}

SEC("uretprobe")
int cl_map_ret(struct pt_regs *ctx)
{
	return cl_transfer_ret(CL_OP_MAP, 0);
}

/* ---- kernel names ---- */
SEC("uprobe")
int BPF_KPROBE(cl_create_kernel_entry, __u64 program, __u64 name)
{
	return cl_enter(CL_PEND_CREATE_KERN, program, name, 0, 0, 0, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(cl_create_kernel_ret, __u64 kernel)
{
	struct cl_handle_key k = { .pid = bpf_get_current_pid_tgid() >> 32, .handle = kernel };
	struct cl_name n = {};
	struct cl_pending p;

	if (!cl_leave(CL_PEND_CREATE_KERN, &p) || !kernel)
		return 0;
	bpf_probe_read_user_str(n.s, sizeof(n.s), (void *)p.a[1]);
	bpf_map_update_elem(&cl_names, &k, &n, BPF_ANY);
	return 0;
}

/* clEnqueueNDRangeKernel(queue, kernel, work_dim, offset, global, local,
 *                        nevents, wait_list, event) */
SEC("uprobe")
int cl_ndrange_entry(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), dim = (__u32)PT_REGS_PARM3(ctx);
	__u64 global = PT_REGS_PARM5(ctx), local = CL_PARM6(ctx);
	struct cl_kernel_event *e;

	if (!cl_traced())
		return 0;
	e = lookup_or_init(&cl_enqueues, &tid, &zero_cl_kernel);
	if (!e) {
		COUNT(cl_table_full);
		return 0;
	}
	bpf_probe_read_kernel(e, sizeof(*e), &zero_cl_kernel);
	e->queue = PT_REGS_PARM1(ctx);
	e->kernel = PT_REGS_PARM2(ctx);
	e->work_dim = dim;
	e->event = cl_stack_arg(ctx, 9);   /* the cl_event *, read at return */
	cl_read_sizes(e->global, global, dim);
	cl_read_sizes(e->local, local, dim);
	e->flags = local ? CL_K_LOCAL : 0;
	e->h.ts_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(cl_ndrange_ret, int status)
{
	__u64 now = bpf_ktime_get_ns(), id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct cl_kernel_event *e = bpf_map_lookup_elem(&cl_enqueues, &tid), *out;
	struct cl_handle_key k = { .pid = id >> 32 };
	struct cl_name *n;
	__u64 ev = 0;

	if (!e || !e->h.ts_ns)
		return 0;
	k.handle = e->kernel;
	n = bpf_map_lookup_elem(&cl_names, &k);
	if (n) {
		bpf_probe_read_kernel(e->name, sizeof(e->name), n->s);
		e->flags |= CL_K_NAMED;
	}
	if (e->event && !bpf_probe_read_user(&ev, sizeof(ev), (void *)e->event) && ev && !status)
		e->flags |= CL_K_EVENT;
	e->event = (e->flags & CL_K_EVENT) ? ev : 0;
	e->host_ns = now - e->h.ts_ns;
	e->status = status;
	if (e->event)
		cl_event_note(e, k.pid);
	agg_add(k.pid, AGG_KIND_CL_ENQUEUE, LAYER_NONE, e->host_ns, status != 0);
	out = stream_mode == STREAM_ALL ? reserve(EV_CL_KERNEL, sizeof(*out)) : 0;
	if (out) {
		bpf_probe_read_kernel(out, sizeof(*out), e);
		fill_header(&out->h, EV_CL_KERNEL, e->h.ts_ns);
		submit(out);
	}
	e->h.ts_ns = 0;
	return 0;
}

/* ---- device times the program reads itself ---- */
/* clGetEventProfilingInfo(event, param, size, value, size_ret) */
SEC("uprobe")
int BPF_KPROBE(cl_profiling_entry, __u64 event, __u32 param, __u64 size, __u64 value)
{
	return cl_enter(CL_PEND_PROFILING, event, param, size, value, 0, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(cl_profiling_ret, int status)
{
	struct cl_handle_key k = { .pid = bpf_get_current_pid_tgid() >> 32 };
	struct cl_devtime_event *d;
	struct cl_pending p;
	__u32 i;
	__u64 t;

	if (!cl_leave(CL_PEND_PROFILING, &p) || status || !p.a[3] || p.a[2] < 8)
		return 0;
	i = (__u32)p.a[1] - CL_PROFILING_COMMAND_QUEUED;
	k.handle = p.a[0];
	d = bpf_map_lookup_elem(&cl_events, &k);
	if (!d || i > 3 || bpf_probe_read_user(&t, sizeof(t), (void *)p.a[3]))
		return 0;
	d->t[i & 3] = t;
	d->mask |= 1u << i;
	if (d->mask == (CL_T_QUEUED | CL_T_SUBMIT | CL_T_START | CL_T_END))
		cl_devtime_send(&k, d);
	return 0;
}

/* The program is done with the event: what it read of it is all there is. */
SEC("uprobe")
int BPF_KPROBE(cl_release_event_entry, __u64 event)
{
	struct cl_handle_key k = { .pid = cl_traced(), .handle = event };
	struct cl_devtime_event *d;

	if (!k.pid)
		return 0;
	d = bpf_map_lookup_elem(&cl_events, &k);
	if (!d)
		return 0;
	if (d->mask)
		cl_devtime_send(&k, d);
	else
		bpf_map_delete_elem(&cl_events, &k);
	return 0;
}

/* clCreateBuffer(context, flags, size, host_ptr, errcode) */
SEC("uprobe")
int BPF_KPROBE(cl_create_buf_entry, __u64 context, __u64 flags, __u64 size)
{
	return cl_enter(CL_PEND_CREATE_BUF, context, flags, size, 0, 0, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(cl_create_buf_ret, __u64 mem)
{
	struct cl_handle_key k = { .pid = bpf_get_current_pid_tgid() >> 32, .handle = mem };
	struct cl_mem_val m = {};
	struct cl_ctx_val *c;
	struct cl_pending p;
	__u64 live;

	if (!cl_leave(CL_PEND_CREATE_BUF, &p))
		return 0;
	m.context = p.a[0];
	m.bytes = p.a[2];
	m.refs = 1;
	c = cl_ctx_get(k.pid, m.context);
	if (!mem) {
		cl_send_mem(CL_MEM_CREATE, 0, &m, c, 0, 0, -1);
		return 0;
	}
	if (bpf_map_update_elem(&cl_mems, &k, &m, BPF_ANY)) {
		COUNT(cl_table_full);   /* not counted live; its release shows unknown */
		cl_send_mem(CL_MEM_CREATE, mem, &m, c, 0, 0, 0);
		return 0;
	}
	if (c) {
		live = __sync_fetch_and_add(&c->live_bytes, m.bytes) + m.bytes;
		atomic_max(&c->peak_bytes, live);
		__sync_fetch_and_add(&c->creates, 1);
	}
	cl_send_mem(CL_MEM_CREATE, mem, &m, c, 0, 0, 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(cl_retain_mem_entry, __u64 mem)
{
	struct cl_handle_key k = { .pid = cl_traced(), .handle = mem };
	struct cl_mem_val *m;

	if (!k.pid)
		return 0;
	m = bpf_map_lookup_elem(&cl_mems, &k);
	if (m)
		__sync_fetch_and_add(&m->refs, 1);
	return 0;
}

/* The release is counted at entry: the object may be gone at return. */
SEC("uprobe")
int BPF_KPROBE(cl_release_mem_entry, __u64 mem)
{
	struct cl_handle_key k = { .pid = cl_traced(), .handle = mem };
	struct cl_mem_val *found, m = {};
	struct cl_ctx_val *c = 0;
	__u32 freed = 0;

	if (!k.pid)
		return 0;
	found = bpf_map_lookup_elem(&cl_mems, &k);
	if (!found) {
		cl_send_mem(CL_MEM_RELEASE, mem, &m, 0, 0, 1, 0);
		return 0;
	}
	m = *found;
	c = cl_ctx_get(k.pid, m.context);
	if (__sync_fetch_and_add(&found->refs, -1) <= 1) {
		freed = 1;
		bpf_map_delete_elem(&cl_mems, &k);
		if (c) {
			__sync_fetch_and_add(&c->live_bytes, -m.bytes);
			__sync_fetch_and_add(&c->frees, 1);
		}
	}
	if (c)
		__sync_fetch_and_add(&c->releases, 1);
	cl_send_mem(CL_MEM_RELEASE, mem, &m, c, freed, 0, 0);
	return 0;
}
