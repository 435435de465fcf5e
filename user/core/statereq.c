/* statereq.c - the state-dump request to a running engine (see statereq.h). */
#include "core/statereq.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/log.h"
#include "probes.h"

/* The mask of /proc/PID/status's SigBlk line (the main thread's). */
static int blocked_mask(pid_t pid, unsigned long long *mask)
{
	char path[64], line[256];
	FILE *f;
	int rc = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "SigBlk:", 7)) {
			char *end;
			*mask = strtoull(line + 7, &end, 16);
			rc = end == line + 7 ? -1 : 0;
			break;
		}
	fclose(f);
	return rc;
}

int state_request(pid_t pid)
{
	int sig = SIGRTMIN + INFER_STATE_SIGNAL_OFFSET;
	unsigned long long mask;

	if (blocked_mask(pid, &mask))
		return -1;
	if (!(mask >> (sig - 1) & 1)) {
		st_debug("pid %d does not wait for the state signal: no state dump", (int)pid);
		return 0;
	}
	if (kill(pid, sig))
		return -1;
	st_debug("asked pid %d for its state", (int)pid);
	return 1;
}
