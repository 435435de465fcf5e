/* report.c - `spantrace report RUN.jsonl|RUN.csv [-o DIR]`: the text report
 * and PNG plots of a recorded run. The analysis and the plots are
 * user/report/report.py (matplotlib: see docs/export.md, "Reports"); this command
 * finds it beside the binary, installed or in the build tree, and execs
 * Debian's python3 on it with the arguments as given (no shell). */
#include "commands/commands.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPORT_PYTHON "/usr/bin/python3"

/* Where report.py is, relative to the directory of the spantrace binary:
 * installed (PREFIX/bin -> PREFIX/share/spantrace) or built (build/). */
static const char *const script_paths[] = {
	"../share/spantrace/report.py",
	"../user/report/report.py",
};

static int find_script(char *out, size_t len)
{
	char exe[PATH_MAX];
	const char *dir;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return -1;
	exe[n] = 0;
	dir = dirname(exe);
	for (size_t i = 0; i < sizeof(script_paths) / sizeof(script_paths[0]); i++)
		if (snprintf(out, len, "%s/%s", dir, script_paths[i]) < (int)len && !access(out, R_OK))
			return 0;
	return -1;
}

int cmd_report(int argc, char **argv)
{
	char script[PATH_MAX];
	char **args = calloc((size_t)argc + 2, sizeof(*args));

	if (!args) {
		fprintf(stderr, "spantrace report: error: out of memory\n");
		return 1;
	}
	if (find_script(script, sizeof(script))) {
		fprintf(stderr, "spantrace report: error: report.py is not installed beside this binary "
				"(../share/spantrace/ or ../user/report/)\n");
		free(args);
		return 1;
	}
	args[0] = "python3";
	args[1] = script;
	for (int i = 1; i < argc; i++)
		args[i + 1] = argv[i];
	execv(REPORT_PYTHON, args);
	fprintf(stderr, "spantrace report: error: cannot run %s: %s (Debian: apt-get install python3 "
			"python3-matplotlib)\n", REPORT_PYTHON, strerror(errno));
	free(args);
	return 1;
}
