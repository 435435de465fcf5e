/* probe_util.h - what the machine probes (bwprobe.c, fmaprobe.c) share: a
 * monotonic clock, the sort order for their medians, and argument parsing.
 * Header-only: each probe is one file compiled on its own by the bench. */
#ifndef SPANTRACE_PROBE_UTIL_H
#define SPANTRACE_PROBE_UTIL_H

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

#endif
