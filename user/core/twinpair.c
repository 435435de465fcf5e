/* twinpair.c - see twinpair.h. An exact assignment by dynamic programming
 * over the subsets of requests: m * 2^n * n steps, 3 M at the largest. */
#include <stdlib.h>
#include <string.h>
#include "twinpair.h"
#include "events.h"

#define EVENT_COST_NS 20000000ull   /* an event more or fewer than the tokens: 20 ms of slack */
#define UNPAIRED_COST (1ull << 60)  /* above any pairing's: pair the most requests first */

uint64_t twinpair_cost(const struct request_event *r, const struct http_event *h, int framing)
{
	uint64_t end = r->h.ts_ns + r->dur_ns, first = r->ttft_ns ? r->h.ts_ns + r->ttft_ns : 0;
	uint64_t hfirst = http_first_token_ns(h), cost;
	int64_t off;

	if (h->h.pid != r->h.pid || h->start_ns > request_engine_had_ns(r) || h->end_ns < end)
		return TWINPAIR_NONE;   /* not open while the engine had it, or ended before it did */
	if (request_token_before_engine(r, h))
		return TWINPAIR_NONE;
	cost = h->end_ns - end + (first && hfirst ? hfirst - first : 0);
	if (framing >= 0) {
		off = (int64_t)h->events - (int64_t)r->generated_tokens - framing;
		cost += (uint64_t)(off < 0 ? -off : off) * EVENT_COST_NS;
	}
	return cost;
}

/* dp over candidates 0..c-1: best[mask], the least cost pairing exactly
 * the requests in mask; from[c][mask], the request candidate c took to
 * reach it (-1: none). */
struct solve {
	size_t n, m;
	uint64_t cost[TWINPAIR_MAX][TWINPAIR_CANDS];
	uint64_t *best, *next;
	signed char *from;   /* (m + 1) x 2^n */
};

static void solve_step(struct solve *s, size_t c)
{
	size_t full = (size_t)1 << s->n;
	signed char *from = s->from + (c + 1) * full;
	uint64_t *t;

	for (size_t mask = 0; mask < full; mask++) {
		s->next[mask] = s->best[mask];
		from[mask] = -1;
	}
	for (size_t mask = 0; mask < full; mask++) {
		if (s->best[mask] == TWINPAIR_NONE)
			continue;
		for (size_t i = 0; i < s->n; i++) {
			size_t to = mask | ((size_t)1 << i);

			if (to == mask || s->cost[i][c] == TWINPAIR_NONE || s->best[mask] + s->cost[i][c] >= s->next[to])
				continue;
			s->next[to] = s->best[mask] + s->cost[i][c];
			from[to] = (signed char)i;
		}
	}
	t = s->best;
	s->best = s->next;
	s->next = t;
}

/* The mask of least cost, the unpaired counted as UNPAIRED_COST each. */
static size_t best_mask(const struct solve *s)
{
	size_t full = (size_t)1 << s->n, pick = 0;
	uint64_t least = UINT64_MAX;

	for (size_t mask = 0; mask < full; mask++) {
		uint64_t c;

		if (s->best[mask] == TWINPAIR_NONE)
			continue;
		c = s->best[mask] + (uint64_t)(s->n - (size_t)__builtin_popcountl(mask)) * UNPAIRED_COST;
		if (c < least) {
			least = c;
			pick = mask;
		}
	}
	return pick;
}

void twinpair_solve(const struct request_event *const *rs, size_t n, const struct http_event *const *hs,
		    size_t m, int framing, long *out)
{
	struct solve *s = calloc(1, sizeof(*s));
	size_t full = (size_t)1 << (n < TWINPAIR_MAX ? n : TWINPAIR_MAX), mask;

	for (size_t i = 0; i < n; i++)
		out[i] = -1;
	if (!s || n > TWINPAIR_MAX || m > TWINPAIR_CANDS || !(s->best = malloc(full * sizeof(*s->best))) ||
	    !(s->next = malloc(full * sizeof(*s->next))) || !(s->from = malloc((m + 1) * full)))
		goto out;
	s->n = n;
	s->m = m;
	for (size_t i = 0; i < n; i++)
		for (size_t c = 0; c < m; c++)
			s->cost[i][c] = twinpair_cost(rs[i], hs[c], framing);
	for (mask = 0; mask < full; mask++)
		s->best[mask] = mask ? TWINPAIR_NONE : 0;
	for (size_t c = 0; c < m; c++)
		solve_step(s, c);
	/* back from the last candidate: each one that took a request */
	mask = best_mask(s);
	for (size_t c = m; c > 0 && mask; c--) {
		signed char i = s->from[c * full + mask];

		if (i >= 0) {
			out[(size_t)i] = (long)(c - 1);
			mask &= ~((size_t)1 << i);
		}
	}
out:
	if (s) {
		free(s->best);
		free(s->next);
		free(s->from);
	}
	free(s);
}
