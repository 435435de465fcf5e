/* runstats.h - what a whole run adds up to, for record's summary: span,
 * kernel, token and request durations (exact nearest-rank up to a cap per
 * name, the one histogram past it), device busy time, mismatched ends and
 * the token time span. Fed as a sink. */
#ifndef SPANTRACE_RUNSTATS_H
#define SPANTRACE_RUNSTATS_H

#include <stdint.h>
#include "analysis/stats.h"
#include "core/events.h"

struct runstats {
	struct dist spans[SPAN_KIND_COUNT];
	struct dist kernels[KERNEL_COUNT];
	struct dist tokens, requests;
	uint64_t device_busy_ns;      /* summed kernel device time */
	uint64_t mismatched;          /* spans closed by a mismatched end */
	uint64_t first_token_ns;      /* begin of the first token */
	uint64_t last_token_end_ns;
};

/* span, token, request and kernel; ctx is the struct runstats. */
extern const struct event_handlers runstats_handlers;

int runstats_init(struct runstats *r);   /* -1 on allocation failure */
void runstats_free(struct runstats *r);
uint64_t runstats_spans(const struct runstats *r);
/* Tokens over first token begin .. last token end: the engine's tok/s. */
double runstats_tokens_per_s(const struct runstats *r);

#endif
