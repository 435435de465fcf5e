/* main.c - `spantrace COMMAND [ARGS...]`: dispatches to the subcommands.
 * A new command is one line in `commands` plus its cmd_NAME(argc, argv). */
#include <stdio.h>
#include <string.h>
#include "commands/commands.h"
#include "core/options.h"
#include "analysis/profile.h"
#include "version.h"

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{ "record", cmd_record, "trace a process, a command or a binary to JSONL/CSV/metrics" },
	{ "list", cmd_list, "list the infer USDT probes of a binary or a process" },
	{ "top", cmd_top, "live view: span rates and latency percentiles of a traced engine" },
	{ "profile", cmd_profile, "CPU samples and perf counters per span: flame graph input, counter totals, Chrome trace" },
	{ "report", cmd_report, "text report and PNG plots of a recorded run (JSONL or CSV)" },
	{ "daemon", cmd_daemon, "always-on: Prometheus metrics and slow-span JSONL for every process of a binary" },
	{ "check", cmd_check, "which kernel features and privileges this machine has, and what each command needs" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: spantrace COMMAND [OPTIONS...]   (spantrace COMMAND --help for more;\n"
		   "       spantrace --version: the build)\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("spantrace %s\n", SPANTRACE_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name)) {
			int n = argc - 1;
			char **args = argv + 1;
			/* SPANTRACE_* variables become leading flags, so a flag wins. */
			if (env_options_merge(&n, &args))
				return 2;
			return commands[i].fn(n, args);
		}
	fprintf(stderr, "spantrace: error: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
