/* workers.h - a few threads that share the items of a loop with its caller.
 *
 * For host work between forwards that the backend's threads leave idle
 * (the serving engine's sampling: serve.c). The threads sleep on a
 * condition variable between loops, so they take no core from a backend
 * while it runs. */
#ifndef INFER_WORKERS_H
#define INFER_WORKERS_H

#include <pthread.h>
#include "base/error.h"

typedef void (*WorkFn)(void *ctx, int item);

typedef struct {
	pthread_t *threads;   /* (started) */
	int started;          /* threads running */
	int ready;            /* the lock and conditions exist */
	pthread_mutex_t lock;
	pthread_cond_t start, done;
	unsigned gen;         /* bumped per loop: a thread wakes for each once */
	int seats;            /* threads the current loop still takes */
	int busy;             /* threads seated in it and not yet done */
	int stop;
	WorkFn fn;
	void *ctx;
	int n_items;
	int next;             /* the next item to take (atomic) */
} Workers;

/* Starts n_threads threads (0: none; workers_run then runs alone). */
int workers_init(Workers *w, int n_threads, InferError *err);
/* fn(ctx, i) for every i in 0..n_items-1, each once, on the caller and the
 * threads; returns when all are done. */
void workers_run(Workers *w, WorkFn fn, void *ctx, int n_items);
/* Stops and joins the threads. A zeroed Workers is fine. */
void workers_free(Workers *w);

#endif
