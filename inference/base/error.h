/* error.h - how engine library code reports failure.
 *
 * Library functions never print or exit: they return -1 and fill an
 * InferError with one line naming the problem. The CLI prints it. */
#ifndef INFER_ERROR_H
#define INFER_ERROR_H

#include <stddef.h>

typedef struct {
	char msg[512];
} InferError;

/* Formats msg into err (if err is non-NULL) and returns -1. */
int infer_fail(InferError *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The same into a caller's buffer (parsers that report into err, errlen). */
int infer_failn(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Puts fmt's text and ": " before the message err holds (a callee's
 * failure, said where it happened); returns -1. */
int infer_prefix(InferError *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
