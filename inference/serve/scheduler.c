/* scheduler.c - continuous batching and preemption (see scheduler.h). */
#include <string.h>
#include "base/pool.h"
#include "serve/scheduler.h"
#include "base/trace.h"

static void list_remove(SeqList *l, Seq *q)
{
	if (q->prev)
		q->prev->next = q->next;
	else
		l->head = q->next;
	if (q->next)
		q->next->prev = q->prev;
	else
		l->tail = q->prev;
	q->prev = q->next = NULL;
	l->n--;
}

static void list_push_tail(SeqList *l, Seq *q)
{
	q->next = NULL;
	q->prev = l->tail;
	if (l->tail)
		l->tail->next = q;
	else
		l->head = q;
	l->tail = q;
	l->n++;
}

static void list_push_head(SeqList *l, Seq *q)
{
	q->prev = NULL;
	q->next = l->head;
	if (l->head)
		l->head->prev = q;
	else
		l->tail = q;
	l->head = q;
	l->n++;
}

int sched_init(Sched *s, int n_blocks, int block_size, int max_seqs, int max_batch_tokens,
	       InferError *err)
{
	memset(s, 0, sizeof(*s));
	if (max_seqs < 1 || max_batch_tokens < 1)
		return infer_fail(err, "scheduler: max_seqs %d and max_batch_tokens %d must be >= 1",
				  max_seqs, max_batch_tokens);
	if (kv_blocks_init(&s->kv, n_blocks, block_size, err) < 0)
		return -1;
	s->plan.items = pool_alloc(POOL_ACTIVATIONS, (size_t)max_seqs * sizeof(StepItem));
	if (!s->plan.items) {
		kv_blocks_destroy(&s->kv);
		return infer_fail(err, "scheduler: out of memory");
	}
	s->max_seqs = max_seqs;
	s->max_batch_tokens = max_batch_tokens;
	return 0;
}

static void prefix_free(PrefixCache *c)
{
	for (int i = 0; i < c->n_entries; i++) {
		pool_free(POOL_ACTIVATIONS, c->entries[i].tokens, (size_t)c->max_positions * sizeof(int));
		pool_free(POOL_ACTIVATIONS, c->entries[i].blocks, (size_t)c->max_blocks * sizeof(int));
	}
	pool_free(POOL_ACTIVATIONS, c->entries, (size_t)c->n_entries * sizeof(PrefixEntry));
	memset(c, 0, sizeof(*c));
}

void sched_destroy(Sched *s)
{
	prefix_free(&s->prefix);
	pool_free(POOL_ACTIVATIONS, s->plan.items, (size_t)s->max_seqs * sizeof(StepItem));
	kv_blocks_destroy(&s->kv);
	memset(s, 0, sizeof(*s));
}

int sched_prefix_init(Sched *s, int entries, int max_positions, InferError *err)
{
	PrefixCache *c = &s->prefix;

	if (entries < 1 || max_positions < 1)
		return 0;
	c->entries = pool_alloc(POOL_ACTIVATIONS, (size_t)entries * sizeof(PrefixEntry));
	if (!c->entries)
		return infer_fail(err, "scheduler: out of memory for the prefix cache");
	memset(c->entries, 0, (size_t)entries * sizeof(PrefixEntry));
	c->n_entries = entries;
	c->max_positions = max_positions;
	c->max_blocks = kv_blocks_for(max_positions, s->kv.block_size);
	for (int i = 0; i < entries; i++) {
		PrefixEntry *e = &c->entries[i];

		e->tokens = pool_alloc(POOL_ACTIVATIONS, (size_t)max_positions * sizeof(int));
		e->blocks = pool_alloc(POOL_ACTIVATIONS, (size_t)c->max_blocks * sizeof(int));
		if (!e->tokens || !e->blocks) {
			prefix_free(c);
			return infer_fail(err, "scheduler: out of memory for the prefix cache");
		}
	}
	return 0;
}

int seq_init(Seq *q, uint64_t id, const int *prompt, int n, int max_tokens, int block_size,
	     InferError *err)
{
	memset(q, 0, sizeof(*q));
	if (n < 1 || max_tokens < 1)
		return infer_fail(err, "a sequence needs a prompt and room to generate");
	q->id = id;
	q->cap = n + max_tokens;
	q->max_blocks = kv_blocks_for(q->cap, block_size);
	q->tokens = pool_alloc(POOL_ACTIVATIONS, (size_t)q->cap * sizeof(int));
	q->blocks = pool_alloc(POOL_ACTIVATIONS, (size_t)q->max_blocks * sizeof(int));
	if (!q->tokens || !q->blocks) {
		seq_free(q);
		return infer_fail(err, "out of memory for a %d-token sequence", q->cap);
	}
	memcpy(q->tokens, prompt, (size_t)n * sizeof(int));
	q->n_prompt = q->n_tokens = n;
	q->state = SEQ_NEW;
	return 0;
}

void seq_free(Seq *q)
{
	pool_free(POOL_ACTIVATIONS, q->tokens, (size_t)q->cap * sizeof(int));
	pool_free(POOL_ACTIVATIONS, q->blocks, (size_t)q->max_blocks * sizeof(int));
	q->tokens = q->blocks = NULL;
}

int sched_fits(const Sched *s, int positions)
{
	return kv_blocks_for(positions, s->kv.block_size) <= s->kv.n_blocks;
}

void sched_enqueue(Sched *s, Seq *q, int max_tokens)
{
	q->state = SEQ_WAITING;
	list_push_tail(&s->waiting, q);
	trace_req_queued(q->id, (uint32_t)q->n_prompt, (uint32_t)max_tokens,
			 (uint32_t)s->running.n, (uint32_t)s->waiting.n);
}

static void release_blocks(Sched *s, Seq *q)
{
	kv_blocks_release(&s->kv, q->blocks, q->n_blocks);
	q->n_blocks = 0;
	q->n_computed = 0;
}

/* ---- the prefix cache (see scheduler.h) ---- */

static void prefix_drop(Sched *s, PrefixEntry *e, int keep)
{
	kv_blocks_release(&s->kv, e->blocks + keep, e->n_blocks - keep);
	s->prefix.blocks -= e->n_blocks;
	s->prefix.used_entries--;
	e->n = e->n_blocks = 0;
}

static PrefixEntry *prefix_oldest(Sched *s)
{
	PrefixEntry *old = NULL;

	for (int i = 0; i < s->prefix.n_entries; i++) {
		PrefixEntry *e = &s->prefix.entries[i];

		if (e->n && (!old || e->stamp < old->stamp))
			old = e;
	}
	return old;
}

/* Evicts entries, oldest first, until `need` blocks are free; returns
 * whether they are. */
static int prefix_reclaim(Sched *s, int need)
{
	PrefixEntry *e;

	while (s->kv.n_free < need && (e = prefix_oldest(s)))
		prefix_drop(s, e, 0);
	return s->kv.n_free >= need;
}

/* Leaves q's computed positions in the cache (in an empty entry, or the
 * oldest one's place); blocks past them go back to the pool. */
static void prefix_leave(Sched *s, Seq *q)
{
	PrefixCache *c = &s->prefix;
	PrefixEntry *e = NULL;
	int n = q->n_computed < c->max_positions ? q->n_computed : c->max_positions;
	int keep = kv_blocks_for(n, s->kv.block_size);

	for (int i = 0; i < c->n_entries && !e; i++)
		if (!c->entries[i].n)
			e = &c->entries[i];
	if (!e) {
		e = prefix_oldest(s);
		prefix_drop(s, e, 0);
	}
	memcpy(e->tokens, q->tokens, (size_t)n * sizeof(int));
	memcpy(e->blocks, q->blocks, (size_t)keep * sizeof(int));
	e->n = n;
	e->n_blocks = keep;
	e->stamp = ++c->clock;
	c->blocks += keep;
	c->used_entries++;
	kv_blocks_release(&s->kv, q->blocks + keep, q->n_blocks - keep);
	q->n_blocks = 0;
	q->n_computed = 0;
}

static int common_prefix(const int *a, int na, const int *b, int nb)
{
	int n = na < nb ? na : nb, i = 0;

	while (i < n && a[i] == b[i])
		i++;
	return i;
}

/* Gives q the entry whose ids share the most leading positions with q's
 * tokens, all but the last (whose logits it needs), when that is more than
 * the start-of-text token; returns the positions it took (0: none). Its
 * blocks past them go back to the pool. */
static int prefix_take(Sched *s, Seq *q)
{
	PrefixEntry *best = NULL;
	int best_n = 0, keep;

	for (int i = 0; i < s->prefix.n_entries; i++) {
		PrefixEntry *e = &s->prefix.entries[i];
		int n = common_prefix(e->tokens, e->n, q->tokens, q->n_tokens - 1);

		if (e->n && n > best_n) {
			best = e;
			best_n = n;
		}
	}
	if (best_n < 2)
		return 0;
	keep = kv_blocks_for(best_n, s->kv.block_size);
	memcpy(q->blocks, best->blocks, (size_t)keep * sizeof(int));
	prefix_drop(s, best, keep);
	return best_n;
}

/* The most recently admitted sequence gives its blocks back and waits at
 * the head of the queue; it recomputes everything on its next admission. */
static void preempt(Sched *s, Seq *q)
{
	int freed = q->n_blocks;

	release_blocks(s, q);
	list_remove(&s->running, q);
	q->state = SEQ_WAITING;
	q->prefilled = 0;
	q->preemptions++;
	list_push_head(&s->waiting, q);
	trace_req_preempted(q->id, (uint32_t)(q->n_tokens - q->n_prompt), (uint32_t)freed,
			    (uint32_t)s->running.n, (uint32_t)s->waiting.n);
}

/* Grows q's table to cover `positions`, preempting from the tail of the
 * running list; returns 0, or -1 when q itself had to be preempted. */
static int grow_blocks(Sched *s, Seq *q, int positions, int *preempted)
{
	int need = kv_blocks_for(positions, s->kv.block_size) - q->n_blocks;

	while (!prefix_reclaim(s, need)) {
		Seq *victim = s->running.tail;

		preempt(s, victim);
		*preempted = 1;
		if (victim == q)
			return -1;
	}
	if (need > 0) {
		kv_blocks_alloc(&s->kv, need, q->blocks + q->n_blocks);
		q->n_blocks += need;
	}
	return 0;
}

static void plan_add(Sched *s, Seq *q, int n)
{
	StepPlan *p = &s->plan;
	StepItem *it = &p->items[p->n_items++];

	it->seq = q;
	it->start = q->n_computed;
	it->n = n;
	it->want_logits = q->n_computed + n == q->n_tokens;
	it->decode = q->prefilled;
	if (it->decode)
		p->decode_tokens += n;
	else
		p->prefill_tokens += n;
	q->in_step = 1;
}

/* Next chunk of every running sequence, in admission order. */
static int plan_running(Sched *s, int budget, int *preempted)
{
	Seq *q = s->running.head;

	while (q && budget > 0) {
		Seq *next = q->next;
		int left = q->n_tokens - q->n_computed;
		int n = left < budget ? left : budget;

		if (grow_blocks(s, q, q->n_computed + n, preempted) == 0) {
			plan_add(s, q, n);
			budget -= n;
		}
		/* a preemption may have removed what came after q */
		q = q->state == SEQ_RUNNING ? q->next : next;
		if (q && q->state != SEQ_RUNNING)
			break;
	}
	return budget;
}

/* q gets its blocks: the plan's admission check made sure the pool, with
 * the prefix cache's blocks reclaimed, holds them. */
static void admit(Sched *s, Seq *q)
{
	int cached = q->no_prefix_cache ? 0 : prefix_take(s, q);
	int keep = kv_blocks_for(cached, s->kv.block_size);
	int need = kv_blocks_for(q->n_tokens, s->kv.block_size) - keep;

	prefix_reclaim(s, need);
	kv_blocks_alloc(&s->kv, need, q->blocks + keep);
	q->n_blocks = keep + need;
	q->n_computed = cached;
	q->cached = cached;
	q->prefilled = 0;
	list_remove(&s->waiting, q);
	q->state = SEQ_RUNNING;
	list_push_tail(&s->running, q);
	trace_req_admitted(q->id, (uint32_t)(q->n_tokens - cached),
			   (uint32_t)(q->n_tokens - q->n_prompt), (uint32_t)s->running.n,
			   (uint32_t)s->waiting.n);
	if (cached)
		trace_prefix_hit(q->id, (uint32_t)cached, (uint32_t)q->n_tokens, (uint32_t)keep);
}

/* FIFO admission: the head waits until its whole prefix has blocks. No
 * admissions in a step that preempted, or the two would trade places. */
static void plan_admissions(Sched *s, int budget, int preempted)
{
	while (!preempted && budget > 0 && s->waiting.head && s->running.n < s->max_seqs) {
		Seq *q = s->waiting.head;
		int n;

		if (kv_blocks_for(q->n_tokens, s->kv.block_size) > s->kv.n_free + s->prefix.blocks)
			break;
		admit(s, q);
		n = q->n_tokens - q->n_computed;
		n = n < budget ? n : budget;
		plan_add(s, q, n);
		budget -= n;
	}
}

int sched_plan(Sched *s)
{
	int preempted = 0, budget;

	s->plan.n_items = s->plan.prefill_tokens = s->plan.decode_tokens = 0;
	budget = plan_running(s, s->max_batch_tokens, &preempted);
	plan_admissions(s, budget, preempted);
	return s->plan.n_items;
}

void sched_step_done(Sched *s)
{
	for (int i = 0; i < s->plan.n_items; i++) {
		StepItem *it = &s->plan.items[i];

		it->seq->in_step = 0;
		if (it->seq->state == SEQ_RUNNING)
			it->seq->n_computed += it->n;
	}
}

void sched_append(Seq *q, int token)
{
	if (q->n_tokens < q->cap)
		q->tokens[q->n_tokens++] = token;
	q->prefilled = 1;
}

void sched_finish(Sched *s, Seq *q, enum finish_reason reason)
{
	if (q->state == SEQ_FINISHED)
		return;
	if (q->state == SEQ_RUNNING) {
		if (s->prefix.n_entries && !q->no_prefix_cache && q->n_computed > 0 &&
		    reason != FINISH_ERROR)
			prefix_leave(s, q);
		else
			release_blocks(s, q);
		list_remove(&s->running, q);
	} else if (q->state == SEQ_WAITING) {
		list_remove(&s->waiting, q);
	}
	q->state = SEQ_FINISHED;
	q->reason = reason;
	trace_req_finished(q->id, reason, (uint32_t)q->n_prompt,
			   (uint32_t)(q->n_tokens - q->n_prompt), (uint32_t)q->preemptions,
			   (uint32_t)s->running.n, (uint32_t)s->waiting.n);
}
