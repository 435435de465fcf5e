/* numparse.h - whole-string number parsing for flags, environment and config.
 *
 * One place for the rules every command follows: the whole string is the
 * number (no trailing junk), integers start with a digit (strtoull would
 * quietly wrap "-1" and accept " 1" or "+1"), reals are finite, and the
 * value is range-checked. Each returns 0, or -1 and leaves *out alone.
 */
#ifndef SPANTRACE_NUMPARSE_H
#define SPANTRACE_NUMPARSE_H

#include <stdint.h>

/* A decimal integer in [lo, hi]. */
int parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* A finite decimal real in [lo, hi]. */
int parse_real(const char *s, double lo, double hi, double *out);

/* A finite real strictly above lo and at most hi (durations: > 0). */
int parse_real_above(const char *s, double lo, double hi, double *out);

/* The longest --duration a command takes: a year, so that its nanoseconds
 * and any deadline built from them stay far inside 64 bits. */
#define DURATION_MAX_S (365.0 * 86400)

/* A byte count with an optional binary suffix: 512, 64K, 8M, 1GiB. */
int parse_size(const char *s, uint64_t *out);

#endif
