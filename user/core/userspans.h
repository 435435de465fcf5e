/* userspans.h - `--span`: spans of any program, named by the user. Each spec
 * gets a span kind (USER_SPAN_BASE + i, bpf/spantrace.h) that the BPF side
 * matches like the engine's own (bpf/userspans.bpf.c), and the name every
 * output prints for it (span_kind_name() asks user_span_name()).
 *
 *   uprobe:PATH:FUNCTION[:NAME]          FUNCTION's entry .. its return
 *   usdt:PATH:PROVIDER:BEGIN,END[:NAME]  probe BEGIN .. probe END
 *
 * NAME defaults to FUNCTION, or to BEGIN. One table per process: the
 * tracing commands parse their --span options into it; session_attach
 * (core/session_attach.c) attaches it. */
#ifndef SPANTRACE_USERSPANS_H
#define SPANTRACE_USERSPANS_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

struct argp_state;
struct launch_opts;

enum user_span_type { US_UPROBE, US_USDT };

struct user_span {
	enum user_span_type type;
	char name[32];                 /* 1..31 of [A-Za-z0-9_.-] */
	char path[PATH_MAX];
	char func[256];                /* uprobe: the function; usdt: the provider */
	char begin[128], end[128];     /* usdt probe names */
};

/* The i-th spec, NULL past the end. */
const struct user_span *user_span_get(size_t i);

/* --span SPEC in a command's argp parser: adds it (argp_error on a bad
 * one) and lets the target go without `infer` probes. */
void user_span_option(struct argp_state *state, const char *spec, struct launch_opts *target);

/* Adds one spec; -1 with a one-line reason for a malformed spec, a name
 * that is not [A-Za-z0-9_.-]{1,31}, a name used twice, or more than
 * USER_SPAN_MAX specs. */
int user_span_add(const char *spec, char *err, size_t errlen);
size_t user_span_count(void);
/* The span kind of the i-th spec (USER_SPAN_BASE + i). */
unsigned user_span_kind(size_t i);
const char *user_span_name(unsigned kind);
/* An engine span kind, or a user-defined one in the table. */
int span_kind_known(unsigned kind);
/* Forgets every spec (tests). */
void user_spans_reset(void);

#endif
