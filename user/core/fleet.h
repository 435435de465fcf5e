/* fleet.h - host mode's discovery: every process on the host that maps a
 * file carrying a USDT provider, or llama.cpp (core/engines.h), whatever its path or mount namespace. It
 * reads /proc/PID/maps and stats each mapped file through
 * /proc/PID/map_files (which reaches the inode in any mount namespace, and
 * deleted or replaced files too), so a file is known by its inode, not by a
 * path that may not exist on the host. Each inode's ELF notes are read once.
 *
 *   f = fleet_new("infer");
 *   every pass: fleet_scan(f, &cb, ctx);   // new inodes, new engines
 */
#ifndef SPANTRACE_FLEET_H
#define SPANTRACE_FLEET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fleet;

/* What a process is, for labels. */
struct fleet_proc {
	pid_t pid;               /* on the host */
	pid_t ns_pid;            /* in its own (innermost) pid namespace */
	uint64_t start_ticks;    /* /proc/PID/stat starttime: tells a reused pid */
	char cgroup[256];        /* its cgroup v2 path ("/" at the root) */
	char path[512];          /* the probe file as the process sees it */
	dev_t dev;               /* the probe file's inode */
	ino_t ino;
	int engine;              /* enum engine_id of that file (core/engines.h) */
};

#define FLEET_RETRY 1

struct fleet_callbacks {
	/* A new inode with the provider's probes; open_path reaches it now.
	 * FLEET_RETRY: the process went away before the inode could be used
	 * (a short-lived child that loaded the library); the next process
	 * mapping it brings it up again. */
	int (*on_inode)(void *ctx, const char *open_path, const struct fleet_proc *first);
	/* A process mapping such an inode, seen for the first time (a pid
	 * seen before with another start time is a new process). */
	void (*on_engine)(void *ctx, const struct fleet_proc *p);
};

struct fleet *fleet_new(const char *provider);
void fleet_free(struct fleet *f);
/* One pass over /proc. Processes already scanned are skipped, except on
 * every `full_every`-th pass (a library loaded late). 0 or -1 (errno). */
int fleet_scan(struct fleet *f, const struct fleet_callbacks *cb, void *ctx, unsigned full_every);
/* /proc/PID/stat's start time (clock ticks since boot); 0 when unreadable.
 * A pid whose start time changed is another process. */
uint64_t fleet_start_ticks(pid_t pid);
/* Has p gone (exited, a zombie, or its pid reused) since it was read?
 * open_path is the file as on_inode got it, through /proc/PID/root: an
 * exiting process loses its root before its pid, so that stops resolving. */
int fleet_proc_gone(const struct fleet_proc *p, const char *open_path);
/* Reads pid's labels (ns pid, cgroup, start time). 0 or -1. */
int fleet_read_proc(pid_t pid, struct fleet_proc *p);

#endif
