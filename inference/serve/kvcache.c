/* kvcache.c - a free-list of KV cache blocks (see kvcache.h). */
#include "serve/kvcache.h"
#include "base/pool.h"

int kv_blocks_init(KvBlocks *kv, int n_blocks, int block_size, InferError *err)
{
	kv->free_ids = NULL;
	kv->n_blocks = kv->n_free = 0;
	kv->block_size = block_size;
	if (n_blocks < 1 || block_size < 1)
		return infer_fail(err, "kv cache: %d blocks of %d positions is not a pool",
				  n_blocks, block_size);
	kv->free_ids = pool_alloc(POOL_ACTIVATIONS, (size_t)n_blocks * sizeof(int));
	if (!kv->free_ids)
		return infer_fail(err, "kv cache: out of memory for %d block ids", n_blocks);
	kv->n_blocks = kv->n_free = n_blocks;
	/* Lowest ids on top, so an idle pool hands out 0, 1, 2, ... */
	for (int i = 0; i < n_blocks; i++)
		kv->free_ids[i] = n_blocks - 1 - i;
	return 0;
}

void kv_blocks_destroy(KvBlocks *kv)
{
	pool_free(POOL_ACTIVATIONS, kv->free_ids, (size_t)kv->n_blocks * sizeof(int));
	kv->free_ids = NULL;
	kv->n_blocks = kv->n_free = 0;
}

int kv_blocks_for(int positions, int block_size)
{
	return positions <= 0 ? 0 : (positions - 1) / block_size + 1;
}

int kv_blocks_alloc(KvBlocks *kv, int n, int *out)
{
	if (n < 0 || n > kv->n_free)
		return -1;
	for (int i = 0; i < n; i++)
		out[i] = kv->free_ids[--kv->n_free];
	return 0;
}

void kv_blocks_release(KvBlocks *kv, const int *ids, int n)
{
	for (int i = 0; i < n && kv->n_free < kv->n_blocks; i++)
		kv->free_ids[kv->n_free++] = ids[i];
}
