// SPDX-License-Identifier: GPL-2.0
/* engines.bpf.c - the programs of engines.bpf.h (which says what they do). */
#include "core.bpf.h"
#include "requests.bpf.h"
#include "engines.bpf.h"

SEC("uprobe")
int engine_span_entry(struct pt_regs *ctx)
{
	ENGINE_PROLOGUE;
	(void)tid;
	return span_begin_entry(ctx, ENGINE_COOKIE_KIND(bpf_get_attach_cookie(ctx)), LAYER_NONE);
}

SEC("uretprobe")
int engine_span_return(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();

	if (!traced_tgid())
		return 0;
	return span_end(now, ENGINE_COOKIE_KIND(bpf_get_attach_cookie(ctx)), LAYER_NONE, 0);
}

SEC("uprobe")
int engine_decode_entry(struct pt_regs *ctx)
{
	ENGINE_PROLOGUE;
	decode_begin(ctx, pid, tid);
	return 0;
}

SEC("uretprobe")
int engine_decode_return(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 pid = traced_tgid();

	if (pid)
		decode_end(ctx, pid, tid, now);
	return 0;
}

SEC("uprobe")
int engine_seq_remove(struct pt_regs *ctx)
{
	ENGINE_PROLOGUE;
	(void)tid;
	seq_remove(ctx, pid, bpf_ktime_get_ns());
	return 0;
}

SEC("uprobe")
int engine_memory_clear(struct pt_regs *ctx)
{
	ENGINE_PROLOGUE;
	struct seq_scan sc = { .pid = pid, .now = bpf_ktime_get_ns() };

	(void)tid;
	bpf_for_each_map_elem(&seqs, seq_end_cb, &sc, 0);
	return 0;
}

SEC("uprobe")
int engine_buf_size(struct pt_regs *ctx)
{
	/* both read first: the verifier wants each context read at a fixed offset */
	__u64 arg2 = PT_REGS_PARM2(ctx), arg3 = PT_REGS_PARM3(ctx);
	ENGINE_PROLOGUE;
	(void)pid;
	call_size(tid, ENGINE_COOKIE_ROLE(bpf_get_attach_cookie(ctx)) == FN_BUF_FROM_HOST ? arg3 : arg2);
	return 0;
}

SEC("uretprobe")
int engine_buf_made(struct pt_regs *ctx)
{
	ENGINE_PROLOGUE;
	buffer_made(ctx, pid, tid);
	return 0;
}

SEC("uprobe")
int engine_buf_usage(struct pt_regs *ctx)
{
	ENGINE_PROLOGUE;
	(void)tid;
	buffer_usage(ctx, pid);
	return 0;
}

SEC("uprobe")
int engine_buf_free(struct pt_regs *ctx)
{
	ENGINE_PROLOGUE;
	(void)tid;
	buffer_free(pid, PT_REGS_PARM1(ctx));
	return 0;
}

SEC("uprobe")
int engine_scope_entry(struct pt_regs *ctx)
{
	ENGINE_PROLOGUE;
	(void)pid;
	tensor_scope(tid, 1);
	return 0;
}

SEC("uretprobe")
int engine_scope_return(struct pt_regs *ctx)
{
	ENGINE_PROLOGUE;
	(void)pid;
	tensor_scope(tid, 0);
	return 0;
}

SEC("uprobe")
int engine_tokenize_entry(struct pt_regs *ctx)
{
	ENGINE_PROLOGUE;
	(void)pid;
	tokenize_begin(ctx, tid);
	return span_begin_entry(ctx, ENGINE_COOKIE_KIND(bpf_get_attach_cookie(ctx)), LAYER_NONE);
}

SEC("uretprobe")
int engine_tokenize_return(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 pid = traced_tgid();

	if (!pid)
		return 0;
	span_end(now, ENGINE_COOKIE_KIND(bpf_get_attach_cookie(ctx)), LAYER_NONE, 0);
	tokenize_end(ctx, pid, tid);
	return 0;
}

SEC("uprobe")
int engine_logits(struct pt_regs *ctx)
{
	ENGINE_PROLOGUE;
	sampling_begin(ctx, pid, tid);
	return 0;
}

SEC("uprobe")
int engine_accept(struct pt_regs *ctx)
{
	ENGINE_PROLOGUE;
	sampling_end(ctx, pid, tid);
	return 0;
}

/* Run by the session before it detaches (BPF_PROG_TEST_RUN): requests
 * still open end at their last output, so a server idle since is reported. */
SEC("syscall")
int engine_flush(void *ctx)
{
	struct seq_scan sc = { .pid = 0, .now = bpf_ktime_get_ns() };

	bpf_for_each_map_elem(&seqs, seq_end_cb, &sc, 0);
	return 0;
}

/* The dynamic linker's notification (_dl_debug_state) in a command that may
 * still load its engine: stop it, and wake the session, which looks at its
 * mappings, attaches, and lets it go on (SIGCONT). A lost record costs only
 * the stop: the process goes on unstopped. */
SEC("uprobe")
int dl_change(struct pt_regs *ctx)
{
	struct event_header *e;

	if (!dl_watch || !traced_tgid())
		return 0;
	e = reserve(EV_DL_CHANGE, sizeof(*e));
	if (!e)
		return 0;
	fill_header(e, EV_DL_CHANGE, bpf_ktime_get_ns());
	bpf_send_signal(ENGINE_SIGSTOP);
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}
