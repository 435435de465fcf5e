/* runstats.h - what a whole run adds up to, for record's summary: span,
 * kernel, token and request durations (exact nearest-rank up to a cap per
 * name, the one histogram past it), device busy time, mismatched ends and
 * the token time span. Fed as a sink. */
#ifndef SPANTRACE_RUNSTATS_H
#define SPANTRACE_RUNSTATS_H

#include <stdint.h>
#include "analysis/stats.h"
#include "core/events.h"

/* Service-level objectives a request meets or not (goodput); 0 = none. */
struct slo {
	uint64_t ttft_ns;        /* time to first token at most this */
	uint64_t itl_ns;         /* mean inter-token gap (TPOT) at most this */
};

struct runstats {
	struct dist spans[SPAN_KINDS];          /* host clock */
	struct dist device[SPAN_KIND_COUNT];    /* device clock: spans' joined device_ns */
	uint64_t device_lost[SPAN_KIND_COUNT];  /* spans whose kernel records were lost */
	struct dist kernels[KERNEL_COUNT];
	struct dist tokens, requests;
	/* request level: from request, emit and step records */
	struct dist ttft, itl, queue, prefill, decode;
	struct dist steps, step_tokens;
	/* --http: requests from the socket (arrival to first event or byte, to end) */
	struct dist http_ttft, http_e2e;
	uint64_t http_events, http_streams;
	/* engine requests by their join with the socket (core/reqjoin.h):
	 * joined, not (from the engine alone), and why not where known */
	uint64_t req_joined, req_engine_only, req_twins_unlinked, req_crossed;
	/* http: the session times HTTP. A served request not joined with its
	 * socket then stays out of ttft and requests (the headline: the
	 * socket's figures only); its engine times go here, beside them */
	int http;
	struct dist unjoined_ttft, unjoined_e2e;
	uint64_t headline_from_engine;   /* headline requests timed by the engine (not over HTTP) */
	struct slo slo;
	uint64_t slo_met;        /* requests that met every SLO set */
	uint64_t preemptions;
	uint64_t prefix_hits, prefix_cached_tokens; /* prefix_hit probe records */
	uint64_t device_busy_ns;      /* summed kernel device time */
	uint64_t mismatched;          /* spans closed by a mismatched end */
	uint64_t first_span_ns;       /* the engine at work: first span begin .. */
	uint64_t last_span_end_ns;    /* .. last span end (device utilisation's wall) */
	uint64_t first_token_ns;      /* begin of the first token */
	uint64_t last_token_end_ns;
	/* emitted tokens: a serving engine's (ours, llama.cpp) fire no token span */
	uint64_t emits, first_emit_ns, last_emit_ns;
};

/* span, token, request, kernel, emit, step and probe; ctx is the struct runstats. */
extern const struct event_handlers runstats_handlers;

int runstats_init(struct runstats *r, const struct slo *slo);   /* -1 on allocation failure */
void runstats_free(struct runstats *r);
uint64_t runstats_spans(const struct runstats *r);
/* Tokens over first token begin .. last token end: the engine's tok/s. */
/* Generated tokens as top counts them: token spans where the engine fires
 * them (a one-shot run), else emitted tokens (a serving engine); the rate
 * over first token .. last. runstats_tokens_from says which: "token",
 * "emit" or "none". */
uint64_t runstats_tokens_generated(const struct runstats *r);
double runstats_tokens_per_s(const struct runstats *r);
const char *runstats_tokens_from(const struct runstats *r);
/* The one definition: summed kernel device time over the host wall from the
 * first engine span's begin to the last one's end (0 without both). */
double runstats_device_utilization(const struct runstats *r);

#endif
