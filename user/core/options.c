/* options.c - the shared options (see options.h). */
#include "core/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/events.h"
#include "core/log.h"
#include "core/numparse.h"

enum { KEY_LEVEL = 0x4c00, KEY_DURATION, KEY_MAX_EVENTS, KEY_CAPTURE_TOKENS };

#define COMMON_GROUP 20   /* after every command's own options in --help */

const char *trace_level_name(enum trace_level level)
{
	return level == LEVEL_COARSE ? "coarse" : "detail";
}

int trace_level_parse(const char *name, enum trace_level *out)
{
	if (!strcmp(name, "coarse"))
		*out = LEVEL_COARSE;
	else if (!strcmp(name, "detail"))
		*out = LEVEL_DETAIL;
	else
		return -1;
	return 0;
}

int duration_parse(const char *s, double *out)
{
	return parse_real_above(s, 0, DURATION_MAX_S, out);
}

int max_events_parse(const char *s, uint64_t *out)
{
	return parse_uint(s, 1, UINT64_MAX, out);
}

static error_t common_parse(int key, char *arg, struct argp_state *state)
{
	struct common_opts *o = state->input;

	switch (key) {
	case KEY_LEVEL:
		if (trace_level_parse(arg, &o->level))
			argp_error(state, "invalid level '%s' (coarse or detail)", arg);
		break;
	case KEY_DURATION:
		if (duration_parse(arg, &o->duration_s))
			argp_error(state, "invalid duration '%s' (seconds > 0)", arg);
		break;
	case KEY_MAX_EVENTS:
		if (max_events_parse(arg, &o->max_events))
			argp_error(state, "invalid --max-events '%s' (a whole number >= 1)", arg);
		break;
	case 'q': o->quiet = st_quiet = 1; break;
	case 'v': st_verbose++; break;
	case KEY_CAPTURE_TOKENS: o->capture_tokens = 1; break;
	case ARGP_KEY_END: {
		const char *env = getenv("SPANTRACE_CAPTURE_TOKENS");

		if (env && *env && strcmp(env, "0") && strcmp(env, "1"))
			argp_error(state, "SPANTRACE_CAPTURE_TOKENS must be 0 or 1, not '%s'", env);
		if (env && !strcmp(env, "1"))
			o->capture_tokens = 1;
		events_set_capture_tokens(o->capture_tokens);
		break;
	}
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

const struct argp *common_argp(unsigned mask, const struct common_opts *defaults)
{
	static char level_doc[384], max_doc[96];
	static struct argp_option opts[7];
	static struct argp child = { opts, common_parse, NULL, NULL, NULL, NULL, NULL };
	unsigned n = 0;

	snprintf(level_doc, sizeof(level_doc),
		 "coarse (requests, tokens, forward/layer spans, memory) or detail (every op and "
		 "OpenCL kernel, with its device time: the OpenCL engine then launches a kernel "
		 "per phase, 0.65-0.76x its untraced tok/s on the demo model, against ~0.97x at "
		 "coarse, where its forward stays one kernel); default %s",
		 trace_level_name(defaults->level));
	snprintf(max_doc, sizeof(max_doc), "At most N events in the Chrome trace (default %llu)",
		 (unsigned long long)defaults->max_events);
	if (mask & COMMON_LEVEL)
		opts[n++] = (struct argp_option){ "level", KEY_LEVEL, "LEVEL", 0, level_doc, COMMON_GROUP };
	if (mask & COMMON_DURATION)
		opts[n++] = (struct argp_option){ "duration", KEY_DURATION, "SEC", 0, "Stop after SEC seconds",
						  COMMON_GROUP };
	if (mask & COMMON_MAX_EVENTS)
		opts[n++] = (struct argp_option){ "max-events", KEY_MAX_EVENTS, "N", 0, max_doc, COMMON_GROUP };
	if (mask & COMMON_QUIET)
		opts[n++] = (struct argp_option){ "quiet", 'q', NULL, 0, "No status or summary lines on stderr",
						  COMMON_GROUP };
	if (mask & COMMON_VERBOSE)
		opts[n++] = (struct argp_option){ "verbose", 'v', NULL, 0, "More logging (twice: libbpf debug)",
						  COMMON_GROUP };
	opts[n++] = (struct argp_option){ "capture-tokens", KEY_CAPTURE_TOKENS, NULL, 0,
					  "Write token ids (what users were told) into the outputs; without it "
					  "no output holds one (SPANTRACE_CAPTURE_TOKENS=1 too)", COMMON_GROUP };
	opts[n] = (struct argp_option){ 0 };
	return &child;
}

/* ---- SPANTRACE_* variables for record and top ---- */

static int env_level_ok(const char *s)
{
	enum trace_level l;
	return !trace_level_parse(s, &l);
}

static int env_secs_ok(const char *s)
{
	double d;
	return !parse_real(s, 0.1, 3600, &d);
}

static int env_path_ok(const char *s)
{
	return *s != 0;
}

struct env_option {
	const char *var;
	const char *command;   /* record or top */
	const char *flag;
	int (*ok)(const char *value);
	const char *expect;
};

/* docs/export.md's "Environment" table is this table. */
static const struct env_option env_options[] = {
	{ "SPANTRACE_OUTPUT", "record", "--output", env_path_ok, "a path" },
	{ "SPANTRACE_CSV", "record", "--csv", env_path_ok, "a path" },
	{ "SPANTRACE_SUMMARY", "record", "--summary", env_path_ok, "a path" },
	{ "SPANTRACE_METRICS", "record", "--metrics", env_path_ok, "a path" },
	{ "SPANTRACE_CHROME", "record", "--chrome", env_path_ok, "a path" },
	{ "SPANTRACE_LEVEL", "record", "--level", env_level_ok, "coarse or detail" },
	{ "SPANTRACE_OTLP_ENDPOINT", "record", "--otlp", env_path_ok, "a URL" },
	{ "SPANTRACE_LEVEL", "top", "--level", env_level_ok, "coarse or detail" },
	{ "SPANTRACE_INTERVAL_SECS", "top", "--delay", env_secs_ok, "seconds, 0.1..3600" },
	{ "SPANTRACE_CMD_OUTPUT", "top", "--cmd-output", env_path_ok, "a path" },
};

#define N_ENV_OPTIONS (sizeof(env_options) / sizeof(env_options[0]))

/* "--flag=value" for entry e, or NULL (message printed). */
static char *env_option_arg(const struct env_option *e, const char *value)
{
	char *arg;

	if (!e->ok(value)) {
		fprintf(stderr, "spantrace %s: error: %s='%s' is not valid (%s)\n", e->command, e->var,
			value, e->expect);
		return NULL;
	}
	if (asprintf(&arg, "%s=%s", e->flag, value) < 0) {
		fprintf(stderr, "spantrace: error: out of memory\n");
		return NULL;
	}
	return arg;
}

int env_options_merge(int *argc, char ***argv)
{
	static char **merged;   /* lives until exit: options point into it */
	const char *value;
	int n = 0;

	if (!(merged = calloc((size_t)*argc + N_ENV_OPTIONS + 1, sizeof(*merged)))) {
		fprintf(stderr, "spantrace: error: out of memory\n");
		return -1;
	}
	merged[n++] = (*argv)[0];
	for (size_t i = 0; i < N_ENV_OPTIONS; i++) {
		if (strcmp(env_options[i].command, (*argv)[0]) || !(value = getenv(env_options[i].var)))
			continue;
		if (!(merged[n] = env_option_arg(&env_options[i], value)))
			return -1;
		n++;
	}
	for (int i = 1; i < *argc; i++)
		merged[n++] = (*argv)[i];
	*argc = n;
	*argv = merged;
	return 0;
}
