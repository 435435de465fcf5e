/* engines.bpf.h - other engines' exported functions: the maps and helpers
 * (programs: engines.bpf.c, on core.bpf.h's span, request and memory
 * helpers). An engine profile (include/spantrace/llamacpp.def, planned by
 * user/core/engines.c) attaches a program per role to each function with
 * ENGINE_COOKIE(role, kind); the role says what the call means:
 *
 * - a span (model load, tokenize, sampling, graph compute);
 * - a decode: the forward span, and its batch (passed by value, read from
 *   the stack as knob engine_abi says) followed token by token into the
 *   sequences it holds (map `seqs`). A sequence's request runs from its
 *   first tokens until it is removed (FN_SEQ_REMOVE to the end), cleared,
 *   restarted at an earlier position, left out of a generation step, or its
 *   process exits. It is admitted when a removal readied it, else when its
 *   first batch began; it was queued when its prompt was tokenized (found
 *   by the prompt's length and last token, map `prompts`), else admitted.
 *   Its outputs are its tokens (the first one its TTFT), each decode a step;
 *   a token is out when the engine samples it (llama_get_logits_ith of its
 *   output, then the sampler's accept of the token), else when the next
 *   decode begins, at the end of the decode that computed it;
 * - buffers: allocated inside a model load they are `weights`, inside a
 *   tensor scope elsewhere `kv_cache`, otherwise `compute`; a usage the
 *   engine sets later moves them.
 *
 * Only the engine's own calls are seen, so what a profile lacks stays
 * absent rather than guessed. */
#ifndef SPANTRACE_ENGINES_BPF_H
#define SPANTRACE_ENGINES_BPF_H

const volatile struct engine_abi engine_abi __weak = {};
/* Set while a command may still load its engine: the dynamic linker's
 * notifications stop the process until the session has looked (dl_change). */
__u32 dl_watch __weak = 0;
/* Ids of decodes (steps) and of requests, across processes. */
__u64 engine_decodes __weak = 0;
__u64 engine_requests __weak = 0;

#define ENGINE_SIGSTOP 19

struct seq_state {
	__u64 req;          /* the open request; 0: none */
	__u64 ready_ns;     /* a removal readied the next request then; 0: none */
	__u64 decode;       /* the last decode it had tokens in */
	__u64 out_decode;   /* the last decode that asked for its outputs */
	__u64 last_out_ns;  /* the open request's last output */
	__s32 last_pos;     /* -1: any position may come next */
	__u32 outputs;      /* the open request's outputs so far */
	__u32 prompt;       /* its tokens up to its first output */
	__u32 out_now;      /* outputs asked for in out_decode */
	__s32 prompt_last;  /* the token whose output was its first: the prompt's last */
	__s32 prompt_pos;   /* and its position (the prompt's length - 1) */
	/* Outputs computed, waiting for their token to be sampled: */
	__u32 pending;      /* outputs of pending_step not yet out */
	__u32 out_index;    /* its last output's index in that batch */
	__u32 out_rank;     /* and its rank among the batch's outputs */
	__u32 batch_outputs;/* the batch's outputs (a negative index counts back from it) */
	__u64 pending_ns;   /* when the decode computing them ended */
	__u64 pending_step;
};

/* A tokenized prompt awaiting its sequence: (pid, length, last token) ->
 * when its tokenization began. Served prompts are tokenized by the thread
 * that took the request, long before a sequence holds them. */
struct prompt_key {
	__u32 pid;
	__u32 n_tokens;
	__s32 last;
	__u32 pad;
};

#define PROMPT_AMBIGUOUS_NS (10ull * 1000000000ull)   /* an older twin: taken, or gone */

struct prompt_val {
	__u64 ts;                /* its tokenization's begin */
	struct http_link http;   /* the HTTP request the tokenizing thread read last */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct prompt_key);
	__type(value, struct prompt_val);
} prompts __weak SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SEQ_MAX_ENTRIES);
	__type(key, struct seq_key);
	__type(value, struct seq_state);
} seqs __weak SEC(".maps");

/* A thread inside a profile's functions. */
struct engine_call {
	__u64 decode;            /* the decode in flight */
	__u64 begin_ns;          /* its forward's begin */
	__u64 size;              /* a buffer call's size, entry to return */
	__u64 tokens;            /* a tokenize call's output array */
	__s32 sampling;          /* the sequence whose output is being sampled, + 1; 0: none */
	__u32 pad;
	__u64 tokenize_ns;       /* and its begin */
	__u32 tensor_scope;      /* FN_TENSOR_SCOPE calls open */
	__u32 prefill, generate; /* the decode's tokens before / after their request's first output */
	__u32 n_seqs, n_outputs, n_tokens;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);      /* tid */
	__type(value, struct engine_call);
} engine_calls __weak SEC(".maps");

static const struct seq_state seq_new = { .last_pos = -1, .prompt_pos = -1 };
static const struct engine_call zero_call;

/* ---- requests of sequences ---- */

static __always_inline void seq_queued_at_prompt(__u32 pid, struct seq_state *st, struct req_state *r);

/* The pending outputs of st are out at now (token: the sampled id, or
 * ~0 when the sampling was not seen). The first also fixes the prompt. */
static __always_inline void seq_emit(__u32 pid, struct seq_state *st, __u64 now, __u32 token)
{
	struct serving_state *s;
	struct req_state *r;

	if (!st->pending || !st->req)
		return;
	if (st->outputs == 0) {
		r = req_lookup(pid, st->req);
		if (r) {
			r->prompt_tokens = st->prompt;
			seq_queued_at_prompt(pid, st, r);
		}
		s = serving_get(pid);
		if (s)
			__sync_fetch_and_add(&s->v.prompt_tokens, st->prompt);
	}
	/* one token record per decode (several outputs of one sequence in one
	 * batch, as in speculative decoding, still count as tokens) */
	req_emit(pid, st->req, now, st->last_pos, token, st->pending_step);
	st->outputs += st->pending;
	st->last_out_ns = now;
	st->pending = 0;
}

/* The open request of st ends at its last output (its end as far as anyone
 * outside can tell), or now if it never had one. */
static __always_inline void seq_end(__u32 pid, struct seq_state *st, __u64 now)
{
	seq_emit(pid, st, st->pending_ns, ~0u);
	if (st->req)
		req_finish(pid, st->req, st->last_out_ns ? st->last_out_ns : now, FINISH_REASON_COUNT,
			   st->outputs);
	st->req = 0;
	st->outputs = st->prompt = 0;
	st->last_out_ns = 0;
	st->last_pos = -1;
}

static __always_inline void seq_start(__u32 pid, struct seq_state *st, __u64 now)
{
	__u64 admitted = st->ready_ns ? st->ready_ns : now;
	struct req_state *r;

	st->req = __sync_fetch_and_add(&engine_requests, 1) + 1;
	req_begin(pid, st->req, admitted, 0, 1);
	r = req_lookup(pid, st->req);
	if (r)
		r->first_admit_ns = r->token_admit_ns = admitted;
	st->ready_ns = 0;
	st->prompt_pos = -1;
}

/* At its first output: the request was queued when its prompt was
 * tokenized, if that tokenization is known (taken, so it is used once),
 * and came in on the HTTP request its tokenizing thread had read. */
static __always_inline void seq_queued_at_prompt(__u32 pid, struct seq_state *st, struct req_state *r)
{
	struct prompt_key key = { .pid = pid, .n_tokens = (__u32)st->prompt_pos + 1, .last = st->prompt_last };
	struct http_req_key hk = { .tgid = pid };
	struct http_req_val hv = { .req = st->req };
	struct prompt_val *pv;

	if (st->prompt_pos < 0 || !(pv = bpf_map_lookup_elem(&prompts, &key)))
		return;
	if (pv->ts < r->queued_ns)
		r->queued_ns = pv->ts;
	r->http = pv->http;
	if (pv->http.sock) {   /* it ends with the response (seq_end_request) */
		hk.sock = pv->http.sock;
		hv.seq = pv->http.seq;
		bpf_map_update_elem(&http_engine_reqs, &hk, &hv, BPF_ANY);
	}
	bpf_map_delete_elem(&prompts, &key);
}

struct seq_scan {
	__u32 pid;          /* 0: every process (engine_flush) */
	__u32 ready;        /* ready every sequence for its next request */
	__u64 now;
	__u64 decode;       /* seq_outputs: the decode that ended */
	__u32 generating;   /* seq_outputs: it was a generation step */
	__u32 n_outputs;    /* seq_outputs: the batch's */
	__s32 index;        /* seq_sampled: the output index sampled */
	__s32 found;        /* seq_sampled: its sequence + 1; 0: none */
};

static inline long seq_end_cb(struct bpf_map *map, struct seq_key *key, struct seq_state *st, struct seq_scan *sc)
{
	if (sc->pid && key->pid != sc->pid)
		return 0;
	seq_end(key->pid, st, sc->now);
	if (sc->ready)
		st->ready_ns = sc->now;
	return 0;
}

struct seq_req_end {
	__u32 pid;
	__u64 req;
	__u64 now;
};

static inline long seq_end_req_cb(struct bpf_map *map, struct seq_key *key, struct seq_state *st,
				  struct seq_req_end *x)
{
	if (key->pid != x->pid || st->req != x->req)
		return 0;
	seq_end(key->pid, st, x->now);
	return 1;
}

/* The HTTP request on sock (its seq-th) was answered: the engine request
 * linked to it (seq_queued_at_prompt) has ended, and says so now rather
 * than at its sequence's next event, however idle the server stays. */
static __always_inline void seq_end_request(__u32 pid, __u64 sock, __u32 seq, __u64 now)
{
	struct http_req_key hk = { .tgid = pid, .sock = sock };
	struct seq_req_end x = { .pid = pid, .now = now };
	struct http_req_val *hv;

	if (!(loaded & LOADED_ENGINES) || !(hv = bpf_map_lookup_elem(&http_engine_reqs, &hk)))
		return;
	x.req = hv->req;
	if (hv->seq == seq)
		bpf_for_each_map_elem(&seqs, seq_end_req_cb, &x, 0);
	bpf_map_delete_elem(&http_engine_reqs, &hk);
}

/* handle_exit: a process's sequences end with it. */
static inline long seq_end_of_pid(struct bpf_map *map, struct seq_key *key, struct seq_state *st, void *data)
{
	__u32 pid = *(__u32 *)data;

	if (key->pid != pid)
		return 0;
	seq_end(pid, st, bpf_ktime_get_ns());
	bpf_map_delete_elem(map, key);
	return 0;
}

/* A decode ended: the outputs it computed wait for their tokens to be
 * sampled (seq_emit). A generation step (sc->generating: it carried a
 * token of a request past its first output) holds every request still
 * generating, as a continuous-batching server schedules them; one it left
 * out has ended, at its last output. */
static inline long seq_outputs_cb(struct bpf_map *map, struct seq_key *key, struct seq_state *st, struct seq_scan *sc)
{
	if (key->pid != sc->pid || !st->req)
		return 0;
	if (st->decode != sc->decode) {
		if (sc->generating && (st->outputs || st->pending))
			seq_end(sc->pid, st, sc->now);
		return 0;
	}
	if (st->out_decode != sc->decode)
		return 0;
	st->pending = st->out_now;
	st->pending_ns = sc->now;
	st->pending_step = sc->decode;
	st->batch_outputs = sc->n_outputs;
	st->out_now = 0;
	return 0;
}

/* A decode begins: outputs whose sampling was never seen are out at the
 * end of the decode that computed them. */
static inline long seq_stale_cb(struct bpf_map *map, struct seq_key *key, struct seq_state *st, struct seq_scan *sc)
{
	if (key->pid == sc->pid && st->pending)
		seq_emit(sc->pid, st, st->pending_ns, ~0u);
	return 0;
}

/* The sequence whose pending output has batch index sc->index (negative:
 * counted back from the batch's outputs, as llama_get_logits_ith does). */
static inline long seq_sampled_cb(struct bpf_map *map, struct seq_key *key, struct seq_state *st, struct seq_scan *sc)
{
	if (key->pid != sc->pid || !st->pending)
		return 0;
	if (sc->index >= 0 ? st->out_index == (__u32)sc->index
			   : (__s64)st->out_rank == (__s64)st->batch_outputs + sc->index) {
		sc->found = key->seq + 1;
		return 1;
	}
	return 0;
}

/* ---- a batch, token by token ---- */
struct batch_walk {
	__u64 token, pos, seq_id, logits;   /* the batch's arrays (user pointers; 0: absent) */
	__u64 decode, now;
	__u32 pid, n_tokens;
	struct engine_call *call;
};

static __always_inline void seq_token(struct batch_walk *w, __u32 i, __s32 seq, __s32 pos, __s32 token,
				      int output)
{
	struct seq_key key = { .pid = w->pid, .seq = seq };
	struct engine_call *c = w->call;
	struct seq_state *st = lookup_or_init(&seqs, &key, &seq_new);

	if (!st)
		return;
	/* an earlier position than it had: the sequence started over */
	if (st->req && pos >= 0 && st->last_pos >= 0 && pos <= st->last_pos)
		seq_end(w->pid, st, w->now);
	if (!st->req)
		seq_start(w->pid, st, w->now);
	if (st->decode != w->decode) {
		st->decode = w->decode;
		c->n_seqs++;
	}
	if (pos >= 0)
		st->last_pos = pos;
	if (st->outputs == 0) {
		st->prompt++;
		c->prefill++;
	} else {
		c->generate++;
	}
	if (output) {
		if (st->outputs == 0) {   /* the prompt's last token, if this is the first output */
			st->prompt_last = token;
			st->prompt_pos = pos;
		}
		if (st->out_decode != w->decode) {
			st->out_decode = w->decode;
			st->out_now = 0;
		}
		st->out_now++;
		st->out_index = i;
		st->out_rank = c->n_outputs;
		c->n_outputs++;
	}
}

static inline long batch_token(__u64 i, struct batch_walk *w)
{
	__s32 pos = -1, seq = 0, token = -1;
	__s8 out;
	__u64 p;

	if (i >= w->n_tokens)
		return 1;
	if (w->token && bpf_probe_read_user(&token, sizeof(token), (void *)(w->token + i * 4)))
		token = -1;
	if (w->pos && bpf_probe_read_user(&pos, sizeof(pos), (void *)(w->pos + i * 4)))
		pos = -1;
	if (w->seq_id && (bpf_probe_read_user(&p, sizeof(p), (void *)(w->seq_id + i * 8)) ||
			  bpf_probe_read_user(&seq, sizeof(seq), (void *)p)))
		seq = 0;
	/* no output array: the engine computes only the last token's */
	if (!w->logits)
		out = i == w->n_tokens - 1;
	else if (bpf_probe_read_user(&out, sizeof(out), (void *)(w->logits + i)))
		out = 0;
	seq_token(w, (__u32)i, seq, pos, token, out != 0);
	return 0;
}

static __always_inline __u64 raw_u64(const __u8 *raw, __u32 off)
{
	return *(const __u64 *)(raw + (off & 0x38));
}

/* The batch a decode got by value, at the stack pointer of its entry. */
static __always_inline void decode_batch(struct pt_regs *ctx, __u32 pid, struct engine_call *c, __u64 now)
{
	__u8 raw[64] = {};
	struct batch_walk w = { .pid = pid, .decode = c->decode, .now = now, .call = c };
	__s32 n;

	if (bpf_probe_read_user(raw, sizeof(raw), (void *)(PT_REGS_SP(ctx) + engine_abi.batch_stack_off)))
		return;
	n = *(const __s32 *)(raw + (engine_abi.b_n_tokens & 0x3c));
	if (n <= 0)
		return;
	c->n_tokens = n;
	w.n_tokens = (__u32)n < engine_abi.max_batch_tokens ? (__u32)n : engine_abi.max_batch_tokens;
	w.token = raw_u64(raw, engine_abi.b_token);
	w.pos = raw_u64(raw, engine_abi.b_pos);
	w.seq_id = raw_u64(raw, engine_abi.b_seq_id);
	w.logits = raw_u64(raw, engine_abi.b_logits);
	bpf_loop(w.n_tokens, batch_token, &w, 0);
}

static __always_inline void decode_begin(struct pt_regs *ctx, __u32 pid, __u32 tid)
{
	struct engine_call *c = lookup_or_init(&engine_calls, &tid, &zero_call);
	struct seq_scan sc = { .pid = pid, .now = bpf_ktime_get_ns() };
	struct serving_state *s;
	struct thread_state *ts;

	if (!c)
		return;
	bpf_for_each_map_elem(&seqs, seq_stale_cb, &sc, 0);
	c->decode = __sync_fetch_and_add(&engine_decodes, 1) + 1;
	c->prefill = c->generate = c->n_seqs = c->n_outputs = c->n_tokens = 0;
	decode_batch(ctx, pid, c, bpf_ktime_get_ns());
	s = serving_get(pid);
	if (s)
		s->step = c->decode;
	ts = thread_get(tid, 1);
	if (ts) {
		ts->batch.n_tokens = c->n_tokens;
		ts->batch.n_seqs = c->n_seqs;
		ts->batch.n_outputs = c->n_outputs;
	}
	span_begin_entry(ctx, SPAN_FORWARD, LAYER_NONE);
	c->begin_ns = bpf_ktime_get_ns();
}

static __always_inline void decode_end(struct pt_regs *ctx, __u32 pid, __u32 tid, __u64 now)
{
	struct engine_call *c = bpf_map_lookup_elem(&engine_calls, &tid);
	struct seq_scan sc = { .pid = pid, .now = now };

	span_end(now, SPAN_FORWARD, LAYER_NONE, SPAN_F_STRUCTURAL | SPAN_F_BATCH);
	if (!c || !c->decode)
		return;
	sc.decode = c->decode;
	sc.generating = c->generate > 0;
	sc.n_outputs = c->n_outputs;
	/* 0 is success; otherwise nothing was computed for anyone */
	if ((__s32)PT_REGS_RC(ctx) == 0)
		bpf_for_each_map_elem(&seqs, seq_outputs_cb, &sc, 0);
	step_done(pid, c->decode, c->begin_ns, now, c->n_seqs, c->prefill, c->generate, 0);
	c->decode = 0;
}

/* ---- sequences removed ---- */
static __always_inline void seq_remove(struct pt_regs *ctx, __u32 pid, __u64 now)
{
	__s32 seq = (__s32)PT_REGS_PARM2(ctx), p1 = (__s32)PT_REGS_PARM4(ctx);
	struct seq_scan sc = { .pid = pid, .now = now, .ready = 1 };
	struct seq_key key = { .pid = pid, .seq = seq };
	struct seq_state *st;

	if (seq < 0) {          /* every sequence */
		if (p1 < 0)
			bpf_for_each_map_elem(&seqs, seq_end_cb, &sc, 0);
		return;
	}
	st = lookup_or_init(&seqs, &key, &seq_new);
	if (!st)
		return;
	if (p1 < 0) {           /* to the end: its next tokens are a new request */
		seq_end(pid, st, now);
		st->ready_ns = now;
	} else {                /* a window (context shift): positions move */
		st->last_pos = -1;
	}
}

/* ---- buffers ---- */
static __always_inline int in_model_load(__u32 tid)
{
	struct thread_state *ts = thread_get(tid, 0);

	if (!ts)
		return 0;
	for (__u32 d = 0; d < SPAN_STACK_DEPTH; d++) {
		if (d >= ts->depth)
			break;
		if (ts->stack[d & (SPAN_STACK_DEPTH - 1)].kind == SPAN_MODEL_LOAD)
			return 1;
	}
	return 0;
}

static __always_inline void buffer_made(struct pt_regs *ctx, __u32 pid, __u32 tid)
{
	struct engine_call *c = bpf_map_lookup_elem(&engine_calls, &tid);
	__u64 buf = PT_REGS_RC(ctx);
	__u32 pool;

	if (!c || !buf)
		return;
	/* a placeholder that holds nothing (llama.cpp makes one per tensor
	 * while it plans): kept, so its free pairs, but not an allocation */
	if (!c->size) {
		struct alloc_key key = { .pid = pid, .ptr = buf };
		struct alloc_val v = { .pool = POOL_COUNT };

		bpf_map_update_elem(&allocs, &key, &v, BPF_ANY);
		return;
	}
	if (in_model_load(tid))
		pool = POOL_WEIGHTS;
	else
		pool = c->tensor_scope ? POOL_KV_CACHE : POOL_COMPUTE;
	pool_alloc(pid, pool, buf, c->size, c->size);
}

/* The engine said what a buffer holds: move it to that pool. */
static __always_inline void buffer_usage(struct pt_regs *ctx, __u32 pid)
{
	struct alloc_key key = { .pid = pid, .ptr = PT_REGS_PARM1(ctx) };
	__u32 usage = (__u32)PT_REGS_PARM2(ctx), pool;
	struct alloc_val *v, old;

	if (usage == engine_abi.usage_weights)
		pool = POOL_WEIGHTS;
	else if (usage == engine_abi.usage_compute)
		pool = POOL_COMPUTE;
	else
		return;
	v = bpf_map_lookup_elem(&allocs, &key);
	if (!v || v->pool == pool || v->pool == POOL_COUNT)
		return;
	old = *v;
	pool_free(pid, old.pool, key.ptr, old.bytes);
	pool_alloc(pid, pool, key.ptr, old.bytes, old.reserved);
}

static __always_inline void buffer_free(__u32 pid, __u64 buf)
{
	struct alloc_key key = { .pid = pid, .ptr = buf };
	struct alloc_val *v;

	if (!buf)
		return;
	v = bpf_map_lookup_elem(&allocs, &key);
	if (v && v->pool == POOL_COUNT) {   /* a placeholder (buffer_made) */
		bpf_map_delete_elem(&allocs, &key);
		return;
	}
	pool_free(pid, POOL_COMPUTE, buf, 0);
}

static __always_inline void call_size(__u32 tid, __u64 size)
{
	struct engine_call *c = lookup_or_init(&engine_calls, &tid, &zero_call);

	if (c)
		c->size = size;
}

/* A prompt tokenized: remember it by length and last token. */
static __always_inline void tokenize_begin(struct pt_regs *ctx, __u32 tid)
{
	struct engine_call *c = lookup_or_init(&engine_calls, &tid, &zero_call);

	if (c) {
		c->tokens = PT_REGS_PARM4(ctx);
		c->tokenize_ns = bpf_ktime_get_ns();
	}
}

static __always_inline void tokenize_end(struct pt_regs *ctx, __u32 pid, __u32 tid)
{
	struct engine_call *c = bpf_map_lookup_elem(&engine_calls, &tid);
	__s32 n = (__s32)PT_REGS_RC(ctx);
	struct prompt_key key = { .pid = pid };
	struct prompt_val val = {}, *old;

	if (!c || !c->tokens || n <= 0 ||
	    bpf_probe_read_user(&key.last, sizeof(key.last), (void *)(c->tokens + (__u64)(n - 1) * 4)))
		return;
	key.n_tokens = (__u32)n;
	val.ts = c->tokenize_ns;
	http_link_of_thread(&val.http);
	/* Another prompt of this length and last token, still waiting for its
	 * sequence, from another HTTP request: which sequence is whose cannot
	 * be told, so neither is linked (a wrong link would end the other's). */
	old = bpf_map_lookup_elem(&prompts, &key);
	if (old && old->ts + PROMPT_AMBIGUOUS_NS > val.ts &&
	    (old->http.sock != val.http.sock || old->http.seq != val.http.seq))
		__builtin_memset(&val.http, 0, sizeof(val.http));
	bpf_map_update_elem(&prompts, &key, &val, BPF_ANY);
	c->tokens = 0;
}

static __always_inline void tensor_scope(__u32 tid, int enter)
{
	struct engine_call *c = lookup_or_init(&engine_calls, &tid, &zero_call);

	if (!c)
		return;
	if (enter)
		c->tensor_scope++;
	else if (c->tensor_scope)
		c->tensor_scope--;
}

/* ---- sampling: a token out ---- */

/* llama_get_logits_ith(ctx, i): the thread is sampling output i. */
static __always_inline void sampling_begin(struct pt_regs *ctx, __u32 pid, __u32 tid)
{
	struct seq_scan sc = { .pid = pid, .index = (__s32)PT_REGS_PARM2(ctx) };
	struct engine_call *c;

	bpf_for_each_map_elem(&seqs, seq_sampled_cb, &sc, 0);
	if (sc.found && (c = lookup_or_init(&engine_calls, &tid, &zero_call)))
		c->sampling = sc.found;
}

/* The sampler's accept(smpl, token): the first after sampling_begin is the
 * token chosen (a chain accepts it again in each of its samplers). */
static __always_inline void sampling_end(struct pt_regs *ctx, __u32 pid, __u32 tid)
{
	struct engine_call *c = bpf_map_lookup_elem(&engine_calls, &tid);
	struct seq_key key = { .pid = pid };
	struct seq_state *st;

	if (!c || !c->sampling)
		return;
	key.seq = c->sampling - 1;
	c->sampling = 0;
	st = bpf_map_lookup_elem(&seqs, &key);
	if (st)
		seq_emit(pid, st, bpf_ktime_get_ns(), (__u32)PT_REGS_PARM2(ctx));
}

/* ---- the programs: one per role, attached by user/core/engines.c with
 * ENGINE_COOKIE(role, kind) ---- */

#define ENGINE_PROLOGUE                                         \
	__u32 tid = (__u32)bpf_get_current_pid_tgid();          \
	__u32 pid = traced_tgid();                              \
	if (!pid || detaching)                                  \
		return 0

#endif
