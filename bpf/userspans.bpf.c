// SPDX-License-Identifier: GPL-2.0
/* userspans.bpf.c - `--span`, on core.bpf.h's span matcher: any program's function (uprobe at entry, uretprobe at
 * return) or pair of USDT probes as a span. The attach cookie carries the
 * span kind userspace gave the name (USER_SPAN_BASE + i, user/core/
 * userspans.c), so these spans go through the same per-thread stack,
 * histograms and records as the engine's own. */
#include "core.bpf.h"

SEC("uprobe")
int user_fn_entry(struct pt_regs *ctx)
{
	return span_begin_entry(ctx, (__u32)bpf_get_attach_cookie(ctx), LAYER_NONE);
}

SEC("uretprobe")
int user_fn_return(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();

	return span_end(now, (__u32)bpf_get_attach_cookie(ctx), LAYER_NONE, 0);
}

SEC("usdt")
int user_usdt_begin(struct pt_regs *ctx)
{
	return span_begin((__u32)bpf_usdt_cookie(ctx), LAYER_NONE);
}

SEC("usdt")
int user_usdt_end(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();

	return span_end(now, (__u32)bpf_usdt_cookie(ctx), LAYER_NONE, 0);
}
