/* follow.h - follows a path, not only the inode it named at start: uprobes
 * are tied to an inode, so a deploy that renames a new file over the traced
 * one would leave every later process untraced. inotify on the directory
 * says when the name may point somewhere new; the caller attaches to each
 * new inode and keeps its links on the old ones (processes still run them).
 *
 *   f = follow_new(path, err, errlen);        // the inode now counts as seen
 *   each loop pass: while ((fd = follow_next(f)) >= 0) { attach /proc/self/fd/fd; follow_done(f, fd, ok); }
 */
#ifndef SPANTRACE_FOLLOW_H
#define SPANTRACE_FOLLOW_H

#include <stddef.h>

struct follow;

/* Watches path's directory. NULL with a message on failure. */
struct follow *follow_new(const char *path, char *err, size_t errlen);
void follow_free(struct follow *f);
const char *follow_path(const struct follow *f);

/* Non-blocking: an open fd on the inode the path names now, when that inode
 * is new and carries `provider` probes; -1 otherwise. */
int follow_next(struct follow *f, const char *provider);
/* After follow_next: ok marks the inode seen (a failure is retried on the
 * next change); closes fd. */
void follow_done(struct follow *f, int fd, int ok);
/* Inodes attached after the first. */
unsigned follow_reattaches(const struct follow *f);

#endif
