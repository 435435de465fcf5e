/* probecost.c - per-hit cost of one USDT probe site, fired in a tight loop.
 *
 *   probecost HITS      prints "ns_per_hit X hits N trampoline T"
 *
 * Built three ways by tools/bench_probes.sh:
 *   -DPROBECOST_NOP5   the probe sits on a 5-byte nop, as in inference/base/usdt.h
 *                      (the kernel can optimize the uprobe into a call)
 *   (nothing)          sys/sdt.h's own 1-byte nop (every hit traps on int3)
 *   -DPROBECOST_NONE   no probe at all: the bare loop, to subtract
 * Provider "pc", probe "hit", one argument (the loop index), no semaphore:
 * we measure the probe instruction itself, not a guard around it.
 * Build with -mno-red-zone: the optimized uprobe's call writes below %rsp.
 *
 * "trampoline 1" means the kernel mapped [uprobes-trampoline] into this
 * process by the end of the loop, i.e. the optimized path was taken. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if !defined(PROBECOST_NONE)
#include <sys/sdt.h>
#if defined(PROBECOST_NOP5) && defined(__x86_64__)
#undef _SDT_NOP
#define _SDT_NOP .nops 5
#endif
#endif

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* noinline so every variant compiles to the same loop around the site */
static __attribute__((noinline)) void fire(long hits)
{
	for (long i = 0; i < hits; i++) {
#if defined(PROBECOST_NONE)
		__asm__ __volatile__("" : : "r"(i));  /* keep the loop, no probe */
#else
		STAP_PROBE1(pc, hit, i);
#endif
	}
}

/* 1 if the kernel mapped its uprobe trampoline into us, 0 if not, -1 if
 * /proc/self/maps could not be read. */
static int has_uprobe_trampoline(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int found = 0;

	if (!f)
		return -1;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "[uprobes-trampoline]") != NULL;
	fclose(f);
	return found;
}

static int parse_hits(const char *s, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1)
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	long hits;
	uint64_t t0, t1;

	if (argc != 2 || parse_hits(argv[1], &hits) < 0) {
		fprintf(stderr, "usage: probecost HITS   (HITS a positive integer)\n");
		return 2;
	}
	t0 = now_ns();
	fire(hits);
	t1 = now_ns();
	printf("ns_per_hit %.3f hits %ld trampoline %d\n",
	       (double)(t1 - t0) / (double)hits, hits, has_uprobe_trampoline());
	return 0;
}
