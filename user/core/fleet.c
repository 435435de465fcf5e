/* fleet.c - host mode's discovery of engines through /proc (see fleet.h). */
#include "core/fleet.h"
#include "core/proctree.h"


#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/engines.h"
#include "core/grow.h"
#include "core/stapsdt.h"

struct fleet_inode {
	dev_t dev;
	ino_t ino;
	int has_probes;          /* enum engine_id: which engine's file; 0: none */
};

struct fleet_seen {
	pid_t pid;
	uint64_t start_ticks;
	unsigned first_pass;     /* the pass that first scanned it */
	unsigned last_pass;      /* the last pass that found it in /proc */
	int engine;              /* maps a probe file */
};

struct fleet {
	const char *provider;
	struct fleet_inode *inodes;
	size_t ninodes, cap_inodes;
	struct fleet_seen *seen;
	size_t nseen, cap_seen;
	unsigned pass;
};

struct fleet *fleet_new(const char *provider)
{
	struct fleet *f = calloc(1, sizeof(*f));

	if (f)
		f->provider = provider;
	return f;
}

void fleet_free(struct fleet *f)
{
	if (!f)
		return;
	free(f->inodes);
	free(f->seen);
	free(f);
}

uint64_t fleet_start_ticks(pid_t pid)
{
	unsigned long long v = 0;
	const char *f;
	char buf[1024];

	/* field 22, the start time: the 20th after the name */
	if (!(f = proctree_stat_fields(pid, buf, sizeof(buf))) ||
	    sscanf(f, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &v) != 1)
		return 0;
	return v;
}

int fleet_proc_gone(const struct fleet_proc *p, const char *open_path)
{
	struct stat st;

	return fleet_start_ticks(p->pid) != p->start_ticks || stat(open_path, &st) != 0;
}

/* NSpid's last field: the pid in the innermost namespace. */
static pid_t ns_pid(pid_t pid)
{
	char path[64], line[256];
	pid_t v = pid;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(fp = fopen(path, "re")))
		return pid;
	while (fgets(line, sizeof(line), fp))
		if (!strncmp(line, "NSpid:", 6)) {
			char *s = line + 6, *end;
			long n;
			while ((n = strtol(s, &end, 10)), end != s) {
				v = (pid_t)n;
				s = end;
			}
			break;
		}
	fclose(fp);
	return v;
}

/* The cgroup v2 path; on a hybrid host whose v2 path is the root, the first
 * v1 hierarchy that places the process below its root ("memory:/x"). */
static void read_cgroup(pid_t pid, char *out, size_t len)
{
	char path[64], line[512], v2[256] = "", v1[256] = "";
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if ((fp = fopen(path, "re"))) {
		while (fgets(line, sizeof(line), fp)) {
			char *ctl = strchr(line, ':'), *cg = ctl ? strchr(ctl + 1, ':') : NULL;
			line[strcspn(line, "\n")] = 0;
			if (!cg)
				continue;
			if (!strncmp(line, "0::", 3))
				snprintf(v2, sizeof(v2), "%.255s", cg + 1);
			else if (!v1[0] && strcmp(cg + 1, "/"))
				snprintf(v1, sizeof(v1), "%.255s", ctl + 1);
		}
		fclose(fp);
	}
	snprintf(out, len, "%s", (!v2[0] || !strcmp(v2, "/")) && v1[0] ? v1 : v2);
}

int fleet_read_proc(pid_t pid, struct fleet_proc *p)
{
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	if (!(p->start_ticks = fleet_start_ticks(pid)))
		return -1;
	p->ns_pid = ns_pid(pid);
	read_cgroup(pid, p->cgroup, sizeof(p->cgroup));
	return 0;
}

/* Which engine a mapped file is: our probes (the provider), or llama.cpp
 * (libllama, or an executable that defines llama_decode); 0: neither. */
static int engine_of(const struct fleet *f, const char *open_path, const char *shown)
{
	const char *base = strrchr(shown, '/');

	base = base ? base + 1 : shown;
	if (sdt_count_provider(open_path, f->provider) > 0)
		return ENGINE_INFER;
	if ((!strncmp(base, "libllama.", 9) || !strstr(base, ".so")) && elf_has_function(open_path, "llama_decode"))
		return ENGINE_LLAMACPP;
	return 0;
}

/* The engine of the inode behind open_path (engine_of, read once per
 * inode); *is_new says this call classified it. -1 when out of memory. */
static int classify(struct fleet *f, const char *open_path, const char *shown, const struct stat *st, int *is_new)
{
	*is_new = 0;
	for (size_t i = 0; i < f->ninodes; i++)
		if (f->inodes[i].dev == st->st_dev && f->inodes[i].ino == st->st_ino)
			return f->inodes[i].has_probes;
	if (ARRAY_GROW(f->inodes, f->cap_inodes, f->ninodes))
		return -1;
	f->inodes[f->ninodes] = (struct fleet_inode){ st->st_dev, st->st_ino, engine_of(f, open_path, shown) };
	*is_new = 1;
	return f->inodes[f->ninodes++].has_probes;
}

/* Unclassifies the inode classify just appended, so that the next process
 * mapping it brings it to the callbacks again. */
static void forget_if_new(struct fleet *f, int is_new)
{
	if (is_new)
		f->ninodes--;
}

/* The probe file of a maps line, as an open-able path and as the process
 * names it; 0 when the line maps a file. */
static int line_file(pid_t pid, char *line, char *open_path, size_t olen, char *shown, size_t slen)
{
	unsigned long start, end;
	char *text = strchr(line, '/');
	ssize_t n;

	if (!text || sscanf(line, "%lx-%lx", &start, &end) != 2)
		return -1;
	text[strcspn(text, "\n")] = 0;
	snprintf(open_path, olen, "/proc/%d/map_files/%lx-%lx", (int)pid, start, end);
	n = readlink(open_path, shown, slen - 1);
	if (n <= 0)
		snprintf(shown, slen, "%s", text);
	else
		shown[n] = 0;
	/* opening map_files needs CAP_CHECKPOINT_RESTORE (or CAP_SYS_ADMIN), more
	 * than a least-privilege agent holds: then through /proc/PID/root */
	if (access(open_path, R_OK) && (size_t)snprintf(open_path, olen, "/proc/%d/root%s", (int)pid, text) >= olen)
		return -1;
	return 0;
}

/* Scans one process's mappings; 1 when it maps a probe file, -1 on
 * allocation failure. The callbacks run for a new inode and the engine. */
static int scan_pid(struct fleet *f, pid_t pid, const struct fleet_callbacks *cb, void *ctx)
{
	char maps[64], line[PATH_MAX + 256], open_path[PATH_MAX + 32], shown[PATH_MAX], last[PATH_MAX] = "";
	struct fleet_proc p;
	int engine = 0, is_new, has;
	struct stat st;
	FILE *fp;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	if (!(fp = fopen(maps, "re")))
		return 0;   /* gone, or a kernel thread */
	while (fgets(line, sizeof(line), fp)) {
		if (line_file(pid, line, open_path, sizeof(open_path), shown, sizeof(shown)) ||
		    !strcmp(shown, last) || stat(open_path, &st))
			continue;
		snprintf(last, sizeof(last), "%s", shown);
		if ((has = classify(f, open_path, shown, &st, &is_new)) <= 0) {
			if (has < 0)
				engine = -1;
			continue;
		}
		if (engine != 1 && fleet_read_proc(pid, &p)) {
			engine = 0;   /* it exited while we read its maps */
			forget_if_new(f, is_new);
			break;
		}
		if (engine != 1) {
			snprintf(p.path, sizeof(p.path), "%.*s", (int)sizeof(p.path) - 1, shown);
			p.dev = st.st_dev;
			p.ino = st.st_ino;
			p.engine = has;
		}
		if (is_new && cb->on_inode && cb->on_inode(ctx, open_path, &p) == FLEET_RETRY) {
			forget_if_new(f, is_new);
			continue;
		}
		engine = 1;
	}
	fclose(fp);
	if (engine == 1 && cb->on_engine)
		cb->on_engine(ctx, &p);
	return engine;
}

static struct fleet_seen *seen_find(struct fleet *f, pid_t pid)
{
	for (size_t i = 0; i < f->nseen; i++)
		if (f->seen[i].pid == pid)
			return &f->seen[i];
	return NULL;
}

/* A process not yet an engine is looked at again for a few passes: it may
 * be between exec and the loader mapping its libraries. */
#define YOUNG_PASSES 4

static int want_scan(const struct fleet *f, const struct fleet_seen *s, uint64_t start,
		     unsigned full_every)
{
	if (!s || s->start_ticks != start)
		return 1;
	if (full_every && f->pass % full_every == 0)
		return 1;
	return !s->engine && f->pass - s->first_pass < YOUNG_PASSES;
}

/* Looks at one /proc entry; -1 when out of memory. */
static int visit(struct fleet *f, pid_t pid, const struct fleet_callbacks *cb, void *ctx,
		 unsigned full_every)
{
	uint64_t start = fleet_start_ticks(pid);
	struct fleet_seen *s;
	int rc;

	if (!start)
		return 0;
	s = seen_find(f, pid);
	if (want_scan(f, s, start, full_every)) {
		if ((rc = scan_pid(f, pid, cb, ctx)) < 0)
			return -1;
		if (!s || s->start_ticks != start) {   /* new, or a reused pid */
			if (!s && ARRAY_GROW(f->seen, f->cap_seen, f->nseen))
				return -1;
			if (!s)
				s = &f->seen[f->nseen++];
			*s = (struct fleet_seen){ .pid = pid, .start_ticks = start, .first_pass = f->pass };
		}
		s->engine |= rc == 1;
	}
	s->last_pass = f->pass;
	return 0;
}

int fleet_scan(struct fleet *f, const struct fleet_callbacks *cb, void *ctx, unsigned full_every)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	size_t w = 0;

	if (!d)
		return -1;
	f->pass++;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || pid > INT_MAX)
			continue;
		if (visit(f, (pid_t)pid, cb, ctx, full_every)) {
			closedir(d);
			errno = ENOMEM;
			return -1;
		}
	}
	closedir(d);
	/* Forget the exited. */
	for (size_t i = 0; i < f->nseen; i++)
		if (f->seen[i].last_pass == f->pass)
			f->seen[w++] = f->seen[i];
	f->nseen = w;
	return 0;
}
