/* proctree.c - processes by their relations, from /proc (proctree.h). */
#include "core/proctree.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A /proc entry that names a process: its pid, else 0. */
static pid_t entry_pid(const struct dirent *de)
{
	char *end;
	long pid = strtol(de->d_name, &end, 10);

	return *end || pid <= 0 || pid > INT_MAX ? 0 : (pid_t)pid;
}

/* pid's parent, from /proc/PID/stat (after the command's last ')'). */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512], *p;
	int ppid = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	if (!(p = strrchr(buf, ')')) || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return 0;
	return (pid_t)ppid;
}

struct pair { pid_t pid, ppid; };

/* Every process and its parent; their count, or -1. */
static int read_pairs(struct pair **out)
{
	DIR *d = opendir("/proc");
	struct pair *v = NULL, *nv;
	struct dirent *de;
	size_t n = 0, cap = 0;
	pid_t pid;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (!(pid = entry_pid(de)))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			if (!(nv = realloc(v, cap * sizeof(*v)))) {
				free(v);
				closedir(d);
				errno = ENOMEM;
				return -1;
			}
			v = nv;
		}
		v[n].pid = pid;
		v[n++].ppid = parent_of(pid);
	}
	closedir(d);
	*out = v;
	return (int)n;
}

int proctree_descendants(pid_t root, pid_t *out, int max)
{
	struct pair *v = NULL;
	int n = read_pairs(&v), found = 0;

	if (n < 0)
		return -1;
	/* breadth first: out[] is the queue of parents still to look under */
	for (int head = -1; head < found; head++) {
		pid_t parent = head < 0 ? root : out[head];

		for (int i = 0; i < n && found < max; i++)
			if (v[i].ppid == parent && v[i].pid != root)
				out[found++] = v[i].pid;
	}
	free(v);
	return found;
}

int proctree_each_exe(const struct stat *st, void (*cb)(void *ctx, pid_t pid), void *ctx)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	char path[64];
	struct stat x;
	pid_t pid;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (!(pid = entry_pid(de)))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
		if (!stat(path, &x) && x.st_dev == st->st_dev && x.st_ino == st->st_ino)
			cb(ctx, pid);
	}
	closedir(d);
	return 0;
}
