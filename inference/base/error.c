/* error.c - one-line error messages for library code. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "base/error.h"

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

int infer_failn(char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

int infer_prefix(InferError *err, const char *fmt, ...)
{
	if (err) {
		char why[sizeof(err->msg)];
		size_t cap = sizeof(err->msg), n, len = strlen(err->msg);
		va_list ap;
		int w;

		memcpy(why, err->msg, len + 1);
		va_start(ap, fmt);
		w = vsnprintf(err->msg, cap, fmt, ap);
		va_end(ap);
		n = w < 0 ? 0 : (size_t)w < cap ? (size_t)w : cap - 1;
		if (n + 2 < cap) {   /* ": " then as much of the message as fits */
			memcpy(err->msg + n, ": ", 2);
			n += 2;
			if (len > cap - 1 - n)
				len = cap - 1 - n;
			memcpy(err->msg + n, why, len);
			err->msg[n + len] = '\0';
		}
	}
	return -1;
}
