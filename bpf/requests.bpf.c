// SPDX-License-Identifier: GPL-2.0
/* requests.bpf.c - the programs of requests.bpf.h (which says what they do). */
#include "core.bpf.h"
#include "requests.bpf.h"

SEC("usdt")
int BPF_USDT(request_begin_prog, __u64 req, __u32 prompt_tokens)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 pid = traced_tgid();
	struct thread_state *st;

	if (!pid)
		return 0;
	req_begin(pid, req, bpf_ktime_get_ns(), prompt_tokens, 0);
	st = thread_get(tid, 1);
	if (st)
		st->req = req;
	return 0;
}

SEC("usdt")
int BPF_USDT(request_end_prog, __u64 req, __u32 generated_tokens)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 pid = traced_tgid();

	if (pid && req_finish(pid, req, now, FINISH_REASON_COUNT, generated_tokens))
		span_orphan(0); /* the request began before the attach */
	return 0;
}

SEC("usdt")
int BPF_USDT(req_queued_prog, __u64 req, __u32 prompt_tokens, __u32 max_tokens, __u32 running, __u32 waiting)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 pid = traced_tgid();
	struct req_state *st;

	if (!pid)
		return 0;
	serving_gauges(pid, running, waiting);
	req_begin(pid, req, now, prompt_tokens, 1);
	st = req_lookup(pid, req);
	if (st)   /* queued by the thread that read it (reqlink.bpf.h) */
		http_link_of_thread(&st->http);
	req_state_record(req, now, REQ_QUEUED, prompt_tokens, max_tokens, running, waiting);
	return 0;
}

SEC("usdt")
int BPF_USDT(req_admitted_prog, __u64 req, __u32 prefill_tokens, __u32 generated, __u32 running,
	     __u32 waiting)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 pid = traced_tgid();
	struct req_state *st;

	if (!pid)
		return 0;
	serving_gauges(pid, running, waiting);
	st = req_lookup(pid, req);
	if (st) {
		if (!st->first_admit_ns)
			st->first_admit_ns = now;
		/* a preemption before the first token starts its prefill over */
		if (!st->first_token_ns)
			st->token_admit_ns = now;
	} else {
		COUNT(req_orphans);
	}
	req_state_record(req, now, REQ_ADMITTED, prefill_tokens, generated, running, waiting);
	return 0;
}

SEC("usdt")
int BPF_USDT(req_preempted_prog, __u64 req, __u32 generated, __u32 blocks_freed, __u32 running,
	     __u32 waiting)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 pid = traced_tgid();
	struct serving_state *s;
	struct req_state *st;

	if (!pid)
		return 0;
	s = serving_gauges(pid, running, waiting);
	if (s)
		__sync_fetch_and_add(&s->v.preemptions, 1);
	st = req_lookup(pid, req);
	if (st)
		st->preemptions++;
	else
		COUNT(req_orphans);
	req_state_record(req, now, REQ_PREEMPTED, generated, blocks_freed, running, waiting);
	return 0;
}

SEC("usdt")
int BPF_USDT(req_finished_prog, __u64 req, __u32 reason, __u32 prompt_tokens, __u32 generated,
	     __u32 running, __u32 waiting)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 pid = traced_tgid();

	if (!pid)
		return 0;
	serving_gauges(pid, running, waiting);
	if (req_finish(pid, req, now, reason < FINISH_REASON_COUNT ? reason : FINISH_REASON_COUNT, generated))
		COUNT(req_orphans);
	return 0;
}

SEC("usdt")
int BPF_USDT(token_emit_prog, __u64 req, __u32 pos, __u32 token_id)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 pid = traced_tgid();
	struct serving_state *s;

	if (!pid)
		return 0;
	s = bpf_map_lookup_elem(&serving, &pid);
	req_emit(pid, req, now, pos, token_id, s ? s->step : 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(step_begin_prog, __u64 step)
{
	__u32 pid = traced_tgid();
	struct serving_state *s;

	if (pid && (s = serving_get(pid)))
		s->step = step;
	return 0;
}

SEC("usdt")
int BPF_USDT(step_end_prog, __u64 step, __u64 begin_ns, __u32 nseqs, __u32 prefill_tokens, __u32 decode_tokens,
	     __u32 kv_used_blocks)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 pid = traced_tgid();

	if (pid)
		step_done(pid, step, begin_ns, now, nseqs, prefill_tokens, decode_tokens, kv_used_blocks);
	return 0;
}

SEC("usdt")
int BPF_USDT(kv_blocks_prog, __u32 used, __u32 total, __u32 block_size, __u64 block_bytes)
{
	__u32 pid = traced_tgid();
	struct serving_state *s;

	if (pid && (s = serving_get(pid))) {
		s->v.kv_used_blocks = used;
		s->v.kv_total_blocks = total;
		s->v.kv_block_size = block_size;
		s->v.kv_block_bytes = block_bytes;
	}
	return 0;
}
