// SPDX-License-Identifier: GPL-2.0
/* engines.bpf.c - the programs of engines.bpf.h (which says what they do). */
#include "core.bpf.h"
#include "requests.bpf.h"
#include "engines.bpf.h"

/* ---- prompts to sequences (engines.bpf.h: the prompts map) ---- */

/* Twin t's sum from position first on; -1 when its prefix sums are gone
 * (a later prompt took the slot) or too short. */
static __always_inline int twin_sum_from(const struct prompt_twin *t, __s32 first, __u64 *sum)
{
	__u32 slot = (__u32)(t->nth % PROMPT_SLOTS), i;
	__u64 *pre;

	if (first == 0) {
		*sum = t->sum;
		return 0;
	}
	if (first < 0 || first >= PROMPT_PREFIX_MAX || prompt_slot_nth[slot & (PROMPT_SLOTS - 1)] != t->nth)
		return -1;
	i = slot * PROMPT_PREFIX_MAX + (__u32)first;
	if (!(pre = bpf_map_lookup_elem(&prompt_prefix, &i)))
		return -1;
	*sum = t->sum - *pre;
	return 0;
}

/* Small: it sits four frames deep (a map walk's callback, seq_link_prompt,
 * this loop's callback) under the verifier's 512 bytes for all of them. */
struct twin_pick {
	struct prompt_val *pv;
	struct seq_state *st;  /* its match_below: the best match's sum below its first position */
	__s8 best, only;       /* the oldest match; the last live twin */
	__u8 n_match, n_live, n_checked;
	__u8 mixed;            /* the matches are not all one group of identical prompts */
	__u32 group;           /* the first match's */
};

/* bpf_loop: whether twin k is st's prompt, by the whole sum where st's
 * cache's part is known, else by the part st decoded. (A loop the verifier
 * checks once: unrolled, its paths multiply by 8.) */
static long twin_check(__u64 k, struct twin_pick *pk)
{
	struct prompt_val *pv = pk->pv;
	struct seq_state *st = pk->st;
	struct prompt_twin *t;
	__u64 from;

	if (!pv || !st || k >= PROMPT_TWINS)
		return 1;
	t = &pv->twin[k & (PROMPT_TWINS - 1)];
	if (!t->ts || t->ts + PROMPT_STALE_NS < bpf_ktime_get_ns())
		return 0;
	pk->n_live++;
	pk->only = (__s8)k;
	if (st->base == BASE_ABSOLUTE) {
		pk->n_checked++;
		if (t->sum != st->base_rel + st->prompt_sum)
			return 0;
		from = st->prompt_sum;
	} else {
		if (twin_sum_from(t, st->first_pos, &from))
			return 0;
		pk->n_checked++;
		if (from != st->prompt_sum)
			return 0;
	}
	if (!pk->n_match)
		pk->group = t->group;
	else if (!t->group || t->group != pk->group)
		pk->mixed = 1;
	pk->n_match++;
	if (pk->best < 0 || t->ts < pv->twin[pk->best & (PROMPT_TWINS - 1)].ts) {
		pk->best = (__s8)k;
		st->match_below = t->sum - from;
	}
	return 0;
}

/* The twin of pv that st's prompt is: the one whose sum is st's (the
 * oldest of several identical prompts, as llama.cpp's queue takes them:
 * REQ_F_TWIN says so; so too where only st's own part could be checked
 * and every match is of one identical group); else the only one pending,
 * when none could be checked. -1: none provably its own. A match by st's own part tells what
 * its cache held below (kv_off). */
static __always_inline int twin_of(struct prompt_val *pv, struct seq_state *st, __u32 *flags)
{
	struct twin_pick pk = { .pv = pv, .st = st, .best = -1, .only = -1 };

	bpf_loop(PROMPT_TWINS, twin_check, &pk, 0);
	if (pk.n_match > 1 && st->base != BASE_ABSOLUTE && pk.mixed)
		return -1;   /* they differ, if at all, in what its cache held */
	if (pk.n_match > 1)
		*flags |= REQ_F_TWIN;
	if (pk.n_match) {
		/* its cache's run, placed: the run held base_rel - kv_off at
		 * first_pos, or began there */
		if (st->base == BASE_RELATIVE) {
			st->kv_off = st->match_below - (st->base_rel - st->kv_off);
			st->kv_off_known = 1;
		} else if (st->base == BASE_UNKNOWN && st->kv_from == (__u32)st->first_pos) {
			st->kv_off = st->match_below;
			st->kv_off_known = 1;
		}
		return pk.best;
	}
	return !pk.n_checked && pk.n_live == 1 ? pk.only : -1;
}

/* seq_link_prompt: the twin taken (so it is used once), its time and link
 * given to the request. */
__noinline int seq_link_prompt(__u32 pid, struct seq_state *st)
{
	struct prompt_twin *t;
	struct prompt_val *pv;
	struct engine_scratch *lk;
	struct req_state *r;
	__u32 zero = 0;
	int k, left = 0;

	if (!st || st->prompt_pos < 0 || !(lk = bpf_map_lookup_elem(&engine_scratch, &zero)) ||
	    !(r = req_lookup(pid, st->req)))
		return 0;
	lk->key = (struct prompt_key){ .pid = pid, .n_tokens = (__u32)st->prompt_pos + 1, .last = st->prompt_last };
	if (!(pv = bpf_map_lookup_elem(&prompts, &lk->key))) {
			return 0;
	}
	k = twin_of(pv, st, &r->link_flags);
	if (k < 0) {
		r->link_flags |= REQ_F_UNLINKED;
		return 0;
	}
	t = &pv->twin[k & (PROMPT_TWINS - 1)];
	if (t->group) {
		r->link_flags |= REQ_F_TWIN;
		r->twin_group = t->group;
	}
	if (t->ts < r->queued_ns)
		r->queued_ns = t->ts;
	r->http = t->http;
	/* it ends with the response (seq_end_request); a guess among identical
	 * twins only with its group's last response (a crossed link would end
	 * another's), and not at all where a twin came on no traced socket */
	if (t->http.sock && !(r->twin_group & PROMPT_GROUP_UNSURE)) {
		lk->hk = (struct http_req_key){ .tgid = pid, .sock = t->http.sock };
		lk->hv = (struct http_req_val){ .req = st->req, .seq = t->http.seq, .twin_group = r->twin_group };
		bpf_map_update_elem(&http_engine_reqs, &lk->hk, &lk->hv, BPF_ANY);
	}
	t->ts = 0;   /* taken */
	for (k = 0; k < PROMPT_TWINS; k++)
		left |= pv->twin[k].ts != 0;
	if (!left)
		bpf_map_delete_elem(&prompts, &lk->key);
	return 0;
}

SEC("uprobe")
int engine_span_entry(struct pt_regs *ctx)
{
	__u32 tid, pid = engine_caller(&tid);

	if (!pid)
		return 0;
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
	__u32 tid, pid = engine_caller(&tid);

	if (!pid)
		return 0;
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
	__u32 tid, pid = engine_caller(&tid);

	if (!pid)
		return 0;
	seq_remove(ctx, pid, bpf_ktime_get_ns());
	return 0;
}

SEC("uprobe")
int engine_memory_clear(struct pt_regs *ctx)
{
	__u32 tid, pid = engine_caller(&tid);
	struct seq_scan sc = { .pid = pid, .now = bpf_ktime_get_ns() };

	if (!pid)
		return 0;
	bpf_for_each_map_elem(&seqs, seq_end_cb, &sc, 0);
	return 0;
}

SEC("uprobe")
int engine_buf_size(struct pt_regs *ctx)
{
	/* both read first: the verifier wants each context read at a fixed offset */
	__u64 arg2 = PT_REGS_PARM2(ctx), arg3 = PT_REGS_PARM3(ctx);
	__u32 tid, pid = engine_caller(&tid);

	if (!pid)
		return 0;
	call_size(tid, ENGINE_COOKIE_ROLE(bpf_get_attach_cookie(ctx)) == FN_BUF_FROM_HOST ? arg3 : arg2);
	return 0;
}

SEC("uretprobe")
int engine_buf_made(struct pt_regs *ctx)
{
	__u32 tid, pid = engine_caller(&tid);

	if (!pid)
		return 0;
	buffer_made(ctx, pid, tid);
	return 0;
}

SEC("uprobe")
int engine_buf_usage(struct pt_regs *ctx)
{
	__u32 tid, pid = engine_caller(&tid);

	if (!pid)
		return 0;
	buffer_usage(ctx, pid);
	return 0;
}

SEC("uprobe")
int engine_buf_free(struct pt_regs *ctx)
{
	__u32 tid, pid = engine_caller(&tid);

	if (!pid)
		return 0;
	buffer_free(pid, PT_REGS_PARM1(ctx));
	return 0;
}

SEC("uprobe")
int engine_scope_entry(struct pt_regs *ctx)
{
	__u32 tid, pid = engine_caller(&tid);

	if (!pid)
		return 0;
	tensor_scope(tid, 1);
	return 0;
}

SEC("uretprobe")
int engine_scope_return(struct pt_regs *ctx)
{
	__u32 tid, pid = engine_caller(&tid);

	if (!pid)
		return 0;
	tensor_scope(tid, 0);
	return 0;
}

SEC("uprobe")
int engine_tokenize_entry(struct pt_regs *ctx)
{
	__u32 tid, pid = engine_caller(&tid);

	if (!pid)
		return 0;
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
	__u32 tid, pid = engine_caller(&tid);

	if (!pid)
		return 0;
	sampling_begin(ctx, pid, tid);
	return 0;
}

SEC("uprobe")
int engine_accept(struct pt_regs *ctx)
{
	__u32 tid, pid = engine_caller(&tid);

	if (!pid)
		return 0;
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
