/* rotate.h - JSONL files that rotate and never fill the disk.
 *
 * Files are DIR/BASE-YYYYmmddTHHMMSSZ-NNNNNN.jsonl (UTC; NNNNNN increases
 * and orders them). A line goes whole into the current file or not at all:
 *  - the file rotates when the line would take it past file_max;
 *  - the oldest files are deleted while the total would pass total_max or
 *    the file count would pass retain (files left by an earlier run in DIR
 *    count too);
 *  - a line longer than file_max, or one whose write fails, is dropped and
 *    counted, never half-written. */
#ifndef SPANTRACE_ROTATE_H
#define SPANTRACE_ROTATE_H

#include <stddef.h>
#include <stdint.h>

struct rotate_opts {
	const char *dir;       /* must exist and be writable */
	const char *base;      /* file name prefix, e.g. "spantrace" */
	uint64_t file_max;     /* bytes per file, > 0 */
	uint64_t total_max;    /* bytes for all files, >= file_max */
	unsigned retain;       /* most files kept, >= 1 */
};

struct rotate_stats {
	uint64_t lines_written, bytes_written;
	uint64_t lines_dropped;    /* too long for a file, or the write failed */
	uint64_t files_created, files_deleted;
	uint64_t disk_bytes;       /* bytes in our files now */
	unsigned files;            /* our files now, current one included */
	int last_error;            /* errno of the latest failure, 0 if none */
};

struct rotator;

/* Checks the directory, takes stock of earlier files and creates the first
 * file (so an unwritable directory fails here, at startup). NULL with a
 * one-line reason on failure. */
struct rotator *rotate_open(const struct rotate_opts *o, char *err, size_t errlen);

/* Writes one line (a '\n' is added if missing). 0 when written, -1 when
 * dropped (counted in stats). */
int rotate_write(struct rotator *r, const char *line, size_t len);

/* For SIGHUP: closes the current file, re-reads the directory (files may
 * have been moved away) and starts a new file. 0 or -1 (errno). */
int rotate_reopen(struct rotator *r);

/* fsyncs the current file (SIGTERM path). 0 or -1. */
int rotate_flush(struct rotator *r);

void rotate_get_stats(const struct rotator *r, struct rotate_stats *out);
/* Path of the file being written (for messages and tests). */
const char *rotate_current_path(const struct rotator *r);

void rotate_close(struct rotator *r);

#endif
