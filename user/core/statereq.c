/* statereq.c - the state-dump request to a running engine (see statereq.h). */
#include "core/statereq.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/fleet.h"
#include "core/log.h"
#include "spantrace/probes.h"

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

const char *state_request_error(int err)
{
	static char buf[160];

	snprintf(buf, sizeof(buf), "%s%s", strerror(err),
		 err == EPERM ? " (another user's process: signalling it needs CAP_KILL)" : "");
	return buf;
}

struct binary_req {
	struct stat st;
	int asked;
};

static void ask_if_same(void *ctx, const struct fleet_proc *p)
{
	struct binary_req *b = ctx;

	if (p->dev == b->st.st_dev && p->ino == b->st.st_ino && state_request(p->pid) == 1)
		b->asked++;
}

int state_request_binary(const char *elf)
{
	static const struct fleet_callbacks cb = { NULL, ask_if_same };
	struct binary_req b = { .asked = 0 };
	struct fleet *f;
	int rc;

	if (!elf[0])   /* no engine file (--opencl or --span alone): nobody to ask */
		return 0;
	if (stat(elf, &b.st) || !(f = fleet_new(INFER_PROVIDER)))
		return -1;
	rc = fleet_scan(f, &cb, &b, 0);
	fleet_free(f);
	return rc ? -1 : b.asked;
}
