/* options.h - the options the tracing commands share, defined once:
 *
 *   --level LEVEL    coarse or detail
 *   --duration SEC   stop after SEC seconds
 *   -q, --quiet      no status or summary lines on stderr
 *   -v, --verbose    debug messages (twice: libbpf's too)
 *   --max-events N   at most N events in the Chrome trace
 *
 * record, top and profile take them as an argp child that fills a struct
 * common_opts; the daemon, which also reads SPANTRACE_* variables, parses
 * the same values with the same functions. */
#ifndef SPANTRACE_OPTIONS_H
#define SPANTRACE_OPTIONS_H

#include <argp.h>
#include <stdint.h>
#include "spantrace.h"

enum common_option {
	COMMON_LEVEL = 1 << 0,
	COMMON_DURATION = 1 << 1,
	COMMON_QUIET = 1 << 2,
	COMMON_VERBOSE = 1 << 3,
	COMMON_MAX_EVENTS = 1 << 4,
	COMMON_ALL = (1 << 5) - 1,
};

struct common_opts {
	enum trace_level level;
	double duration_s;       /* 0: until the target exits, or a signal */
	int quiet;
	uint64_t max_events;     /* 0: the command's default */
	int capture_tokens;      /* --capture-tokens or SPANTRACE_CAPTURE_TOKENS=1 */
};

/* The argp child for the options in mask (enum common_option bits), whose
 * help shows the defaults in *defaults. The parent hands it its struct
 * common_opts in ARGP_KEY_INIT (state->child_inputs[i]). One per process. */
const struct argp *common_argp(unsigned mask, const struct common_opts *defaults);

/* SPANTRACE_* mirrors of record's and top's flags (the table in options.c,
 * and docs/export.md's): for the command argv[0], each variable that is set becomes
 * "--flag=VALUE" placed before the command line's own arguments, so a flag
 * given on the command line, parsed later, wins. Called once, by main, for
 * every command. 0 and a new argc and argv (which live until exit), or -1
 * with a message on stderr naming the variable of a bad value. */
int env_options_merge(int *argc, char ***argv);

/* "coarse" / "detail", as in --level and the session record. */
const char *trace_level_name(enum trace_level level);

/* Each returns 0 and sets *out, or -1 for text that is not a valid value. */
int trace_level_parse(const char *name, enum trace_level *out);
int duration_parse(const char *s, double *out);     /* seconds > 0, at most a year */
int max_events_parse(const char *s, uint64_t *out); /* a whole number >= 1 */

#endif
