/* proctree.c - processes by their relations, from /proc (proctree.h). */
#include "core/proctree.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/grow.h"

/* A /proc entry that names a process: its pid, else 0. */
static pid_t entry_pid(const struct dirent *de)
{
	char *end;
	long pid = strtol(de->d_name, &end, 10);

	return *end || pid <= 0 || pid > INT_MAX ? 0 : (pid_t)pid;
}

const char *proctree_stat_fields(pid_t pid, char *buf, size_t len)
{
	char path[64], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (len < 2 || !(f = fopen(path, "re")))
		return NULL;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	/* the name (field 2) may hold spaces and ')': the last ')' ends it */
	return (p = strrchr(buf, ')')) && p[1] == ' ' ? p + 2 : NULL;
}

/* cb(ctx, pid) for every process in /proc; 0, or -1 (errno) from cb or
 * /proc. */
static int each_pid(int (*cb)(void *ctx, pid_t pid), void *ctx)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t pid;
	int rc = 0;

	if (!d)
		return -1;
	while (!rc && (de = readdir(d)))
		if ((pid = entry_pid(de)))
			rc = cb(ctx, pid);
	closedir(d);
	return rc;
}

struct pair { pid_t pid, ppid; };

struct pairs {
	struct pair *v;
	size_t n, cap;
};

/* One process and its parent (field 4 of its stat) into the list. */
static int add_pair(void *ctx, pid_t pid)
{
	struct pairs *ps = ctx;
	const char *f;
	char buf[512];
	int ppid = 0;

	if (ARRAY_GROW(ps->v, ps->cap, ps->n)) {
		errno = ENOMEM;
		return -1;
	}
	if ((f = proctree_stat_fields(pid, buf, sizeof(buf))) && sscanf(f, "%*c %d", &ppid) != 1)
		ppid = 0;
	ps->v[ps->n++] = (struct pair){ pid, (pid_t)ppid };
	return 0;
}

/* Every process and its parent; their count, or -1. */
static int read_pairs(struct pair **out)
{
	struct pairs ps = { 0 };

	if (each_pid(add_pair, &ps)) {
		free(ps.v);
		return -1;
	}
	*out = ps.v;
	return (int)ps.n;
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

struct exe_match {
	const struct stat *st;
	void (*cb)(void *ctx, pid_t pid);
	void *ctx;
};

static int match_exe(void *ctx, pid_t pid)
{
	struct exe_match *m = ctx;
	char path[64];
	struct stat x;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (!stat(path, &x) && x.st_dev == m->st->st_dev && x.st_ino == m->st->st_ino)
		m->cb(m->ctx, pid);
	return 0;
}

int proctree_each_exe(const struct stat *st, void (*cb)(void *ctx, pid_t pid), void *ctx)
{
	struct exe_match m = { st, cb, ctx };

	return each_pid(match_exe, &m);
}
