/* log.c - messages on stderr (see log.h). */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

int st_verbose;
int st_quiet;

static void vlog(const char *prefix, const char *fmt, va_list ap)
{
	fprintf(stderr, "spantrace: %s", prefix);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void st_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("error: ", fmt, ap);
	va_end(ap);
}

void st_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("warning: ", fmt, ap);
	va_end(ap);
}

void st_info(const char *fmt, ...)
{
	va_list ap;

	if (st_quiet)
		return;
	va_start(ap, fmt);
	vlog("", fmt, ap);
	va_end(ap);
}

void st_debug(const char *fmt, ...)
{
	va_list ap;

	if (!st_verbose)
		return;
	va_start(ap, fmt);
	vlog("debug: ", fmt, ap);
	va_end(ap);
}
