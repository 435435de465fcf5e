/* follow.c - inotify on a traced file's directory; new inodes behind the
 * same name (see follow.h). */
#include "core/follow.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/stapsdt.h"

struct inode_id {
	dev_t dev;
	ino_t ino;
};

struct follow {
	int ifd;
	char path[PATH_MAX];
	const char *base;        /* into path */
	int changed;             /* an event named base since the last look */
	struct inode_id *seen;
	size_t nseen;
};

static int seen(const struct follow *f, const struct stat *st)
{
	for (size_t i = 0; i < f->nseen; i++)
		if (f->seen[i].dev == st->st_dev && f->seen[i].ino == st->st_ino)
			return 1;
	return 0;
}

static int mark_seen(struct follow *f, const struct stat *st)
{
	struct inode_id *n = realloc(f->seen, (f->nseen + 1) * sizeof(*n));

	if (!n)
		return -1;
	f->seen = n;
	f->seen[f->nseen].dev = st->st_dev;
	f->seen[f->nseen++].ino = st->st_ino;
	return 0;
}

struct follow *follow_new(const char *path, char *err, size_t errlen)
{
	struct follow *f = calloc(1, sizeof(*f));
	char dir[PATH_MAX], *slash;
	struct stat st;

	if (!f || (size_t)snprintf(f->path, sizeof(f->path), "%s", path) >= sizeof(f->path)) {
		snprintf(err, errlen, "out of memory");
		free(f);
		return NULL;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	f->base = strrchr(f->path, '/') ? strrchr(f->path, '/') + 1 : f->path;
	if (slash)
		*(slash == dir ? slash + 1 : slash) = 0;
	else
		snprintf(dir, sizeof(dir), ".");
	/* A rename onto the name, a new link or symlink, a file written in place. */
	f->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (f->ifd < 0 || inotify_add_watch(f->ifd, dir, IN_MOVED_TO | IN_CREATE | IN_CLOSE_WRITE) < 0 ||
	    stat(path, &st) || mark_seen(f, &st)) {
		snprintf(err, errlen, "cannot watch %s for replacements: %s", dir, strerror(errno));
		follow_free(f);
		return NULL;
	}
	return f;
}

void follow_free(struct follow *f)
{
	if (!f)
		return;
	if (f->ifd >= 0)
		close(f->ifd);
	free(f->seen);
	free(f);
}

const char *follow_path(const struct follow *f)
{
	return f->path;
}

/* Drains the events; sets changed when one names the file. */
static void drain(struct follow *f)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	while ((n = read(f->ifd, buf, sizeof(buf))) > 0)
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			if (ev->len && !strcmp(ev->name, f->base))
				f->changed = 1;
			p += sizeof(*ev) + ev->len;
		}
}

int follow_next(struct follow *f, const char *provider)
{
	char fdpath[64];
	struct stat st;
	int fd;

	drain(f);
	if (!f->changed)
		return -1;
	f->changed = 0;
	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	/* A file still being written has no probes yet: its close comes later. */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || seen(f, &st) || !sdt_count_provider(fdpath, provider)) {
		close(fd);
		return -1;
	}
	return fd;
}

void follow_done(struct follow *f, int fd, int ok)
{
	struct stat st;

	if (ok && !fstat(fd, &st))
		mark_seen(f, &st);
	close(fd);
}

unsigned follow_reattaches(const struct follow *f)
{
	return f && f->nseen ? (unsigned)f->nseen - 1 : 0;
}
