/* numparse.c - see numparse.h. */
#include "core/numparse.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int starts_with_digit(const char *s)
{
	return s && *s >= '0' && *s <= '9';
}

/* Digits only, as far as they go; *end is left after them. */
static int leading_uint(const char *s, unsigned long long *v, char **end)
{
	if (!starts_with_digit(s))
		return -1;
	errno = 0;
	*v = strtoull(s, end, 10);
	return errno ? -1 : 0;
}

int parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	unsigned long long v;
	char *end;
	if (leading_uint(s, &v, &end) || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int parse_finite(const char *s, double *out)
{
	char *end;
	/* strtod would also take leading space, "+", "inf", "nan" and hex. */
	if (!s || !(starts_with_digit(s) || *s == '-' || *s == '.') || strpbrk(s, "xX"))
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

int parse_real(const char *s, double lo, double hi, double *out)
{
	double v;
	if (parse_finite(s, &v) || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int parse_real_above(const char *s, double lo, double hi, double *out)
{
	double v;
	if (parse_finite(s, &v) || !(v > lo) || v > hi)
		return -1;
	*out = v;
	return 0;
}

int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	unsigned shift = 0;
	if (leading_uint(s, &v, &end))
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (shift && *end == 'i')
		end++;
	if (*end == 'B')
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}
