/* profile.h - what `spantrace profile` (and `record --perf`) aggregate:
 * span-tagged CPU samples into folded stacks, and per-span perf counter
 * deltas into totals and means. The command itself (session, attach, the
 * sampling program) is wired on top of these.
 *
 * Samples: a stack pair as BPF stack maps store it (innermost first, kernel
 * stack above the user stack) becomes "span;user outer..inner;kernel
 * outer..inner" with kernel frames suffixed "_[k]" (flamegraph.pl colours
 * those as kernel). Samples outside any span are rooted at "[no span]",
 * but a thread pool's worker waiting for work (its innermost user frame
 * libgomp's or ggml's threadpool wait) at "[pool idle]": its spin is the
 * pool's cost, not work outside the spans.
 *
 * Counters: a span whose event carries ncounters == 0 while counters are on
 * had no valid delta (the thread changed CPU; see perfev.h) and is counted
 * as unmeasured, never averaged in as zero. */
#ifndef SPANTRACE_PROFILE_H
#define SPANTRACE_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <linux/types.h>
#include <json-c/json.h>

#include "analysis/folded.h"
#include "core/events.h"
#include "spantrace.h"
#include "analysis/symbols.h"

#define PROFILE_NO_SPAN "[no span]"
#define PROFILE_POOL_IDLE "[pool idle]"
#define PROFILE_KERNEL_SUFFIX "_[k]"
#define PROFILE_MAX_FRAMES 127   /* PERF_MAX_STACK_DEPTH's default */

struct profile_samples {
	struct folded *folded;
	struct symbolizer *sym;
	uint64_t samples;
	uint64_t no_span;        /* samples outside every span (pool_idle not among them) */
	uint64_t pool_idle;      /* outside every span, a pool's worker waiting for work */
	uint64_t no_user_stack;  /* stack id missing (e.g. -EFAULT, map full) */
};

int profile_samples_init(struct profile_samples *ps);   /* -1 on allocation failure */
void profile_samples_free(struct profile_samples *ps);

/* Adds count samples of pid. span NULL = outside every span. kips/uips are
 * innermost first; a zero address ends a stack early (stack map padding).
 * uips NULL counts a missing user stack. -1 on allocation failure. */
int profile_samples_add(struct profile_samples *ps, pid_t pid, const char *span,
			const __u64 *kips, size_t nk, const __u64 *uips, size_t nu,
			uint64_t count);

struct span_counter_totals {
	uint64_t spans;      /* spans seen */
	uint64_t measured;   /* spans with a valid counter delta */
	uint64_t sum[PERF_COUNTERS_MAX];
};

struct profile_counters {
	unsigned ncounters;
	const char *names[PERF_COUNTERS_MAX];  /* not owned */
	struct span_counter_totals kinds[SPAN_KINDS];
};

void profile_counters_init(struct profile_counters *pc, const char *const *names, unsigned n);
void profile_counters_add(struct profile_counters *pc, const struct span_event *ev);
/* profile_counters_add as a sink (spans); ctx is the struct profile_counters. */
extern const struct event_handlers profile_counters_handlers;
/* Table: one row per span kind seen, total and mean per counter. */
int profile_counters_write(const struct profile_counters *pc, FILE *out);
/* {"<span>":{"spans":N,"measured":N,"<counter>":{"total":N,"mean":X}}},
 * NULL on allocation failure. */
json_object *profile_counters_json(const struct profile_counters *pc);


#endif
