/* test_workers.c - workers_run calls fn once for every item, on the caller
 * and its threads, loop after loop, with any number of threads, and is done
 * with them all when it returns. */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "base/workers.h"

#define MAX_ITEMS 64

typedef struct {
	int calls[MAX_ITEMS];
} Tally;

static void count(void *ctx, int item)
{
	Tally *t = ctx;

	/* atomic: were an item taken twice, both adds must show */
	__atomic_fetch_add(&t->calls[item], 1, __ATOMIC_RELAXED);
}

static void check_threads(int n_threads)
{
	Workers w;
	InferError err;
	Tally t;

	memset(&t, 0, sizeof(t));
	CHECK(workers_init(&w, n_threads, &err) == 0, "%d threads: %s", n_threads, err.msg);
	for (int loop = 1; loop <= 500; loop++) {
		int n = loop % MAX_ITEMS; /* 0 and 1 item too */

		memset(&t, 0, sizeof(t));
		workers_run(&w, count, &t, n);
		for (int i = 0; i < MAX_ITEMS; i++)
			CHECK(t.calls[i] == (i < n), "%d threads, loop %d (%d items): item %d called %d times",
			      n_threads, loop, n, i, t.calls[i]);
	}
	workers_free(&w);
	workers_free(&w); /* freed twice: a no-op */
}

int main(void)
{
	Workers zeroed;

	memset(&zeroed, 0, sizeof(zeroed));
	workers_free(&zeroed);
	for (int n = 0; n <= 4; n++)
		check_threads(n);
	return check_report();
}
