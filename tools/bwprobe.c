/* bwprobe.c - streaming-read memory bandwidth with N threads.
 *
 * usage: bwprobe [THREADS [MIB]]   (defaults 2 threads, 512 MiB)
 * Each thread sums its own slice of a buffer far larger than the caches;
 * the median of several passes is printed as "bandwidth_gbs X". Used by
 * bench_engine.sh for the decode bound (weights bytes / bandwidth). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "probe_util.h"

#define PASSES 5

typedef struct {
	const float *p;
	size_t n;
	pthread_barrier_t *bar;
	double sum;
} Slice;

/* 8 independent accumulators so the loop is load-bound, not add-bound. */
static void *read_slice(void *arg)
{
	Slice *s = arg;
	float acc[8] = { 0 };

	pthread_barrier_wait(s->bar);
	for (size_t i = 0; i + 8 <= s->n; i += 8)
		for (int j = 0; j < 8; j++)
			acc[j] += s->p[i + j];
	for (int j = 0; j < 8; j++)
		s->sum += acc[j];
	pthread_barrier_wait(s->bar);
	return NULL;
}

int main(int argc, char **argv)
{
	long threads = 2, mib = 512;
	double gbs[PASSES], sink = 0;

	if ((argc > 1 && parse_pos(argv[1], 256, &threads)) ||
	    (argc > 2 && parse_pos(argv[2], 1 << 16, &mib))) {
		fprintf(stderr, "usage: bwprobe [THREADS 1..256 [MIB 1..65536]]\n");
		return 2;
	}
	size_t n = (size_t)mib << 18; /* floats */
	float *buf = malloc(n * sizeof(float));
	Slice *sl = calloc(threads, sizeof(*sl));
	pthread_t *tid = calloc(threads, sizeof(*tid));
	pthread_barrier_t bar;

	if (!buf || !sl || !tid) {
		fprintf(stderr, "bwprobe: out of memory for %ld MiB\n", mib);
		return 1;
	}
	/* Distinct contents on every page: identical pages may be merged by the
	 * host (KSM), and then reads hit one cached page instead of memory. */
	uint32_t x = 2463534242u;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13; x ^= x >> 17; x ^= x << 5;
		buf[i] = (float)(x >> 8) * (1.0f / 16777216.0f);
	}
	pthread_barrier_init(&bar, NULL, (unsigned)threads + 1);
	for (int pass = 0; pass < PASSES; pass++) {
		for (long t = 0; t < threads; t++)
			sl[t] = (Slice){ buf + n / threads * t, n / threads, &bar, 0 };
		double secs = timed_pass(&bar, threads, read_slice, sl, sizeof(*sl), tid);
		if (secs < 0) {
			fprintf(stderr, "bwprobe: pthread_create failed\n");
			return 1;
		}
		for (long t = 0; t < threads; t++)
			sink += sl[t].sum;
		gbs[pass] = (double)(n / threads * threads) * sizeof(float) / secs / 1e9;
	}
	qsort(gbs, PASSES, sizeof(gbs[0]), cmp_double);
	printf("bandwidth_gbs %.2f threads %ld mib %ld%s\n", gbs[PASSES / 2], threads, mib,
	       sink == 12345.0 ? " " : ""); /* sink keeps the sums live */
	free(buf);
	free(sl);
	free(tid);
	return 0;
}
