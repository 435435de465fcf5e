/* error.c - one-line error messages for library code. */
#include <stdarg.h>
#include <stdio.h>
#include "error.h"

int infer_fail(InferError *err, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return -1;
}
