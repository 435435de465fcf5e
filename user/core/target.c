/* target.c - finds the probe ELF of a pid, a command or a binary. */
#include "core/target.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "spantrace/probes.h"
#include "core/numparse.h"
#include "core/stapsdt.h"

pid_t parse_pid(const char *s)
{
	uint64_t v;
	return parse_uint(s, 1, 0x3fffffff, &v) ? -1 : (pid_t)v;
}

static void fill_build_id(struct target *t)
{
	struct sdt_list l;
	char err[256];

	t->build_id[0] = 0;
	if (sdt_read(t->elf, &l, err, sizeof(err)) == 0) {
		snprintf(t->build_id, sizeof(t->build_id), "%s", l.build_id);
		sdt_free(&l);
	}
}

/* Next file-backed path in a /proc/PID/maps line, or NULL; *deleted says
 * the file was unlinked or replaced since it was mapped. */
static const char *maps_path(char *line, int *deleted)
{
	char *p = strchr(line, '/');
	size_t n;

	if (!p)
		return NULL;
	n = strlen(p);
	if (n && p[n - 1] == '\n')
		p[--n] = 0;
	*deleted = n > 10 && !strcmp(p + n - 10, " (deleted)");
	return p;
}

/* The file mapped at a maps line's range, via /proc/PID/map_files: the
 * kernel escapes newlines in maps text (as \012), so the text is not always a
 * usable path, and a deleted or replaced file has no path at all; the
 * map_files link reaches the mapped inode either way, and the kernel follows
 * it when attaching uprobes. elf gets a path to open, shown the real name.
 * Falls back to /proc/PID/root + the text where map_files is not readable
 * (never for a deleted file: that path names another inode, or none). */
static int mapped_file(pid_t pid, char *line, char *elf, size_t elflen, char *shown,
		       size_t shownlen)
{
	unsigned long start, end;
	int deleted = 0;
	const char *text = maps_path(line, &deleted);
	ssize_t n;

	if (!text || sscanf(line, "%lx-%lx", &start, &end) != 2)
		return -1;
	snprintf(elf, elflen, "/proc/%d/map_files/%lx-%lx", (int)pid, start, end);
	n = readlink(elf, shown, shownlen - 1);
	if (n > 0) {
		shown[n] = 0;
		/* opening map_files needs CAP_CHECKPOINT_RESTORE (or CAP_SYS_ADMIN),
		 * more than CAP_SYS_PTRACE: without it, the path through /proc/PID/root */
		if (!access(elf, R_OK))
			return 0;
	}
	/* The target may live in another mount namespace. */
	if (deleted || (size_t)snprintf(elf, elflen, "/proc/%d/root%s", (int)pid, text) >= elflen)
		return -1;
	snprintf(shown, shownlen, "%s", text);
	return 0;
}

int target_from_pid(pid_t pid, struct target *t, char *err, size_t errlen)
{
	char maps[64], line[PATH_MAX + 256], last[PATH_MAX] = "";
	unsigned denied = 0;
	FILE *f;

	memset(t, 0, sizeof(*t));
	t->pid = pid;
	if (kill(pid, 0) && errno == ESRCH) {
		snprintf(err, errlen, "no process with pid %d", (int)pid);
		return -1;
	}
	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	f = fopen(maps, "re");
	if (!f) {
		snprintf(err, errlen, "cannot read %s: %s%s", maps, strerror(errno),
			 errno == EACCES || errno == EPERM ? " (another user's process: that needs CAP_SYS_PTRACE)" : "");
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char elf[sizeof(t->elf)], shown[sizeof(t->shown)];

		if (mapped_file(pid, line, elf, sizeof(elf), shown, sizeof(shown)) ||
		    !strcmp(shown, last))
			continue;
		snprintf(last, sizeof(last), "%s", shown);
		if (access(elf, R_OK) && (errno == EACCES || errno == EPERM))
			denied++;
		if (sdt_count_provider(elf, INFER_PROVIDER)) {
			memcpy(t->elf, elf, sizeof(t->elf));
			memcpy(t->shown, shown, sizeof(t->shown));
			fclose(f);
			fill_build_id(t);
			return 0;
		}
	}
	fclose(f);
	if (denied)
		snprintf(err, errlen, "cannot read the files process %d maps (%u denied): another user's process "
			 "needs CAP_SYS_PTRACE", (int)pid, denied);
	else
		snprintf(err, errlen, "process %d has no '%s' USDT probes (no mapped file carries them); "
			 "to trace it anyway, name its functions with --span or its OpenCL calls with --opencl",
			 (int)pid, INFER_PROVIDER);
	return -1;
}

int target_mapped_lib(pid_t pid, const char *prefix, char *elf, size_t elflen, char *shown,
		      size_t shownlen)
{
	char maps[64], line[PATH_MAX + 256];
	const char *base;
	int rc = -1;
	FILE *f;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	f = fopen(maps, "re");
	if (!f)
		return -1;
	while (rc && fgets(line, sizeof(line), f)) {
		if (mapped_file(pid, line, elf, elflen, shown, shownlen))
			continue;
		base = strrchr(shown, '/');
		if (base && !strncmp(base + 1, prefix, strlen(prefix)))
			rc = 0;
	}
	fclose(f);
	return rc;
}

int target_from_program(const char *prog, int search_path, struct target *t, char *err,
			size_t errlen)
{
	char exe[PATH_MAX];

	memset(t, 0, sizeof(*t));
	t->pid = -1;
	if (search_path ? resolve_command(prog, exe, sizeof(exe)) : access(prog, R_OK)) {
		snprintf(err, errlen, "%s: %s", prog, search_path ? "command not found" : strerror(errno));
		return -1;
	}
	if (!search_path)
		snprintf(exe, sizeof(exe), "%s", prog);
	if (sdt_find_provider_elf(exe, INFER_PROVIDER, t->elf, sizeof(t->elf), err, errlen))
		return -1;
	snprintf(t->shown, sizeof(t->shown), "%s", t->elf);
	fill_build_id(t);
	return 0;
}

int target_or_opencl(const char *prog, int search_path, int opencl, struct target *t, char *err,
		     size_t errlen)
{
	char exe[PATH_MAX];

	if (!target_from_program(prog, search_path, t, err, errlen))
		return 0;
	if (!opencl || (search_path ? resolve_command(prog, exe, sizeof(exe)) : access(prog, R_OK)))
		return -1;
	memset(t, 0, sizeof(*t));
	t->pid = -1;
	snprintf(t->shown, sizeof(t->shown), "%s", prog);
	return 0;
}

int target_pid_without_probes(pid_t pid, struct target *t)
{
	if (kill(pid, 0))
		return -1;
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	snprintf(t->shown, sizeof(t->shown), "pid %d", (int)pid);
	return 0;
}
