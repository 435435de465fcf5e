/* log.h - the tracer's messages on stderr: "spantrace: [error: |warning: |debug: ]...".
 * -v raises st_verbose (debug lines; twice: libbpf's debug too); -q sets
 * st_quiet (no info lines; errors and warnings always show). */
#ifndef SPANTRACE_LOG_H
#define SPANTRACE_LOG_H

extern int st_verbose;
extern int st_quiet;

void st_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void st_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void st_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void st_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
