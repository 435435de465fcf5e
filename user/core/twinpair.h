/* twinpair.h - which HTTP request each of a group of identical prompts'
 * engine requests came on.
 *
 * Identical prompts pending at once (REQ_F_TWIN) cannot be told apart by
 * their tokens, so the kernel's link for each is a guess. What tells them
 * apart is what each socket saw: a response ends after its request's last
 * token, its first event follows its first token, and it carries about
 * one event a token (events - tokens is the server's framing, the same for
 * all its streams). The pairing of least cost over the whole group is
 * taken, not each request's nearest, so one late writer cannot take
 * another's socket and leave its own to a third. */
#ifndef SPANTRACE_TWINPAIR_H
#define SPANTRACE_TWINPAIR_H

#include <stddef.h>
#include <stdint.h>
#include "spantrace.h"

#define TWINPAIR_MAX 12      /* requests paired at once; more wait for the next round */
#define TWINPAIR_CANDS 64    /* http records they are paired from */
#define TWINPAIR_NONE UINT64_MAX

/* The cost of r having come on h, in ns of slack (plus 20 ms for each event
 * more or fewer than r's tokens and the framing; framing < 0: unknown), or
 * TWINPAIR_NONE when h cannot be r's. h must not be joined yet. */
uint64_t twinpair_cost(const struct request_event *r, const struct http_event *h, int framing);

/* out[i]: the index in hs of rs[i]'s http record, or -1; the pairing of
 * least total cost that pairs the most requests. n <= TWINPAIR_MAX, m <=
 * TWINPAIR_CANDS. */
void twinpair_solve(const struct request_event *const *rs, size_t n, const struct http_event *const *hs,
		    size_t m, int framing, long *out);

#endif
