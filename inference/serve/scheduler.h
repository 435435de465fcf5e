/* scheduler.h - continuous batching: which tokens of which sequences go into
 * the next engine step.
 *
 * Sequences wait in a FIFO queue and are admitted, in order, when the KV
 * pool has blocks for their whole prefix and fewer than max_seqs run. Each
 * step takes the next token of every running sequence that has finished
 * its prefill, then prefill chunks, within max_batch_tokens (chunked
 * prefill). A running sequence that needs a block when none is free takes
 * one from the most recently admitted sequence, which is preempted: its
 * blocks are freed, it goes back to the head of the queue, and on its next
 * admission it recomputes its prompt and the tokens it had generated.
 *
 * The prefix cache (off unless sched_prefix_init): a finished sequence's
 * blocks are kept with the ids of the positions they hold. A sequence
 * admitted later whose tokens start with the same ids takes the entry with
 * the longest common prefix and computes only the rest, as llama-server's
 * slots do (cache_prompt). The entry is taken whole, not shared: its blocks
 * past the common prefix go back to the pool, and the new positions
 * overwrite the rest of the last block kept. The engine's results do not
 * depend on how a sequence's positions were batched, so a hit gives the
 * same logits as a recomputation. Entries are evicted oldest first when a
 * sequence needs blocks, before any preemption.
 *
 * Pure bookkeeping, no model: the serving engine (serve.c) runs the plan.
 * Lifecycle probes fire from here, so the running/waiting gauges they carry
 * are the scheduler's own. Not thread-safe: the caller holds a lock. */
#ifndef INFER_SCHEDULER_H
#define INFER_SCHEDULER_H

#include <stdint.h>
#include "serve/kvcache.h"
#include "spantrace/probes.h"

typedef enum { SEQ_NEW, SEQ_WAITING, SEQ_RUNNING, SEQ_FINISHED } SeqState;

typedef struct Seq {
	uint64_t id;
	int *tokens;        /* (cap) prompt ids, then generated ids */
	int cap;            /* prompt + max_tokens */
	int n_prompt;
	int n_tokens;       /* prompt + generated so far */
	int n_computed;     /* positions whose keys/values are in the cache */
	int *blocks;        /* (max_blocks) block table */
	int n_blocks, max_blocks;
	SeqState state;
	int prefilled;      /* sampled since its last admission: its chunks are decode */
	int in_step;        /* part of the step being run */
	int preemptions;
	int no_prefix_cache; /* neither reuse a cached prefix nor leave one */
	int cached;         /* positions a prefix-cache hit gave it at its last admission */
	enum finish_reason reason;
	struct Seq *prev, *next; /* in the waiting queue or the running list */
} Seq;

typedef struct {
	Seq *head, *tail;
	int n;
} SeqList;

/* One sequence's part of a step: tokens[start .. start+n) at those positions. */
typedef struct {
	Seq *seq;
	int start, n;
	int want_logits;    /* the chunk reaches the sequence's last token */
	int decode;
} StepItem;

typedef struct {
	StepItem *items;    /* (max_seqs) */
	int n_items;
	int prefill_tokens, decode_tokens;
} StepPlan;

/* A finished sequence's computed positions (the prefix cache). */
typedef struct {
	int *tokens;        /* (max_positions) ids of positions 0..n-1 */
	int n;              /* positions its blocks hold; 0: an empty entry */
	int *blocks;        /* (max_blocks) */
	int n_blocks;
	uint64_t stamp;     /* when it was left: the oldest goes first */
} PrefixEntry;

typedef struct {
	PrefixEntry *entries; /* (n_entries); none: the cache is off */
	int n_entries, max_positions, max_blocks;
	int used_entries, blocks; /* blocks: held by all entries, reclaimable */
	uint64_t clock;
} PrefixCache;

typedef struct {
	KvBlocks kv;
	int max_seqs;
	int max_batch_tokens;
	SeqList waiting;    /* FIFO: admitted from the head, preempted back to the head */
	SeqList running;    /* admission order */
	StepPlan plan;
	PrefixCache prefix;
} Sched;

int sched_init(Sched *s, int n_blocks, int block_size, int max_seqs, int max_batch_tokens,
	       InferError *err);
void sched_destroy(Sched *s);

/* Turns the prefix cache on: up to `entries` finished sequences of at most
 * max_positions positions each. */
int sched_prefix_init(Sched *s, int entries, int max_positions, InferError *err);

/* Blocks held by sequences (the pool's use less the prefix cache's). */
static inline int sched_kv_used(const Sched *s)
{
	return kv_blocks_used(&s->kv) - s->prefix.blocks;
}

/* Sets up q (tokens and block table from the activations pool) for a
 * prompt of n ids and at most max_tokens more. */
int seq_init(Seq *q, uint64_t id, const int *prompt, int n, int max_tokens, int block_size,
	     InferError *err);
void seq_free(Seq *q);

/* Whether a sequence of that many positions could ever run (its blocks do
 * not exceed the pool). */
int sched_fits(const Sched *s, int positions);

/* Queues q at the tail (req_queued). */
void sched_enqueue(Sched *s, Seq *q, int max_tokens);

/* Plans the next step into s->plan (preempting and admitting as needed);
 * returns the number of items. Marks each planned sequence in_step. */
int sched_plan(Sched *s);

/* After the step ran: the planned positions are computed. */
void sched_step_done(Sched *s);

/* Appends a sampled token to a running sequence. */
void sched_append(Seq *q, int token);

/* Ends q from any state: frees its blocks, or leaves its computed positions
 * in the prefix cache (stop, length or abort, and the cache on), and
 * removes it (req_finished). */
void sched_finish(Sched *s, Seq *q, enum finish_reason reason);

#endif
