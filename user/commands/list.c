/* list.c - `spantrace list [-p PID | PATH]`: the infer probes, like
 * `perf list sdt`, read from the .note.stapsdt notes with libelf. */
#include "commands/commands.h"

#include <argp.h>
#include <stdio.h>
#include <string.h>
#include "spantrace/probes.h"
#include "core/session.h"
#include "core/stapsdt.h"
#include "core/target.h"

struct list_opts {
	pid_t pid;
	const char *path;
	int all;
};

static const char list_doc[] =
	"List the `infer` USDT probes of a binary (or the library it needs) or of a running process:\n"
	"provider:name, address, semaphore, argument spec."
	"\v"
	"EXAMPLES:\n"
	"  spantrace list build/infer          probes of the engine (found in libinfer.so)\n"
	"  spantrace list -p 1234              probes of a running engine\n"
	"  spantrace list --all build/libinfer.so   every provider, not just infer";

static const struct argp_option list_options[] = {
	{ "pid", 'p', "PID", 0, "List the probes of this running process", 0 },
	{ "all", 'a', NULL, 0, "Every provider, not only infer", 0 },
	{ 0 },
};

static error_t list_parse(int key, char *arg, struct argp_state *state)
{
	struct list_opts *o = state->input;

	switch (key) {
	case 'p':
		if ((o->pid = parse_pid(arg)) < 0)
			argp_error(state, "invalid pid '%s'", arg);
		break;
	case 'a': o->all = 1; break;
	case ARGP_KEY_ARG:
		if (o->path)
			argp_error(state, "one PATH only");
		o->path = arg;
		break;
	case ARGP_KEY_END:
		if ((o->pid > 0) == !!o->path)
			argp_error(state, "give -p PID or PATH");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int cmd_list(int argc, char **argv)
{
	static const struct argp argp = { list_options, list_parse, "[-p PID | PATH]", list_doc,
					  NULL, NULL, NULL };
	struct list_opts o = { 0 };
	struct target t;
	struct sdt_list l;
	char err[512];
	size_t shown = 0;

	if (argp_parse(&argp, argc, argv, 0, NULL, &o))
		return 2;
	if (o.pid > 0 ? target_from_pid(o.pid, &t, err, sizeof(err))
		      : target_from_program(o.path, 0, &t, err, sizeof(err))) {
		st_err("%s", err);
		return 1;
	}
	if (sdt_read(t.elf, &l, err, sizeof(err))) {
		st_err("%s", err);
		return 1;
	}
	printf("# %s build-id %s\n", t.shown, l.build_id[0] ? l.build_id : "none");
	printf("%-24s %-18s %-18s %s\n", "PROBE", "ADDRESS", "SEMAPHORE", "ARGUMENTS");
	for (size_t i = 0; i < l.n; i++) {
		const struct sdt_probe *p = &l.probes[i];
		char name[160];

		if (!o.all && strcmp(p->provider, INFER_PROVIDER))
			continue;
		snprintf(name, sizeof(name), "%s:%s", p->provider, p->name);
		printf("%-24s 0x%016llx 0x%016llx %s\n", name, (unsigned long long)p->pc,
		       (unsigned long long)p->semaphore, p->args);
		shown++;
	}
	sdt_free(&l);
	return shown ? 0 : 1;
}
