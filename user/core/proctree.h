/* proctree.h - processes by their relations, from /proc: the descendants
 * of a pid (a pre-fork server's workers), and every process running an
 * executable (--http --binary). */
#ifndef SPANTRACE_PROCTREE_H
#define SPANTRACE_PROCTREE_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Up to max descendants of root (children, theirs, ...) into out, root not
 * among them; their count, or -1 (errno) when /proc cannot be read. */
int proctree_descendants(pid_t root, pid_t *out, int max);

/* cb(ctx, pid) for each process whose executable is the file st names
 * (by device and inode: any path, any mount namespace). 0 or -1 (errno). */
int proctree_each_exe(const struct stat *st, void (*cb)(void *ctx, pid_t pid), void *ctx);

/* /proc/PID/stat read into buf (len bytes): its fields after the name
 * (from field 3, the state), or NULL when it cannot be read. */
const char *proctree_stat_fields(pid_t pid, char *buf, size_t len);

#endif
