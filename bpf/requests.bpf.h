/* requests.bpf.h - request-level tracing: the maps and helpers (programs:
 * requests.bpf.c; engines.bpf.c builds on them too): each request's timeline and inter-token gaps, keyed
 * by (pid, request) and never by thread, so a forward pass shared by many
 * requests (the serving engine's steps) is no different from one.
 *
 * Two sources feed the same state. The serving engine's req_queued /
 * req_admitted / req_preempted / req_finished, token_emit and step_begin /
 * step_end / kv_blocks probes; and the CLI's request_begin / token_end /
 * request_end (queued = admitted = begun). Everything is aggregated here
 * (agg kinds TTFT, ITL, QUEUE, PREFILL, DECODE, STEP, STEP_TOKENS, REQUEST;
 * map `serving`), so the daemon streams nothing per token; record's
 * STREAM_ALL also gets request, emit, step and req_state records. */
#ifndef SPANTRACE_REQUESTS_BPF_H
#define SPANTRACE_REQUESTS_BPF_H

#include "core.bpf.h"

#include "reqlink.bpf.h"

struct req_key {
	__u32 pid;
	__u32 pad;
	__u64 req;
};

/* A live request. 2 KB with its gap histogram, so created from a zeroed
 * global, never on the stack. */
struct req_state {
	__u64 queued_ns;
	__u64 first_admit_ns;
	__u64 token_admit_ns;             /* the admission the first token came from */
	__u64 first_token_ns, last_token_ns;
	__u64 itl_max;
	__u32 prompt_tokens;
	__u32 preemptions;
	__u32 itl_count;
	__u32 served;                     /* from the serving probes */
	struct http_link http;            /* the HTTP request it came in on (reqlink.bpf.h) */
	__u32 link_flags;                 /* REQ_F_TWIN, REQ_F_UNLINKED: how that link was found */
	__u32 twin_group;                 /* REQ_F_TWIN: its identical twins' group */
	__u32 itl[HIST_BUCKETS];          /* inter-token gaps, hist.h buckets */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, REQ_MAX_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct req_key);
	__type(value, struct req_state);
} requests __weak SEC(".maps");

/* The serving map's value plus what only the BPF side needs. */
struct serving_state {
	struct serving_val v;
	__u64 step;                       /* the step running now, 0 between steps */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);               /* tgid */
	__type(value, struct serving_state);
} serving __weak SEC(".maps");

static const struct req_state zero_req;
static const struct serving_state zero_serving;

static __always_inline struct serving_state *serving_get(__u32 pid)
{
	return lookup_or_init(&serving, &pid, &zero_serving);
}

/* The prefix cache's rows have no program of their own (probe_generic);
 * their counts and gauges go into `serving` too, before any record is
 * reserved, so a full ring buffer does not lose them. */
static __always_inline void serving_probe_generic(struct pt_regs *ctx, __u32 pid, __u32 probe)
{
	struct serving_state *s;
	long a0 = 0, a1 = 0;

	if (probe != PROBE_ID_prefix_hit && probe != PROBE_ID_prefix_cache &&
	    probe != PROBE_ID_state_prefix_cache)
		return;
	s = serving_get(pid);
	if (!s)
		return;
	if (probe == PROBE_ID_prefix_hit) {
		bpf_usdt_arg(ctx, 1, &a1);
		__sync_fetch_and_add(&s->v.prefix_hits, 1);
		__sync_fetch_and_add(&s->v.prefix_cached_tokens, (__u64)(__u32)a1);
	} else {
		bpf_usdt_arg(ctx, 0, &a0);
		bpf_usdt_arg(ctx, 1, &a1);
		s->v.prefix_cache_entries = (__u32)a0;
		s->v.prefix_cache_blocks = (__u32)a1;
	}
}

/* The engine's running/waiting gauges, as every lifecycle probe gives them. */
static __always_inline struct serving_state *serving_gauges(__u32 pid, __u32 running, __u32 waiting)
{
	struct serving_state *s = serving_get(pid);

	if (s) {
		s->v.running = running;
		s->v.waiting = waiting;
		s->v.gauges_seen = 1;
	}
	return s;
}

static __always_inline struct req_state *req_lookup(__u32 pid, __u64 req)
{
	struct req_key key = { .pid = pid, .req = req };

	return bpf_map_lookup_elem(&requests, &key);
}

/* A new request (a reused id starts over). */
static __always_inline void req_begin(__u32 pid, __u64 req, __u64 now, __u32 prompt_tokens, __u32 served)
{
	struct req_key key = { .pid = pid, .req = req };
	struct serving_state *s = serving_get(pid);
	struct req_state *st;

	if (s) {
		__sync_fetch_and_add(&s->v.requests, 1);
		__sync_fetch_and_add(&s->v.prompt_tokens, prompt_tokens);
	}
	if (bpf_map_update_elem(&requests, &key, &zero_req, BPF_ANY) ||
	    !(st = bpf_map_lookup_elem(&requests, &key))) {
		COUNT(req_table_full);
		return;
	}
	st->queued_ns = now;
	st->prompt_tokens = prompt_tokens;
	st->served = served;
	if (!served)   /* the CLI runs a request as soon as it has it */
		st->first_admit_ns = st->token_admit_ns = now;
}

static __always_inline void emit_record(__u64 req, __u64 now, __u64 gap, __u64 step, __u32 pos,
					__u32 token_id, __u32 first)
{
	struct emit_event *e;

	if (stream_mode != STREAM_ALL)
		return;
	e = reserve(EV_EMIT, sizeof(*e));
	if (!e)
		return;
	fill_header(&e->h, EV_EMIT, now);
	e->req = req;
	e->gap_ns = gap;
	e->step = step;
	e->pos = pos;
	e->token_id = token_id;
	e->first = first;
	e->pad = 0;
	submit(e);
}

/* One token out: the first is the request's TTFT, every later one a gap. */
static __always_inline void req_emit(__u32 pid, __u64 req, __u64 now, __u32 pos, __u32 token_id, __u64 step)
{
	struct req_state *st = req_lookup(pid, req);
	struct serving_state *s = serving_get(pid);
	__u64 gap;
	__u32 b;

	if (s)
		__sync_fetch_and_add(&s->v.generation_tokens, 1);
	if (!st) {
		COUNT(req_orphans);
		return;
	}
	if (!st->first_token_ns) {
		st->first_token_ns = st->last_token_ns = now;
		emit_record(req, now, now - st->queued_ns, step, pos, token_id, 1);
		return;
	}
	gap = now - st->last_token_ns;
	st->last_token_ns = now;
	agg_add(pid, AGG_KIND_ITL, LAYER_NONE, gap, 0);
	st->itl_count++;
	if (gap > st->itl_max)
		st->itl_max = gap;
	b = hist_bucket(gap);
	if (b < HIST_BUCKETS)
		st->itl[b]++;
	emit_record(req, now, gap, step, pos, token_id, 0);
}

/* ---- the gap percentiles, as user/analysis/stats.c reads them ---- */
struct itl_scan {
	const struct req_state *st;
	__u64 rank_x100[2];               /* q * count, in hundredths */
	__u64 value[2];
	__u64 cum;
	__u32 found;                      /* bit i: value[i] is set */
};

/* histogram_quantile's interpolation over the bucket's integers, with the
 * rank in hundredths so that no floating point is needed. */
static __always_inline __u64 interpolate(__u32 b, __u64 before, __u32 count, __u64 rank_x100)
{
	__u64 low = hist_bucket_low(b), high = hist_bucket_high(b);
	__u64 into = rank_x100 > before * 100 ? rank_x100 - before * 100 : 0;

	return low + (high - low) * into / ((__u64)count * 100);
}

static inline long itl_scan_bucket(__u64 b, void *data)
{
	struct itl_scan *sc = data;
	__u32 n;

	if (b >= HIST_BUCKETS)
		return 1;
	n = sc->st->itl[b];
	if (!n)
		return 0;
	for (int i = 0; i < 2; i++)
		if (!(sc->found & (1u << i)) && (sc->cum + n) * 100 >= sc->rank_x100[i]) {
			sc->value[i] = interpolate((__u32)b, sc->cum, n, sc->rank_x100[i]);
			sc->found |= 1u << i;
		}
	sc->cum += n;
	return sc->found == 3;
}

static __always_inline void itl_percentiles(const struct req_state *st, struct request_event *e)
{
	struct itl_scan sc = { .st = st };

	e->itl_max_ns = st->itl_max;
	e->itl_count = st->itl_count;
	e->itl_p50_ns = e->itl_p95_ns = 0;
	if (!st->itl_count)
		return;
	sc.rank_x100[0] = (__u64)st->itl_count * 50;
	sc.rank_x100[1] = (__u64)st->itl_count * 95;
	bpf_loop(HIST_BUCKETS, itl_scan_bucket, &sc, 0);
	e->itl_p50_ns = sc.value[0] < st->itl_max ? sc.value[0] : st->itl_max;
	e->itl_p95_ns = sc.value[1] < st->itl_max ? sc.value[1] : st->itl_max;
}

/* ---- the end of a request ---- */

/* The phases of a request that ended at now; 0 for one that did not happen. */
struct req_phases {
	__u64 e2e, queue, ttft, prefill, decode;
};

static __always_inline void req_phases(const struct req_state *st, __u64 now, struct req_phases *p)
{
	p->e2e = now - st->queued_ns;
	p->queue = st->first_admit_ns ? st->first_admit_ns - st->queued_ns : 0;
	p->ttft = st->first_token_ns ? st->first_token_ns - st->queued_ns : 0;
	p->prefill = st->first_token_ns && st->token_admit_ns ? st->first_token_ns - st->token_admit_ns : 0;
	p->decode = st->first_token_ns ? now - st->first_token_ns : 0;
}

/* The headline e2e and TTFT are the socket's where its response's end is
 * ending the request (reqlink.bpf.h: http_ending), else the engine's; the
 * phases inside (queue, prefill, decode) are the engine's. */
static __always_inline void aggregate_phases(__u32 pid, __u64 req, const struct req_state *st,
					     const struct req_phases *p)
{
	struct http_times *ht = http_ending_times();
	__u64 e2e = p->e2e, ttft = p->ttft;

	if (ht && ht->req == req && ht->start_ns && ht->end_ns >= ht->start_ns) {
		e2e = ht->end_ns - ht->start_ns;
		if (ht->first_ns >= ht->start_ns)
			ttft = ht->first_ns - ht->start_ns;
	}
	agg_add(pid, AGG_KIND_REQUEST, LAYER_NONE, e2e, 0);
	if (st->first_admit_ns)
		agg_add(pid, AGG_KIND_QUEUE, LAYER_NONE, p->queue, 0);
	if (st->first_token_ns) {
		agg_add(pid, AGG_KIND_TTFT, LAYER_NONE, ttft, 0);
		agg_add(pid, AGG_KIND_PREFILL, LAYER_NONE, p->prefill, 0);
		agg_add(pid, AGG_KIND_DECODE, LAYER_NONE, p->decode, 0);
	}
}

static __always_inline void request_record(__u32 pid, __u64 req, const struct req_state *st,
					   const struct req_phases *p, __u32 reason, __u32 generated)
{
	struct serving_state *s;
	struct request_event *e;

	if (stream_mode != STREAM_ALL)
		return;
	e = reserve(EV_REQUEST, sizeof(*e));
	if (!e)
		return;
	fill_header(&e->h, EV_REQUEST, st->queued_ns);
	if (e->h.pid != pid) {   /* ended from outside the process (engine_flush) */
		e->h.pid = pid;
		e->h.tid = pid;
	}
	e->dur_ns = p->e2e;
	e->req = req;
	e->prompt_tokens = st->prompt_tokens;
	e->generated_tokens = generated;
	e->queue_ns = p->queue;
	e->ttft_ns = p->ttft;
	e->prefill_ns = p->prefill;
	e->decode_ns = p->decode;
	itl_percentiles(st, e);
	e->preemptions = st->preemptions;
	e->finish_reason = reason;
	e->flags = (st->served ? REQ_F_SERVED : 0) | st->link_flags;
	s = bpf_map_lookup_elem(&serving, &e->h.pid);
	e->running = s ? s->v.running : 0;
	e->waiting = s ? s->v.waiting : 0;
	e->http_sock = st->http.sock;
	e->http_seq = st->http.seq;
	e->twin_group = st->twin_group;
	e->pad = 0;
	/* the join's fields (reqjoin.h): not BPF's to fill */
	e->from = REQ_FROM_ENGINE;
	e->engine_ts_ns = e->engine_ttft_ns = e->engine_dur_ns = 0;
	e->http_status = e->http_events = 0;
	submit(e);
}

/* reason: enum finish_reason, or FINISH_REASON_COUNT when not told. */
static __always_inline int req_finish(__u32 pid, __u64 req, __u64 now, __u32 reason, __u32 generated)
{
	struct req_key key = { .pid = pid, .req = req };
	struct req_state *st = bpf_map_lookup_elem(&requests, &key);
	struct serving_state *s = serving_get(pid);
	struct req_phases p;

	if (s && reason <= FINISH_REASON_COUNT)
		__sync_fetch_and_add(&s->v.finished[reason], 1);
	if (!st)
		return -1;
	req_phases(st, now, &p);
	aggregate_phases(pid, req, st, &p);
	/* it came to a server whose sockets are traced, with no HTTP request
	 * of its own: counted, so its engine-clock figures are never silent */
	if ((loaded & LOADED_HTTP) && !st->http.sock && http_pid_watched(pid))
		agg_add(pid, AGG_KIND_REQ_UNLINKED, LAYER_NONE, 0, 0);
	request_record(pid, req, st, &p, reason, generated);
	bpf_map_delete_elem(&requests, &key);
	return 0;
}

/* ---- the CLI: request_begin .. token_end .. request_end ---- */

/* ---- the serving engine ---- */

static __always_inline void req_state_record(__u64 req, __u64 now, __u32 state, __u32 a, __u32 b,
					     __u32 running, __u32 waiting)
{
	struct req_state_event *e;

	if (stream_mode != STREAM_ALL)
		return;
	e = reserve(EV_REQ_STATE, sizeof(*e));
	if (!e)
		return;
	fill_header(&e->h, EV_REQ_STATE, now);
	e->req = req;
	e->state = state;
	e->a = a;
	e->b = b;
	e->running = running;
	e->waiting = waiting;
	e->pad = 0;
	submit(e);
}

/* A step from begin_ns to now: aggregated, counted and (record) streamed. */
static __always_inline void step_done(__u32 pid, __u64 step, __u64 begin_ns, __u64 now, __u32 nseqs,
				      __u32 prefill_tokens, __u32 decode_tokens, __u32 kv_used_blocks)
{
	__u64 dur = now > begin_ns ? now - begin_ns : 0;
	struct serving_state *s;
	struct step_event *e;

	agg_add(pid, AGG_KIND_STEP, LAYER_NONE, dur, 0);
	agg_add(pid, AGG_KIND_STEP_TOKENS, LAYER_NONE, prefill_tokens + decode_tokens, 0);
	s = serving_get(pid);
	if (s) {
		__sync_fetch_and_add(&s->v.steps, 1);
		s->v.kv_used_blocks = kv_used_blocks;
		s->step = 0;
	}
	if (stream_mode != STREAM_ALL || !(e = reserve(EV_STEP, sizeof(*e))))
		return;
	fill_header(&e->h, EV_STEP, begin_ns);
	e->dur_ns = dur;
	e->step = step;
	e->nseqs = nseqs;
	e->prefill_tokens = prefill_tokens;
	e->decode_tokens = decode_tokens;
	e->kv_used_blocks = kv_used_blocks;
	submit(e);
}

/* ---- a process's requests go with it ---- */
static inline long drop_pid_request(struct bpf_map *map, struct req_key *key, struct req_state *val, void *data)
{
	if (key->pid == *(__u32 *)data)
		bpf_map_delete_elem(map, key);
	return 0;
}

#endif
