/* spans_example.c - a tiny "engine" that fires spans of its own through
 * include/spantrace/spans.h: one `load`, then N `step`s inside it, each
 * with a `sample` inside. Prints how many of each it fired, for the test
 * (tests/t_userspan.sh).
 *
 *   build/spans_example [N] [STEP_US]
 *   spantrace record --span usdt:build/spans_example:example:step_begin,step_end:step \
 *                    -- build/spans_example 100 */
#include <spantrace/spans.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void sleep_us(long us)
{
	struct timespec t = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&t, NULL);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 10;
	long us = argc > 2 ? strtol(argv[2], NULL, 10) : 200;

	if (n < 0 || us < 0) {
		fprintf(stderr, "usage: spans_example [N] [STEP_US]\n");
		return 2;
	}
	SPANTRACE_BEGIN(example, load);
	sleep_us(us);
	for (long i = 0; i < n; i++) {
		SPANTRACE_BEGIN1(example, step, i);
		sleep_us(us);
		SPANTRACE_BEGIN(example, sample);
		sleep_us(us / 4);
		SPANTRACE_END(example, sample);
		SPANTRACE_END1(example, step, i);
	}
	SPANTRACE_END(example, load);
	printf("{\"load\":1,\"step\":%ld,\"sample\":%ld}\n", n, n);
	return 0;
}
