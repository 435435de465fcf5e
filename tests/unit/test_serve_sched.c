/* test_serve_sched.c - the KV block allocator and the continuous-batching
 * scheduler, without a model: FIFO admission when blocks are free, one
 * decode token per running sequence plus prefill chunks within the token
 * budget, preemption of the newest sequence back to the head of the queue,
 * cancellation freeing blocks at once, the gauges the probes carry, and
 * the prefix cache (a finished sequence's blocks taken by a later one that
 * starts with the same tokens, evicted before anyone is preempted). */
#include <string.h>
#include "check.h"
#include "serve/kvcache.h"
#include "serve/scheduler.h"

static void test_blocks(void)
{
	KvBlocks kv;
	InferError err;
	int a[4], b[4];

	CHECK(kv_blocks_init(&kv, 4, 16, &err) == 0, "init: %s", err.msg);
	CHECK(kv_blocks_for(0, 16) == 0 && kv_blocks_for(1, 16) == 1 && kv_blocks_for(16, 16) == 1 &&
	      kv_blocks_for(17, 16) == 2, "blocks for positions");
	CHECK(kv_blocks_alloc(&kv, 3, a) == 0, "3 of 4");
	CHECK(a[0] == 0 && a[1] == 1 && a[2] == 2, "an idle pool hands out 0, 1, 2: %d %d %d", a[0], a[1], a[2]);
	CHECK(kv_blocks_used(&kv) == 3, "used 3");
	CHECK(kv_blocks_alloc(&kv, 2, b) < 0 && kv_blocks_used(&kv) == 3, "all or nothing");
	kv_blocks_release(&kv, a, 3);
	CHECK(kv_blocks_used(&kv) == 0, "all back");
	CHECK(kv_blocks_alloc(&kv, 4, b) == 0, "the whole pool");
	kv_blocks_destroy(&kv);
	CHECK(kv_blocks_init(&kv, 0, 16, &err) < 0, "an empty pool is refused");
}

static int prompt[64];

/* A sequence whose prompt is first, first + 1, ... */
static void mkseq_from(Seq *q, uint64_t id, int first, int n, int max_tokens, int bs)
{
	InferError err;

	for (int i = 0; i < n; i++)
		prompt[i] = first + i;
	CHECK(seq_init(q, id, prompt, n, max_tokens, bs, &err) == 0, "seq_init: %s", err.msg);
}

static void mkseq(Seq *q, uint64_t id, int n, int max_tokens, int bs)
{
	mkseq_from(q, id, 1, n, max_tokens, bs);
}

/* Runs the plan as the serving engine would: positions computed, and a
 * token sampled for every chunk that reached the end. */
static void run_step(Sched *s)
{
	StepPlan *p = &s->plan;

	sched_step_done(s);
	for (int i = 0; i < p->n_items; i++)
		if (p->items[i].want_logits)
			sched_append(p->items[i].seq, 7);
}

static void test_admission_and_batching(void)
{
	Sched s;
	Seq a, b, c;
	InferError err;

	/* 6 blocks of 4 positions, 2 sequences, 8 tokens a step */
	CHECK(sched_init(&s, 6, 4, 2, 8, &err) == 0, "init: %s", err.msg);
	mkseq(&a, 1, 5, 4, 4);
	mkseq(&b, 2, 6, 4, 4);
	mkseq(&c, 3, 2, 2, 4);
	CHECK(sched_fits(&s, 24) && !sched_fits(&s, 25), "fits: 24 positions yes, 25 never");
	sched_enqueue(&s, &a, 4);
	sched_enqueue(&s, &b, 4);
	sched_enqueue(&s, &c, 2);
	CHECK(s.waiting.n == 3 && s.running.n == 0, "three waiting");

	/* step 1: a's 5-token prefill, then 3 of b's 6 (chunked); c waits (max_seqs) */
	CHECK(sched_plan(&s) == 2, "two sequences in step 1");
	CHECK(s.plan.items[0].seq == &a && s.plan.items[0].n == 5 && s.plan.items[0].want_logits,
	      "a's whole prompt");
	CHECK(s.plan.items[1].seq == &b && s.plan.items[1].n == 3 && !s.plan.items[1].want_logits,
	      "a chunk of b: %d", s.plan.items[1].n);
	CHECK(s.plan.prefill_tokens == 8 && s.plan.decode_tokens == 0, "8 prefill tokens");
	CHECK(s.running.n == 2 && s.waiting.n == 1 && s.waiting.head == &c, "c still queued");
	CHECK(a.n_blocks == 2 && b.n_blocks == 2, "blocks for the whole prefix at admission");
	run_step(&s);

	/* step 2: a decodes one token, b finishes its prefill */
	CHECK(sched_plan(&s) == 2, "two in step 2");
	CHECK(s.plan.items[0].seq == &a && s.plan.items[0].n == 1 && s.plan.items[0].decode,
	      "a decodes");
	CHECK(s.plan.items[1].seq == &b && s.plan.items[1].n == 3 && s.plan.items[1].want_logits,
	      "the rest of b");
	CHECK(s.plan.decode_tokens == 1 && s.plan.prefill_tokens == 3, "1 decode + 3 prefill");
	run_step(&s);

	/* a finishes: its blocks go back and c is admitted in the next plan */
	sched_finish(&s, &a, FINISH_LENGTH);
	CHECK(a.state == SEQ_FINISHED && a.n_blocks == 0, "a finished");
	CHECK(sched_plan(&s) == 2 && s.plan.items[1].seq == &c, "c admitted after a finished");
	run_step(&s);
	sched_finish(&s, &b, FINISH_STOP);
	sched_finish(&s, &c, FINISH_STOP);
	CHECK(kv_blocks_used(&s.kv) == 0, "every block back: %d", kv_blocks_used(&s.kv));
	seq_free(&a);
	seq_free(&b);
	seq_free(&c);
	sched_destroy(&s);
}

static void test_preemption(void)
{
	Sched s;
	Seq a, b;
	InferError err;

	/* 3 blocks of 2 positions: a and b each hold 1 block after prefill */
	CHECK(sched_init(&s, 3, 2, 2, 8, &err) == 0, "init: %s", err.msg);
	mkseq(&a, 1, 2, 3, 2);
	mkseq(&b, 2, 2, 3, 2);
	sched_enqueue(&s, &a, 3);
	sched_enqueue(&s, &b, 3);
	CHECK(sched_plan(&s) == 2 && kv_blocks_used(&s.kv) == 2, "both admitted, 2 blocks");
	run_step(&s);
	/* both now need position 2: a gets the last block, b then needs one more */
	CHECK(sched_plan(&s) == 1, "one sequence runs: %d", s.plan.n_items);
	CHECK(s.plan.items[0].seq == &a, "the oldest keeps running");
	CHECK(b.state == SEQ_WAITING && s.waiting.head == &b && b.preemptions == 1,
	      "the newest was preempted to the head of the queue");
	CHECK(b.n_blocks == 0 && b.n_computed == 0, "its blocks freed, its cache to recompute");
	CHECK(b.n_tokens == 3, "its generated token is kept for the recompute");
	run_step(&s);
	sched_finish(&s, &a, FINISH_LENGTH);
	/* b comes back: its prefill is prompt + the token it had generated */
	CHECK(sched_plan(&s) == 1 && s.plan.items[0].seq == &b && s.plan.items[0].n == 3 &&
	      !s.plan.items[0].decode, "b re-admitted, recomputing 3 positions");
	run_step(&s);
	sched_finish(&s, &b, FINISH_LENGTH);
	CHECK(kv_blocks_used(&s.kv) == 0, "every block back");
	seq_free(&a);
	seq_free(&b);
	sched_destroy(&s);
}

static void test_cancel(void)
{
	Sched s;
	Seq a, b;
	InferError err;

	CHECK(sched_init(&s, 4, 4, 1, 8, &err) == 0, "init: %s", err.msg);
	mkseq(&a, 1, 3, 4, 4);
	mkseq(&b, 2, 3, 4, 4);
	sched_enqueue(&s, &a, 4);
	sched_enqueue(&s, &b, 4);
	sched_plan(&s);
	run_step(&s);
	sched_finish(&s, &b, FINISH_ABORT); /* cancelled while waiting */
	CHECK(s.waiting.n == 0 && b.state == SEQ_FINISHED, "a waiting sequence leaves the queue");
	sched_finish(&s, &a, FINISH_ABORT); /* cancelled while running */
	CHECK(s.running.n == 0 && kv_blocks_used(&s.kv) == 0, "a running one frees its blocks at once");
	sched_finish(&s, &a, FINISH_ABORT); /* twice is harmless */
	CHECK(sched_plan(&s) == 0, "nothing left to plan");
	seq_free(&a);
	seq_free(&b);
	sched_destroy(&s);
}

/* Steps q, running alone, until it has max_tokens, and finishes it. */
static void finish_alone(Sched *s, Seq *q, int max_tokens)
{
	while (q->n_tokens - q->n_prompt < max_tokens) {
		CHECK(sched_plan(s) == 1 && s->plan.items[0].seq == q, "q runs alone");
		run_step(s);
	}
	sched_finish(s, q, FINISH_LENGTH);
}

static void test_prefix_cache(void)
{
	Sched s;
	Seq a, b, c, d, e;
	InferError err;

	/* 8 blocks of 4 positions, 2 sequences, 2 entries of up to 32 positions */
	CHECK(sched_init(&s, 8, 4, 2, 16, &err) == 0, "init: %s", err.msg);
	CHECK(sched_prefix_init(&s, 2, 32, &err) == 0, "prefix init: %s", err.msg);
	mkseq(&a, 1, 6, 2, 4);
	sched_enqueue(&s, &a, 2);
	finish_alone(&s, &a, 2);
	/* a computed its 6 prompt positions and its first token, not its last */
	CHECK(s.prefix.used_entries == 1 && s.prefix.blocks == 2, "a left 7 positions in 2 blocks: %d %d",
	      s.prefix.used_entries, s.prefix.blocks);
	CHECK(sched_kv_used(&s) == 0 && kv_blocks_used(&s.kv) == 2, "sequences hold none, the cache 2");

	/* b's prompt is a's: all but its last token come from the cache */
	mkseq(&b, 2, 6, 2, 4);
	sched_enqueue(&s, &b, 2);
	CHECK(sched_plan(&s) == 1 && s.plan.items[0].start == 5 && s.plan.items[0].n == 1 &&
	      s.plan.items[0].want_logits, "b computes its last prompt token only: start %d n %d",
	      s.plan.items[0].start, s.plan.items[0].n);
	CHECK(b.cached == 5 && s.plan.prefill_tokens == 1, "5 positions cached, 1 prefilled");
	CHECK(s.prefix.used_entries == 0 && s.prefix.blocks == 0 && b.n_blocks == 2,
	      "the entry was taken whole: its 2 blocks are b's");
	run_step(&s);
	finish_alone(&s, &b, 2);
	CHECK(s.prefix.used_entries == 1, "b left its positions");

	/* c shares only its first token: no hit */
	mkseq_from(&c, 3, 50, 3, 2, 4);
	c.tokens[0] = 1;
	sched_enqueue(&s, &c, 2);
	CHECK(sched_plan(&s) == 1 && c.cached == 0 && s.plan.items[0].n == 3, "one shared token: no hit");
	run_step(&s);
	finish_alone(&s, &c, 2);
	CHECK(s.prefix.used_entries == 2, "two entries");

	/* cache_prompt false: neither takes nor leaves */
	mkseq(&d, 4, 6, 2, 4);
	d.no_prefix_cache = 1;
	sched_enqueue(&s, &d, 2);
	CHECK(sched_plan(&s) == 1 && d.cached == 0 && s.plan.items[0].n == 6, "cache_prompt false: no hit");
	run_step(&s);
	finish_alone(&s, &d, 2);
	CHECK(s.prefix.used_entries == 2 && s.prefix.blocks == 3, "and left nothing: %d entries, %d blocks",
	      s.prefix.used_entries, s.prefix.blocks);

	/* e needs the whole pool: the entries are evicted to admit it */
	mkseq_from(&e, 5, 100, 30, 2, 4);
	sched_enqueue(&s, &e, 2);
	CHECK(sched_plan(&s) == 1 && e.n_blocks == 8 && e.cached == 0, "e admitted with all 8 blocks");
	CHECK(s.prefix.used_entries == 0 && s.prefix.blocks == 0, "the cache gave its blocks back");
	run_step(&s);
	sched_finish(&s, &e, FINISH_ERROR);
	CHECK(s.prefix.used_entries == 0 && kv_blocks_used(&s.kv) == 0, "an error leaves nothing cached");
	seq_free(&a);
	seq_free(&b);
	seq_free(&c);
	seq_free(&d);
	seq_free(&e);
	sched_destroy(&s);
}

int main(void)
{
	test_blocks();
	test_admission_and_batching();
	test_preemption();
	test_cancel();
	test_prefix_cache();
	return check_report();
}
