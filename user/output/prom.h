/* prom.h - the Prometheus text exposition (format 0.0.4) of the daemon's
 * metrics snapshot (output/metricset.h: the families are decided there, for
 * OTLP too). */
#ifndef SPANTRACE_PROM_H
#define SPANTRACE_PROM_H

#include <stddef.h>
#include <stdint.h>
#include "output/metricset.h"

/* Renders the snapshot's metric set as exposition text into a malloc'd,
 * NUL-terminated buffer (*out, *len). Returns 0, or -1 (errno ENOMEM) with
 * *out untouched. */
int prom_render(const struct metrics_snapshot *snap, char **out, size_t *len);

/* Escapes a label value per the exposition format (\\, \", \n) into dst.
 * Returns the length it needed (like snprintf). */
size_t prom_escape_label(char *dst, size_t dstlen, const char *value);

/* The `le` of hist.h bucket b in seconds: its largest value, in ns, / 1e9. */
double prom_bucket_le_seconds(unsigned b);


#endif
