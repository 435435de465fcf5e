/* rotate.c - size-capped, count-capped rotating JSONL files.
 *
 * The invariant after every call: the files we know of in DIR hold at most
 * total_max bytes and number at most `retain`. Lines are written with one
 * write() each (tail spans are rare) so nothing sits in a buffer to lose;
 * a short write is cut back with ftruncate so a file only has whole lines. */
#include "output/rotate.h"
#include "core/grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

struct rot_file {
	uint64_t seq;
	uint64_t size;
	char name[NAME_MAX + 1];
};

struct rotator {
	char *dir, *base;
	uint64_t file_max, total_max;
	unsigned retain;
	int dirfd;
	int fd;                   /* current file, the last in files[]; -1 if none */
	struct rot_file *files;   /* oldest first */
	size_t nfiles, cap;
	uint64_t next_seq;
	struct rotate_stats st;
	char path[PATH_MAX];
};

/* ---- the file list ---- */

static int files_push(struct rotator *r, const struct rot_file *f)
{
	if (ARRAY_GROW(r->files, r->cap, r->nfiles))
		return -1;
	r->files[r->nfiles++] = *f;
	r->st.disk_bytes += f->size;
	return 0;
}

static void delete_oldest(struct rotator *r)
{
	struct rot_file *f = &r->files[0];
	if (unlinkat(r->dirfd, f->name, 0) == 0 || errno == ENOENT)
		r->st.files_deleted++;
	else
		r->st.last_error = errno;  /* forgotten anyway: we cannot do better */
	r->st.disk_bytes -= f->size;
	memmove(r->files, r->files + 1, (r->nfiles - 1) * sizeof(*r->files));
	r->nfiles--;
}

/* Deletes the oldest closed files until `incoming` more bytes fit in the
 * total cap and the count fits `retain`. The current file is never deleted. */
static void enforce_caps(struct rotator *r, uint64_t incoming)
{
	size_t keep = r->fd >= 0 ? 1 : 0;
	while (r->nfiles > keep &&
	       (r->st.disk_bytes + incoming > r->total_max || r->nfiles > r->retain))
		delete_oldest(r);
}

/* "BASE-<stamp>-<seq>.jsonl" -> seq; -1 for names that are not ours. */
static int parse_name(const char *base, const char *name, uint64_t *seq)
{
	size_t blen = strlen(base), nlen = strlen(name);
	if (strncmp(name, base, blen) || name[blen] != '-' || nlen < 6 ||
	    strcmp(name + nlen - 6, ".jsonl"))
		return -1;
	const char *dash = strrchr(name, '-');
	if (dash <= name + blen || dash[1] < '0' || dash[1] > '9')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(dash + 1, &end, 10);
	if (errno || strcmp(end, ".jsonl"))
		return -1;
	*seq = v;
	return 0;
}

static int cmp_seq(const void *a, const void *b)
{
	uint64_t x = ((const struct rot_file *)a)->seq, y = ((const struct rot_file *)b)->seq;
	return (x > y) - (x < y);
}

/* Takes stock of our files already in the directory (an earlier run's). */
static int scan_dir(struct rotator *r)
{
	int fd = dup(r->dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rewinddir(d);
	r->nfiles = 0;
	r->st.disk_bytes = 0;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		struct rot_file f = { 0 };
		struct stat sb;
		if (parse_name(r->base, e->d_name, &f.seq) < 0 ||
		    fstatat(r->dirfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(sb.st_mode))
			continue;
		f.size = (uint64_t)sb.st_size;
		snprintf(f.name, sizeof(f.name), "%s", e->d_name);
		if (files_push(r, &f) < 0) {
			rc = -1;
			errno = ENOMEM;
			break;
		}
		if (f.seq >= r->next_seq)
			r->next_seq = f.seq + 1;
	}
	closedir(d);
	if (r->nfiles)
		qsort(r->files, r->nfiles, sizeof(*r->files), cmp_seq);
	return rc;
}

/* ---- the current file ---- */

static void close_current(struct rotator *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}

static int open_new_file(struct rotator *r)
{
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);

	close_current(r);
	struct rot_file f = { 0 };
	for (int tries = 0; tries < 100; tries++) {
		f.seq = r->next_seq++;
		snprintf(f.name, sizeof(f.name), "%s-%s-%06llu.jsonl", r->base, stamp,
			 (unsigned long long)f.seq);
		r->fd = openat(r->dirfd, f.name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC,
			       0640);
		if (r->fd >= 0 || errno != EEXIST)
			break;
	}
	if (r->fd < 0) {
		r->st.last_error = errno;
		return -1;
	}
	if (files_push(r, &f) < 0) {
		close_current(r);
		unlinkat(r->dirfd, f.name, 0);
		r->st.last_error = errno = ENOMEM;
		return -1;
	}
	snprintf(r->path, sizeof(r->path), "%s/%s", r->dir, f.name);
	r->st.files_created++;
	enforce_caps(r, 0);
	return 0;
}

static struct rot_file *current(struct rotator *r)
{
	return r->fd >= 0 ? &r->files[r->nfiles - 1] : NULL;
}

/* One whole line or nothing: a short write is cut back off the file. */
static int write_line(struct rotator *r, const char *line, size_t len, int add_newline)
{
	struct rot_file *f = current(r);
	struct iovec iov[2] = { { (void *)line, len }, { "\n", 1 } };
	size_t want = len + (add_newline ? 1 : 0);
	ssize_t n;
	do
		n = writev(r->fd, iov, add_newline ? 2 : 1);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)want)
		return 0;
	r->st.last_error = n < 0 ? errno : ENOSPC;
	if (n > 0 && ftruncate(r->fd, (off_t)f->size) < 0)
		r->st.last_error = errno;
	return -1;
}

int rotate_write(struct rotator *r, const char *line, size_t len)
{
	int add_newline = len == 0 || line[len - 1] != '\n';
	uint64_t need = len + (add_newline ? 1 : 0);

	if (need > r->file_max)
		goto drop;
	if (r->fd < 0 || current(r)->size + need > r->file_max) {
		if (open_new_file(r) < 0)
			goto drop;
	}
	enforce_caps(r, need);
	if (write_line(r, line, len, add_newline) < 0)
		goto drop;
	current(r)->size += need;
	r->st.disk_bytes += need;
	r->st.bytes_written += need;
	r->st.lines_written++;
	return 0;
drop:
	r->st.lines_dropped++;
	return -1;
}

/* ---- lifecycle ---- */

static int check_opts(const struct rotate_opts *o, char *err, size_t errlen)
{
	if (!o->dir || !*o->dir || !o->base || !*o->base || strchr(o->base, '/')) {
		snprintf(err, errlen, "jsonl: need a directory and a base name without '/'");
		return -1;
	}
	if (!o->file_max || o->total_max < o->file_max || !o->retain) {
		snprintf(err, errlen, "jsonl: caps must satisfy 0 < file max <= total max and retain >= 1");
		return -1;
	}
	return 0;
}

/* mkdir -p DIR, each missing level 0750 (as the systemd unit's
 * LogsDirectoryMode): the daemon's --jsonl-dir need not exist beforehand. */
static int make_dirs(const char *dir)
{
	char path[PATH_MAX];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(path)) {
		errno = n ? ENAMETOOLONG : ENOENT;
		return -1;
	}
	memcpy(path, dir, n + 1);
	for (char *p = path + 1; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(path, 0750) < 0 && errno != EEXIST)
			return -1;
		if (!(*p = c))
			return 0;
	}
}

struct rotator *rotate_open(const struct rotate_opts *o, char *err, size_t errlen)
{
	if (check_opts(o, err, errlen) < 0)
		return NULL;
	struct rotator *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "jsonl: out of memory");
		return NULL;
	}
	r->fd = r->dirfd = -1;
	r->next_seq = 1;  /* only grows, so a reopen never reuses a name */
	r->file_max = o->file_max;
	r->total_max = o->total_max;
	r->retain = o->retain;
	if (!(r->dir = strdup(o->dir)) || !(r->base = strdup(o->base))) {
		snprintf(err, errlen, "jsonl: out of memory");
		goto fail;
	}
	if (make_dirs(o->dir) < 0) {
		snprintf(err, errlen, "jsonl directory %s: cannot create it: %s", o->dir, strerror(errno));
		goto fail;
	}
	r->dirfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->dirfd < 0) {
		snprintf(err, errlen, "jsonl directory %s: %s", o->dir, strerror(errno));
		goto fail;
	}
	if (scan_dir(r) < 0) {
		snprintf(err, errlen, "jsonl directory %s: cannot list: %s", o->dir, strerror(errno));
		goto fail;
	}
	/* Creating the first file now is the only honest writability test
	 * (root passes access(2) checks on read-only mounts' modes). */
	if (open_new_file(r) < 0) {
		snprintf(err, errlen, "jsonl directory %s: cannot create a file: %s", o->dir,
			 strerror(r->st.last_error));
		goto fail;
	}
	return r;
fail:
	rotate_close(r);
	return NULL;
}

int rotate_reopen(struct rotator *r)
{
	close_current(r);
	if (scan_dir(r) < 0) {
		r->st.last_error = errno;
		return -1;
	}
	return open_new_file(r);
}

int rotate_flush(struct rotator *r)
{
	if (r->fd >= 0 && fsync(r->fd) < 0) {
		r->st.last_error = errno;
		return -1;
	}
	return 0;
}

void rotate_get_stats(const struct rotator *r, struct rotate_stats *out)
{
	*out = r->st;
	out->files = (unsigned)r->nfiles;
}

const char *rotate_current_path(const struct rotator *r)
{
	return r->fd >= 0 ? r->path : "";
}

void rotate_close(struct rotator *r)
{
	if (!r)
		return;
	close_current(r);
	if (r->dirfd >= 0)
		close(r->dirfd);
	free(r->files);
	free(r->dir);
	free(r->base);
	free(r);
}
