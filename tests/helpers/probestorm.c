/* probestorm.c - a probe load generator for the loss-accounting tests.
 *
 * Fires the engine's own probe sites (libinfer.so's trace API) in a tight
 * loop, as fast as one thread can: per iteration one token (token_begin/end)
 * around a forward span (span_begin/end) around a rope op (op_begin/end),
 * i.e. three matched events a tracer streams. One request wraps the loop.
 * --stats writes the engine's exact probe-call counts, the ground truth the
 * tracer's fired/delivered/dropped must add up to. --layers N cycles the
 * rope op through layers 0..N-1, so the tracer aggregates N series of it.
 *
 * usage: probestorm ITERATIONS [--layers N] [--stats FILE]
 * Built by the tests themselves:
 *   gcc -O2 -Iinference tests/helpers/probestorm.c -Lbuild -linfer -Wl,-rpath,build */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/trace.h"

static int parse_iterations(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v == 0)
		return -1;
	*out = v;
	return 0;
}

static void storm(uint64_t iterations, uint64_t layers)
{
	const uint64_t req = 1;

	trace_request_begin(req, 1);
	for (uint64_t i = 0; i < iterations; i++) {
		uint32_t pos = (uint32_t)i;
		trace_token_begin(req, pos, pos & 511);
		trace_span_begin(SPAN_FORWARD, LAYER_NONE);
		trace_span_begin(SPAN_ROPE, (int)(i % layers));
		trace_span_end(SPAN_ROPE, (int)(i % layers));
		trace_span_end(SPAN_FORWARD, LAYER_NONE);
		trace_token_end(req, pos, (pos + 1) & 511);
	}
	trace_request_end(req, (uint32_t)iterations);
}

int main(int argc, char **argv)
{
	uint64_t iterations, layers = 1;
	const char *stats = NULL;

	if (argc < 2 || parse_iterations(argv[1], &iterations)) {
		fprintf(stderr, "usage: probestorm ITERATIONS [--layers N] [--stats FILE]\n");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--stats") && i + 1 < argc)
			stats = argv[++i];
		else if (!strcmp(argv[i], "--layers") && i + 1 < argc && !parse_iterations(argv[i + 1], &layers))
			i++;
		else {
			fprintf(stderr, "probestorm: bad argument '%s'\n", argv[i]);
			return 2;
		}
	}
	if (stats)
		trace_stats_enable();
	uint64_t t0 = trace_now_ns();
	storm(iterations, layers);
	uint64_t wall = trace_now_ns() - t0;
	if (stats) {
		InferError err;
		if (trace_stats_write(stats, wall, &err)) {
			fprintf(stderr, "probestorm: %s\n", err.msg);
			return 1;
		}
	}
	fprintf(stderr, "probestorm: %" PRIu64 " iterations in %.3f s (%.0f probe hits/s)\n",
		iterations, wall / 1e9, wall ? 6.0 * (double)iterations * 1e9 / (double)wall : 0.0);
	return 0;
}
