/* kvcache.h - the paged KV cache's block allocator.
 *
 * A backend keeps its key/value cache as one pool of fixed-size blocks per
 * device: block b holds positions b*block_size .. of whichever sequence owns
 * it, in every layer. A sequence maps its positions to blocks through its
 * block table: position p lives in block table[p / block_size], row
 * p % block_size. This file only hands out and takes back block ids; the
 * memory behind them is the backend's (host or device). */
#ifndef INFER_KVCACHE_H
#define INFER_KVCACHE_H

#include "base/error.h"

typedef struct {
	int block_size;  /* positions per block */
	int n_blocks;    /* blocks in the pool */
	int n_free;
	int *free_ids;   /* (n_blocks) stack of free ids; the top is free_ids[n_free - 1] */
} KvBlocks;

int kv_blocks_init(KvBlocks *kv, int n_blocks, int block_size, InferError *err);
void kv_blocks_destroy(KvBlocks *kv);

/* Blocks needed to hold positions 0..positions-1. */
int kv_blocks_for(int positions, int block_size);

/* n blocks into out, all or nothing: -1 (and nothing taken) when fewer are free. */
int kv_blocks_alloc(KvBlocks *kv, int n, int *out);
/* Gives ids back; each must have come from kv_blocks_alloc and not be free. */
void kv_blocks_release(KvBlocks *kv, const int *ids, int n);

static inline int kv_blocks_used(const KvBlocks *kv)
{
	return kv->n_blocks - kv->n_free;
}

#endif
