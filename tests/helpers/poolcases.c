/* poolcases.c - pool accounting edge cases, fired through libinfer.so's own
 * pool API so that a tracer sees real alloc/free probes:
 *   1. an allocation at a pointer still on record: for a real pointer that
 *      means its free was missed, so the tracer takes the old bytes back;
 *   2. a free of a pointer never allocated;
 *   3. an allocation that claims to reserve less than it holds (the pool
 *      raises it to its size).
 *
 * usage: poolcases   (built by t_trace_pool_edges.sh) */
#include "base/pool.h"

int main(void)
{
	pool_note_alloc(POOL_DEVICE, 0x1000, 100, 128);
	pool_note_alloc(POOL_DEVICE, 0x1000, 50, 64);  /* 1: no free in between */
	pool_note_free(POOL_DEVICE, 0x2000, 10, 16);   /* 2 */
	pool_note_alloc(POOL_DEVICE, 0x3000, 7, 0);    /* 3 */
	return 0;
}
