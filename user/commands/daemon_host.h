/* daemon_host.h - the daemon's host mode (--all-engines): finds every engine
 * on the host (core/fleet.h), attaches to each new probe file by inode,
 * asks each new engine for its state, and keeps the labels its series carry
 * (host pid, pid in its namespace, cgroup, the file as it names it). */
#ifndef SPANTRACE_DAEMON_HOST_H
#define SPANTRACE_DAEMON_HOST_H

#include <stdint.h>
#include "core/session.h"
#include "output/metricset.h"

struct daemon_host;

/* forget(ctx, pid) is called when a pid is reused by a new engine: the old
 * process's series must end before the new one's begin. */
struct daemon_host *daemon_host_new(struct session *s, void (*forget)(void *ctx, uint32_t pid), void *ctx);
void daemon_host_free(struct daemon_host *h);
/* One discovery pass over /proc. */
void daemon_host_scan(struct daemon_host *h);
/* Copies the labels into the snapshot (s->metas). 0 or -1 (out of memory). */
int daemon_host_labels(const struct daemon_host *h, struct metrics_snapshot *s);
/* The daemon forgot an exited pid: drop its labels. */
void daemon_host_drop(struct daemon_host *h, uint32_t pid);
/* Inodes attached so far. */
unsigned daemon_host_inodes(const struct daemon_host *h);

#endif
