/* probe_util.h - what the machine probes (bwprobe.c, fmaprobe.c) share: a
 * monotonic clock, the sort order for their medians, argument parsing, and
 * one timed pass of worker threads.
 * Header-only: each probe is one file compiled on its own by the bench. */
#ifndef SPANTRACE_PROBE_UTIL_H
#define SPANTRACE_PROBE_UTIL_H

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static inline double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* qsort order for doubles, ascending. */
static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* *out = s as a whole number in 1..max; -1 when s is not one. */
static inline int parse_pos(const char *s, long max, long *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (end == s || *end || v < 1 || v > max)
		return -1;
	*out = v;
	return 0;
}

/* One timed pass: `threads` threads run fn, thread t on (char *)args +
 * t * arg_size, each waiting on bar (threads + 1 parties) just before and
 * just after its timed work. Returns the seconds between the two waits,
 * with every thread joined; -1 when a thread cannot start. */
static inline double timed_pass(pthread_barrier_t *bar, long threads, void *(*fn)(void *),
				void *args, size_t arg_size, pthread_t *tid)
{
	double t0, secs;

	for (long t = 0; t < threads; t++)
		if (pthread_create(&tid[t], NULL, fn, (char *)args + t * arg_size))
			return -1;
	pthread_barrier_wait(bar);
	t0 = now_s();
	pthread_barrier_wait(bar);
	secs = now_s() - t0;
	for (long t = 0; t < threads; t++)
		pthread_join(tid[t], NULL);
	return secs;
}

#endif
