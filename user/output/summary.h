/* summary.h - the run-level JSON documents, built with json-c (they are
 * rare, and carry strings from the target that need escaping): record's
 * first ("session") and last ("summary") records, and the loss object that
 * every command's summary carries. */
#ifndef SPANTRACE_SUMMARY_H
#define SPANTRACE_SUMMARY_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>
#include "analysis/perfev.h"
#include "analysis/profile.h"
#include "analysis/runstats.h"
#include "core/launch.h"
#include "core/session.h"
#include "output/outbuf.h"

/* What the session record says about the run's setup. */
struct session_info {
	const struct launch *l;
	char *const *command;           /* -- CMD ARGS (NULL-terminated), or NULL */
	enum trace_level level;
	uint64_t start_mono_ns, start_wall_ns;
	uint64_t min_dur_ns;
	const struct perf_counters *perf; /* --perf: counter names; NULL: none */
};

json_object *summary_session_json(const struct session_info *si, const struct session *s);
/* Another engine's profile as attached: engine, path, build_id, attached
 * (how many functions), functions (their names) and missing (the names
 * the build lacks). */
json_object *summary_engine_json(const struct session *s);

/* The summary record: totals, per-name distributions, the kernel's own
 * counts (count_in_kernel), pools, error counters and loss. perf: the span
 * counter totals of record --perf, or NULL. */
json_object *summary_json(struct runstats *r, const struct session *s, const struct counters *c,
			  double wall_s, const char *stop_reason, const struct perf_counters *pc,
			  const struct profile_counters *perf);

/* fired, delivered, dropped, invalid (rejected by the decoder), balanced
 * (delivered + dropped == fired), by_type, and the span error counters. */
json_object *summary_loss_json(const struct session *s, const struct counters *c);

/* The perf counter names, in the order of the span records' "counters". */
json_object *summary_perf_names_json(const struct perf_counters *pc);

/* j as one plain line into ob (0, or -1 on a write error). */
int json_put_line(struct outbuf *ob, json_object *j);
/* j pretty-printed into path (created 0640, no symlink followed). */
int json_write_file(const char *path, json_object *j, char *err, size_t errlen);

#endif
