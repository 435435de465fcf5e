/* folded.h - span-attributed CPU samples as folded stacks, plus a per-span
 * table of the functions the samples landed in.
 *
 * A folded line is "span;outermost;...;innermost COUNT": the span the
 * sampled thread was inside is the root, then the stack from the outermost
 * frame in. flamegraph.pl and speedscope read this format. Frame and span
 * names have ';' replaced by ':' and line breaks by spaces, since ';' and
 * '\n' are the format's separators (the count is after the last space, so
 * spaces inside names are fine). */
#ifndef SPANTRACE_FOLDED_H
#define SPANTRACE_FOLDED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct folded;

struct folded *folded_new(void);   /* NULL on allocation failure */
void folded_free(struct folded *fd);

/* Adds count samples of one stack. frames[0] is the innermost frame (the
 * order stack maps return); nframes may be 0. -1 on allocation failure. */
int folded_add(struct folded *fd, const char *span, const char *const *frames,
	       size_t nframes, uint64_t count);

uint64_t folded_total(const struct folded *fd);
size_t folded_stacks(const struct folded *fd);   /* distinct lines */

/* All lines, sorted bytewise. -1 on a write error. */
int folded_write(const struct folded *fd, FILE *out);

/* The functions samples of one span ended in (self samples of the innermost
 * frame, "[unknown]" for empty stacks), most first, ties by name. */
struct folded_top_entry {
	char *function;     /* owned by the caller's array; folded_top_free */
	uint64_t self;
	double share;       /* percent of the span's samples */
};

/* Fills up to max entries; returns how many, or -1 on allocation failure.
 * *span_total gets the span's sample count. */
int folded_top(const struct folded *fd, const char *span, struct folded_top_entry *out, size_t max,
	       uint64_t *span_total);
void folded_top_free(struct folded_top_entry *top, size_t n);

/* The table for every span, spans by sample count, top_n functions each. */
int folded_write_top(const struct folded *fd, FILE *out, size_t top_n);

#endif
