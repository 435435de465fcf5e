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

#include "core.bpf.h"      /* the maps and types every module shares */
#include "reqlink.bpf.h"   /* struct http_link */
#include "requests.bpf.h"  /* struct req_state, serving_state: a llama.cpp sequence is a request */

const volatile struct engine_abi engine_abi __weak = {};
/* Set while a command may still load its engine: the dynamic linker's
 * notifications stop the process until the session has looked (dl_change). */
__u32 dl_watch __weak = 0;
/* Ids of decodes (steps) and of requests, across processes. */
__u64 engine_decodes __weak = 0;
__u64 engine_requests __weak = 0;

#define ENGINE_SIGSTOP 19

enum { BASE_UNKNOWN, BASE_RELATIVE, BASE_ABSOLUTE };   /* seq_state.base */

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
	__s32 first_pos;    /* the open request's first position (after a cached prefix); -1: none */
	__u64 prompt_sum;   /* tok_mix summed over the prompt tokens it decoded */
	__u64 base_rel;     /* seq_kv's sum at first_pos (its cache's part) */
	__u32 base;         /* BASE_*: how much of that is known */
	/* its cache in seq_kv: */
	__u32 kv_from, kv_known;   /* the run of positions whose sums are kept */
	__u32 kv_off_known;
	__u64 kv_off;       /* the sum below kv_from */
	__u64 match_below;  /* seq_link_prompt's: its prompt's sum below first_pos */
	__u64 kv_id;        /* its slot (0: none yet) */
	/* Outputs computed, waiting for their token to be sampled: */
	__u32 pending;      /* outputs of pending_step not yet out */
	__u32 out_index;    /* its last output's index in that batch */
	__u32 out_rank;     /* and its rank among the batch's outputs */
	__u32 batch_outputs;/* the batch's outputs (a negative index counts back from it) */
	__u64 pending_ns;   /* when the decode computing them ended */
	__u64 pending_step;
};

/* Tokenized prompts awaiting their sequences: (pid, length, last token) ->
 * the twins of that key. Served prompts are tokenized by the thread that
 * took the request, long before a sequence holds them. Twins (benchmarks'
 * fixed lengths, chat templates' common tails) are told apart by a hash of
 * their token ids, which never leaves the kernel: the sum of
 * tok_mix(token, position). A sequence whose first positions came from its
 * cache (llama-server's prompt cache) adds what its cache held below them
 * (map seq_kv) to the sum of the tokens it decoded, and compares that with
 * the prompt's whole sum; where the cache's part is not known (it was
 * filled before the attach), it compares its own part with the prompt's
 * sum from its first position on (map prompt_prefix), and a single match
 * tells it what its cache holds. */
struct prompt_key {
	__u32 pid;
	__u32 n_tokens;
	__s32 last;
	__u32 pad;
};

#define PROMPT_TWINS 8          /* of one key pending at once; a ninth replaces the oldest */
#define PROMPT_STALE_NS (60ull * 1000000000ull)   /* a twin older: taken elsewhere, or gone */
#define PROMPT_SLOTS 64         /* prompts whose prefix sums are kept (a ring) */
#define PROMPT_PREFIX_MAX 4096  /* positions those sums cover */

struct prompt_twin {
	__u64 ts;                /* its tokenization's begin; 0: an empty place */
	__u64 sum;               /* tok_mix summed over the whole prompt */
	__u64 nth;               /* its tokenization's number (its prefix slot: nth % PROMPT_SLOTS) */
	struct http_link http;   /* the HTTP request the tokenizing thread read last */
	__u32 group;             /* identical twins' group (another pending twin had its sum,
				  * so which is whose is a guess): an opaque number, 0 for none */
	__u32 pad;
};

struct prompt_val {
	struct prompt_twin twin[PROMPT_TWINS];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct prompt_key);
	__type(value, struct prompt_val);
} prompts __weak SEC(".maps");

/* slot * PROMPT_PREFIX_MAX + p -> tok_mix summed over the slot's prompt's
 * positions below p; prompt_slot_nth[slot] says whose they are. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PROMPT_SLOTS * PROMPT_PREFIX_MAX);
	__type(key, __u32);
	__type(value, __u64);
} prompt_prefix __weak SEC(".maps");

__u64 prompt_slot_nth[PROMPT_SLOTS] __weak = {};
__u64 prompts_tokenized __weak = 0;
__u32 prompt_groups __weak = 0;   /* identical twins' groups numbered */
/* A group with a member whose prompt came on no traced socket: its links
 * are not all its sockets, so its last response may not end it. */
#define PROMPT_GROUP_UNSURE (1u << 31)

/* What a sequence's cache holds: slot * SEQ_KV_MAX + p -> tok_mix summed
 * over its positions from kv_from up to p (kv_from..kv_known is a run of
 * positions seen decoded in order), plus kv_off where that is known. A
 * sequence keeps its slot (kv_id % SEQ_KV_SLOTS) while seq_kv_owner says
 * so; positions past SEQ_KV_MAX are not kept. */
#define SEQ_KV_SLOTS 64
#define SEQ_KV_MAX 8192

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SEQ_KV_SLOTS * SEQ_KV_MAX);
	__type(key, __u32);
	__type(value, __u64);
} seq_kv __weak SEC(".maps");

__u64 seq_kv_owner[SEQ_KV_SLOTS] __weak = {};
__u64 seq_kv_ids __weak = 0;

/* One token at one position, mixed (splitmix64's finalizer). */
static __always_inline __u64 tok_mix(__s32 token, __u32 pos)
{
	__u64 z = ((__u64)pos << 32 | (__u32)token) + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SEQ_MAX_ENTRIES);
	__type(key, struct seq_key);
	__type(value, struct seq_state);
} seqs __weak SEC(".maps");

/* What would not fit on the stack: a decode's batch walk runs three frames
 * deep (program, bpf_loop callback, seq_link_prompt) under the 512-byte
 * limit of all three. */
struct engine_scratch {
	__u8 batch[64];          /* decode_batch: the llama_batch, by value */
	struct prompt_key key;   /* seq_link_prompt's keys */
	struct http_req_key hk;
	struct http_req_val hv;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct engine_scratch);
} engine_scratch __weak SEC(".maps");

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

static const struct seq_state seq_new = { .last_pos = -1, .prompt_pos = -1, .first_pos = -1 };
static const struct engine_call zero_call;

/* ---- requests of sequences ---- */

/* At its first output: the request was queued when its prompt was
 * tokenized, and came in on the HTTP request its tokenizing thread had
 * read (engines.bpf.c; global, so the verifier checks the twin search once). */
struct seq_state;
__noinline int seq_link_prompt(__u32 pid, struct seq_state *st);

/* The pending outputs of st are out at now (token: the sampled id, or
 * ~0 when the sampling was not seen). The first also fixes the prompt. */
static __always_inline void seq_emit_link(__u32 pid, struct seq_state *st, __u64 now, __u32 token, int link)
{
	struct serving_state *s;
	struct req_state *r;

	if (!st->pending || !st->req)
		return;
	if (st->outputs == 0) {
		r = req_lookup(pid, st->req);
		if (r) {
			r->prompt_tokens = st->prompt;
			if (link)
				seq_link_prompt(pid, st);
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
static __always_inline void seq_emit(__u32 pid, struct seq_state *st, __u64 now, __u32 token)
{
	seq_emit_link(pid, st, now, token, 1);
}

/* link 0: where the call stack is too deep for seq_link_prompt (the
 * response's end, whose request was linked at its first output). */
static __always_inline void seq_end_link(__u32 pid, struct seq_state *st, __u64 now, int link)
{
	seq_emit_link(pid, st, st->pending_ns, ~0u, link);
	if (st->req)
		req_finish(pid, st->req, st->last_out_ns ? st->last_out_ns : now, FINISH_REASON_COUNT,
			   st->outputs);
	st->req = 0;
	st->outputs = st->prompt = 0;
	st->last_out_ns = st->prompt_sum = 0;
	st->base = BASE_UNKNOWN;
	st->last_pos = st->first_pos = -1;
}

static __always_inline void seq_end(__u32 pid, struct seq_state *st, __u64 now)
{
	seq_end_link(pid, st, now, 1);
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
	st->prompt_pos = st->first_pos = -1;
	st->prompt_sum = 0;
	st->base = BASE_UNKNOWN;
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
	if (sc->ready) {   /* cleared: its cache too */
		st->ready_ns = sc->now;
		st->kv_known = 0;
	}
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
	seq_end_link(key->pid, st, x->now, 0);
	return 1;
}

/* A group of identical twins: its links still open, and its sequences. */
struct twin_group_scan {
	__u32 pid, group;
	__u32 links;        /* one of its links is still open */
	__u64 now;
};

static long twin_links_cb(struct bpf_map *map, struct http_req_key *k, struct http_req_val *v,
			  struct twin_group_scan *g)
{
	if (k->tgid != g->pid || v->twin_group != g->group)
		return 0;
	g->links = 1;   /* one is enough (a count would make the verifier walk each) */
	return 1;
}

static long twin_seqs_end_cb(struct bpf_map *map, struct seq_key *key, struct seq_state *st,
			     struct twin_group_scan *g)
{
	struct req_state *r;

	if (key->pid != g->pid || !st->req || !(r = req_lookup(key->pid, st->req)) || r->twin_group != g->group)
		return 0;
	seq_end_link(key->pid, st, g->now, 0);
	return 0;
}

/* The HTTP request on sock (its seq-th) was answered: the engine request
 * linked to it (seq_link_prompt) has ended, and says so now rather
 * than at its sequence's next event, however idle the server stays. A
 * link guessed among identical twins may be another's: only when the
 * group's last response is out are its sequences sure to be done (each
 * response follows its own's last token), and those still open end. */
static __always_inline void seq_end_request(__u32 pid, __u64 sock, __u32 seq, __u64 start, __u64 first,
					    __u64 now)
{
	struct http_req_key hk = { .tgid = pid, .sock = sock };
	struct seq_req_end x = { .pid = pid, .now = now };
	struct twin_group_scan g = { .pid = pid, .now = now };
	struct http_times *ht;
	struct http_req_val *hv;
	__u32 hseq;

	if (!(loaded & LOADED_ENGINES) || !(hv = bpf_map_lookup_elem(&http_engine_reqs, &hk)))
		return;
	x.req = hv->req;
	hseq = hv->seq;
	g.group = hv->twin_group;
	bpf_map_delete_elem(&http_engine_reqs, &hk);
	if (hseq != seq)
		return;
	if (!g.group) {
		/* its headline times are the socket's (req_finish) */
		if ((ht = http_ending_times()))
			*ht = (struct http_times){ .req = x.req, .start_ns = start, .first_ns = first, .end_ns = now };
		bpf_for_each_map_elem(&seqs, seq_end_req_cb, &x, 0);
		if (ht)
			ht->req = 0;
		return;
	}
	bpf_for_each_map_elem(&http_engine_reqs, twin_links_cb, &g, 0);
	if (!g.links)
		bpf_for_each_map_elem(&seqs, twin_seqs_end_cb, &g, 0);
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

/* seq_kv's sum at pos for st's cache; NULL: not kept there. */
static __always_inline __u64 *kv_at(struct seq_state *st, __u32 pos)
{
	__u32 slot = (__u32)(st->kv_id % SEQ_KV_SLOTS), i;

	if (!st->kv_id || pos >= SEQ_KV_MAX || seq_kv_owner[slot & (SEQ_KV_SLOTS - 1)] != st->kv_id)
		return NULL;
	i = slot * SEQ_KV_MAX + pos;
	return bpf_map_lookup_elem(&seq_kv, &i);
}

/* The token mixed as mix is in st's cache at pos now. */
static __always_inline void kv_put(struct seq_state *st, __u32 pos, __u64 mix)
{
	__u64 *at, *next;

	if (!st->kv_id) {   /* its slot, taken from whoever had it */
		st->kv_id = __sync_fetch_and_add(&seq_kv_ids, 1) + 1;
		seq_kv_owner[(st->kv_id % SEQ_KV_SLOTS) & (SEQ_KV_SLOTS - 1)] = st->kv_id;
		st->kv_from = st->kv_known = 0;
		st->kv_off_known = 0;
	}
	if (!(at = kv_at(st, pos)))
		return;
	if (pos < st->kv_from || pos > st->kv_known || st->kv_known == 0) {
		/* a new run: after a gap (the attach), or from 0 */
		st->kv_from = pos;
		st->kv_off = 0;
		st->kv_off_known = pos == 0;
		*at = 0;
	}
	if (!(next = kv_at(st, pos + 1)))
		return;
	*next = *at + mix;
	st->kv_known = pos + 1;   /* what lay past it is overwritten */
}

/* The open request's first prompt token, at pos: what its cache holds
 * below it, as far as that is known. */
static __always_inline void prompt_begin(struct seq_state *st, __u32 pos)
{
	__u64 *at;

	st->first_pos = (__s32)pos;
	st->prompt_sum = st->base_rel = 0;
	st->base = pos == 0 ? BASE_ABSOLUTE : BASE_UNKNOWN;
	if (pos && pos >= st->kv_from && pos <= st->kv_known && (at = kv_at(st, pos))) {
		st->base_rel = *at + st->kv_off;
		st->base = st->kv_off_known ? BASE_ABSOLUTE : BASE_RELATIVE;
	}
}

static __always_inline void seq_token(struct batch_walk *w, __u32 i, __s32 seq, __s32 pos, __s32 token,
				      int output)
{
	struct seq_key key = { .pid = w->pid, .seq = seq };
	struct engine_call *c = w->call;
	struct seq_state *st = lookup_or_init(&seqs, &key, &seq_new);
	__u64 mix;

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
	if (pos < 0)   /* no positions in the batch: the engine counts on */
		pos = st->last_pos + 1;
	st->last_pos = pos;
	mix = tok_mix(token, (__u32)pos);
	if (st->outputs == 0) {
		if (st->first_pos < 0)
			prompt_begin(st, (__u32)pos);
		st->prompt_sum += mix;
		st->prompt++;
		c->prefill++;
	} else {
		c->generate++;
	}
	kv_put(st, (__u32)pos, mix);
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
	struct batch_walk w = { .pid = pid, .decode = c->decode, .now = now, .call = c };
	struct engine_scratch *sc;
	__u32 zero = 0;
	__u8 *raw;
	__s32 n;

	if (!(sc = bpf_map_lookup_elem(&engine_scratch, &zero)))
		return;
	raw = sc->batch;
	if (bpf_probe_read_user(raw, sizeof(sc->batch), (void *)(PT_REGS_SP(ctx) + engine_abi.batch_stack_off)))
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
	__s32 seq = (__s32)PT_REGS_PARM2(ctx), p0 = (__s32)PT_REGS_PARM3(ctx), p1 = (__s32)PT_REGS_PARM4(ctx);
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
		if (p0 < 0)
			p0 = 0;
		if ((__u32)p0 < st->kv_known)   /* its cache keeps what lies below p0 */
			st->kv_known = (__u32)p0 < st->kv_from ? 0 : (__u32)p0;
	} else {                /* a window (context shift): positions move */
		st->last_pos = -1;
		st->kv_known = 0;
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

#define PROMPT_CHUNK 16   /* tokens read at a time */

struct prompt_walk {
	__u64 tokens;   /* the user array */
	__u32 n, base;  /* its length (0: unreadable); slot * PROMPT_PREFIX_MAX */
	__u64 sum;
};

/* Tokens [i * PROMPT_CHUNK, +PROMPT_CHUNK): their prefix sums, and on. */
static long prompt_chunk(__u64 i, struct prompt_walk *w)
{
	__s32 tok[PROMPT_CHUNK];
	__u32 at = (__u32)i * PROMPT_CHUNK, cnt = w->n - at;

	if (at >= w->n)
		return 1;
	if (cnt > PROMPT_CHUNK)
		cnt = PROMPT_CHUNK;
	if (bpf_probe_read_user(tok, cnt * 4, (void *)(w->tokens + (__u64)at * 4))) {
		w->n = 0;
		return 1;
	}
	for (__u32 j = 0; j < PROMPT_CHUNK; j++) {
		__u32 p = at + j, key = w->base + p;
		__u64 *pre;

		if (j >= cnt)
			break;
		if (p < PROMPT_PREFIX_MAX && (pre = bpf_map_lookup_elem(&prompt_prefix, &key)))
			*pre = w->sum;
		w->sum += tok_mix(tok[j], p);
	}
	return 0;
}

/* Where a new twin goes: the place of one from the same HTTP request (the
 * prompt tokenized again), else an empty or stale one, else the oldest. */
static __always_inline struct prompt_twin *twin_place(struct prompt_val *pv, const struct prompt_twin *t)
{
	int at = 0;

	for (int k = 0; k < PROMPT_TWINS; k++) {
		struct prompt_twin *o = &pv->twin[k];

		if (o->ts && o->http.sock == t->http.sock && o->http.seq == t->http.seq)
			return o;
		if (!o->ts || o->ts + PROMPT_STALE_NS < t->ts)
			return o;
		if (o->ts < pv->twin[at & (PROMPT_TWINS - 1)].ts)
			at = k;
	}
	return &pv->twin[at & (PROMPT_TWINS - 1)];
}

static const struct prompt_val prompt_none;

/* A prompt tokenized: kept by length and last token, with its sums. */
static __always_inline void tokenize_end(struct pt_regs *ctx, __u32 pid, __u32 tid)
{
	struct engine_call *c = bpf_map_lookup_elem(&engine_calls, &tid);
	__s32 n = (__s32)PT_REGS_RC(ctx);
	struct prompt_key key = { .pid = pid };
	struct prompt_twin t = {};
	struct prompt_walk w = {};
	struct prompt_val *pv;

	if (!c || !c->tokens || n <= 0 ||
	    bpf_probe_read_user(&key.last, sizeof(key.last), (void *)(c->tokens + (__u64)(n - 1) * 4)))
		return;
	key.n_tokens = (__u32)n;
	t.ts = c->tokenize_ns;
	t.nth = __sync_fetch_and_add(&prompts_tokenized, 1) + 1;
	http_link_of_thread(&t.http);
	w.tokens = c->tokens;
	c->tokens = 0;
	w.n = (__u32)n;
	w.base = (__u32)(t.nth % PROMPT_SLOTS) * PROMPT_PREFIX_MAX;
	prompt_slot_nth[(t.nth % PROMPT_SLOTS) & (PROMPT_SLOTS - 1)] = t.nth;
	if (bpf_loop(((__u32)n + PROMPT_CHUNK - 1) / PROMPT_CHUNK, prompt_chunk, &w, 0) < 0 || !w.n)
		return;   /* too long to walk, or unreadable */
	t.sum = w.sum;
	if (!(pv = lookup_or_init(&prompts, &key, &prompt_none)))
		return;
	for (int k = 0; k < PROMPT_TWINS; k++) {
		struct prompt_twin *o = &pv->twin[k];

		if (!o->ts || o->sum != t.sum || (o->http.sock == t.http.sock && o->http.seq == t.http.seq))
			continue;
		if (!t.group)
			t.group = o->group ? o->group
					   : (__sync_fetch_and_add(&prompt_groups, 1) + 1) & ~PROMPT_GROUP_UNSURE;
		if (!t.http.sock || !o->http.sock)
			t.group |= PROMPT_GROUP_UNSURE;
		o->group = t.group;
	}
	*twin_place(pv, &t) = t;
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

/* The traced process calling an engine function, and (in *tid) the
 * thread; 0 when it is none of ours or the tracer is detaching. Each
 * program returns on 0 itself: no macro hides a return. */
static __always_inline __u32 engine_caller(__u32 *tid)
{
	__u32 pid = traced_tgid();

	*tid = (__u32)bpf_get_current_pid_tgid();
	return detaching ? 0 : pid;
}

#endif
