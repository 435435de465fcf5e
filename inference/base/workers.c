/* workers.c - see workers.h. */
#include <stdlib.h>
#include <string.h>
#include "base/workers.h"

/* Items of the current loop until none is left. */
static void take_items(Workers *w)
{
	int i;

	while ((i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED)) < w->n_items)
		w->fn(w->ctx, i);
}

/* A thread wakes for each loop, and works in it if a seat is left: a
 * loop of n items seats n - 1 threads at most, so a short one does not
 * wake every thread of a big machine. */
static void *worker_main(void *arg)
{
	Workers *w = arg;
	unsigned seen = 0;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->stop && (w->gen == seen || w->seats == 0))
			pthread_cond_wait(&w->start, &w->lock);
		if (w->stop)
			break;
		seen = w->gen;
		w->seats--;
		pthread_mutex_unlock(&w->lock);
		take_items(w);
		pthread_mutex_lock(&w->lock);
		if (--w->busy == 0)
			pthread_cond_signal(&w->done);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int workers_init(Workers *w, int n_threads, InferError *err)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->start, NULL);
	pthread_cond_init(&w->done, NULL);
	w->ready = 1;
	if (n_threads <= 0)
		return 0;
	w->threads = calloc((size_t)n_threads, sizeof(*w->threads));
	if (!w->threads) {
		workers_free(w);
		return infer_fail(err, "out of memory for %d worker threads", n_threads);
	}
	for (int i = 0; i < n_threads; i++) {
		int rc = pthread_create(&w->threads[i], NULL, worker_main, w);

		if (rc != 0) {
			workers_free(w);
			return infer_fail(err, "cannot start a worker thread: %s", strerror(rc));
		}
		w->started++;
	}
	return 0;
}

void workers_run(Workers *w, WorkFn fn, void *ctx, int n_items)
{
	w->fn = fn;
	w->ctx = ctx;
	w->n_items = n_items;
	w->next = 0;
	if (w->started == 0 || n_items < 2) {
		take_items(w);
		return;
	}
	pthread_mutex_lock(&w->lock);
	w->gen++;
	w->seats = w->busy = w->started < n_items - 1 ? w->started : n_items - 1;
	for (int i = 0; i < w->seats; i++)
		pthread_cond_signal(&w->start);
	pthread_mutex_unlock(&w->lock);
	take_items(w);
	pthread_mutex_lock(&w->lock);
	while (w->busy > 0)
		pthread_cond_wait(&w->done, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

void workers_free(Workers *w)
{
	if (!w->ready)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = 1;
	pthread_cond_broadcast(&w->start);
	pthread_mutex_unlock(&w->lock);
	for (int i = 0; i < w->started; i++)
		pthread_join(w->threads[i], NULL);
	free(w->threads);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->start);
	pthread_cond_destroy(&w->done);
	memset(w, 0, sizeof(*w));
}
