/* outbuf.h - a buffered output file that only ever writes whole lines.
 *
 * The hot records (span, kernel, alloc, ...) have a fixed schema whose names
 * all come from fixed tables, so they are formatted here directly into a large
 * buffer instead of building a json-c object per event: that is what lets the
 * exporter keep up with millions of events a second. json-c is used for the
 * rare records (session, summary) and ob_put_line() copies its text in.
 *
 * On a write error (ENOSPC, EPIPE, ...) the file is cut back to its last
 * complete line, the error is remembered and every later call is a no-op. */
#ifndef SPANTRACE_OUTBUF_H
#define SPANTRACE_OUTBUF_H

#include <stddef.h>
#include <stdint.h>

#define OB_LINE_MAX 4096   /* no record is longer than this */

struct outbuf {
	int fd;
	int own_fd;           /* close on ob_close */
	char *path;           /* for error messages */
	char *buf;
	size_t len, cap;
	size_t line_start;    /* start of the line being formatted */
	uint64_t written;     /* bytes of whole lines on disk */
	uint64_t lines;
	int error;            /* errno of the first failure, 0 if none */
};

/* Creates path (O_CREAT|O_TRUNC|O_NOFOLLOW, mode 0640), or wraps stdout for
 * "-". 0, or -1 with a message in err. */
int ob_open(struct outbuf *ob, const char *path, char *err, size_t errlen);
/* Writes what is buffered; -1 (and ob->error set) on failure. */
int ob_flush(struct outbuf *ob);
/* Flushes and closes; -1 if anything failed at any point. */
int ob_close(struct outbuf *ob);
/* "path: reason" for the first error. */
void ob_strerror(const struct outbuf *ob, char *out, size_t len);

/* Start a line: guarantees OB_LINE_MAX bytes of room. 0 or -1 on error. */
int ob_begin(struct outbuf *ob);
/* Finish the line with '\n'. */
void ob_end(struct outbuf *ob);

void ob_lit(struct outbuf *ob, const char *s);          /* raw text, no escaping */
void ob_u64(struct outbuf *ob, uint64_t v);
void ob_s64(struct outbuf *ob, int64_t v);
void ob_fixed(struct outbuf *ob, uint64_t v, unsigned decimals_of_1e9); /* v/1e9 etc */
void ob_double(struct outbuf *ob, double v);
/* A JSON string, escaped, at most maxlen bytes of s. */
void ob_jstr(struct outbuf *ob, const char *s, size_t maxlen);
/* Convenience: ,"key": */
void ob_key(struct outbuf *ob, const char *key);
/* ,"key":"name" for a name from a fixed table (not escaped). */
void ob_key_name(struct outbuf *ob, const char *key, const char *name);
/* A whole line of pre-rendered JSON (from json-c). */
int ob_put_line(struct outbuf *ob, const char *text);

#endif
