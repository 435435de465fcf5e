/* fmaprobe.c - the machine's fp32 multiply-add roof with N threads.
 *
 * usage: fmaprobe [THREADS]   (default 2)
 * Each thread runs 12 independent chains of fused multiply-adds as wide as
 * the CPU's vectors (16 lanes with AVX-512, else 8: 12 chains of 16 lanes
 * would not fit AVX2's 16 registers, and the spills read as a roof a tenth
 * of the real one), enough to cover the FMA latency on every port; the
 * median of several passes is printed as "fma_gflops X". Build it with
 * -O2 -march=native so the widest vectors the CPU has are used. Used by
 * bench_serve.sh: a batched step needs 2 flops per weight per token, so
 * this bounds how far batching can raise tokens per second. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "probe_util.h"

#define PASSES 5
#define CHAINS 12
#define ITERS 20000000L

#ifdef __AVX512F__
#define LANES 16
#else
#define LANES 8
#endif
typedef float vf __attribute__((vector_size(LANES * sizeof(float))));

typedef struct {
	pthread_barrier_t *bar;
	float sum;
} Worker;

static void *fma_chains(void *arg)
{
	Worker *w = arg;
	vf a[CHAINS], b = { 0 }, c = { 0 };

	b += 0.9999f;
	c += 1e-4f;
	for (int i = 0; i < CHAINS; i++)
		a[i] = (vf){ 0 } + (float)i * 1e-3f;
	pthread_barrier_wait(w->bar);
	for (long k = 0; k < ITERS; k++)
#pragma GCC unroll 12 /* CHAINS: the chains live in registers */
		for (int i = 0; i < CHAINS; i++)
			a[i] = a[i] * b + c; /* contracted to one FMA under -march=native */
	pthread_barrier_wait(w->bar);
	for (int i = 0; i < CHAINS; i++)
		for (int l = 0; l < LANES; l++)
			w->sum += a[i][l];
	return NULL;
}

int main(int argc, char **argv)
{
	long threads = 2;
	double gflops[PASSES], sink = 0;

	if (argc > 1 && parse_pos(argv[1], 256, &threads)) {
		fprintf(stderr, "usage: fmaprobe [THREADS 1..256]\n");
		return 2;
	}
	Worker *wk = calloc(threads, sizeof(*wk));
	pthread_t *tid = calloc(threads, sizeof(*tid));
	pthread_barrier_t bar;

	if (!wk || !tid) {
		fprintf(stderr, "fmaprobe: out of memory\n");
		return 1;
	}
	pthread_barrier_init(&bar, NULL, (unsigned)threads + 1);
	for (int pass = 0; pass < PASSES; pass++) {
		for (long t = 0; t < threads; t++)
			wk[t] = (Worker){ &bar, 0 };
		double secs = timed_pass(&bar, threads, fma_chains, wk, sizeof(*wk), tid);
		if (secs < 0) {
			fprintf(stderr, "fmaprobe: pthread_create failed\n");
			return 1;
		}
		for (long t = 0; t < threads; t++)
			sink += wk[t].sum;
		gflops[pass] = (double)threads * ITERS * CHAINS * LANES * 2 / secs / 1e9;
	}
	qsort(gflops, PASSES, sizeof(gflops[0]), cmp_double);
	printf("fma_gflops %.1f threads %ld%s\n", gflops[PASSES / 2], threads,
	       sink == 12345.0 ? " " : ""); /* sink keeps the chains live */
	free(wk);
	free(tid);
	return 0;
}
