/* outbuf.c - whole-line buffered output with a small fast formatter. */
#include "output/outbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OB_CAP (1u << 20)

int ob_open(struct outbuf *ob, const char *path, char *err, size_t errlen)
{
	memset(ob, 0, sizeof(*ob));
	ob->path = strdup(path);
	ob->buf = malloc(OB_CAP);
	if (!ob->path || !ob->buf) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	ob->cap = OB_CAP;
	if (!strcmp(path, "-")) {
		ob->fd = STDOUT_FILENO;
		return 0;
	}
	/* O_NOFOLLOW: a symlink planted at the output path is refused. */
	ob->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (ob->fd < 0) {
		snprintf(err, errlen, "cannot create %s: %s", path,
			 errno == ELOOP ? "it is a symbolic link (refusing to follow it)" : strerror(errno));
		goto fail;
	}
	ob->own_fd = 1;
	return 0;
fail:
	free(ob->path);
	free(ob->buf);
	ob->path = ob->buf = NULL;
	return -1;
}

/* Writes buf[0..upto); on failure cuts the file back to its last whole line. */
static int write_out(struct outbuf *ob, size_t upto)
{
	size_t off = 0;

	while (off < upto) {
		ssize_t n = write(ob->fd, ob->buf + off, upto - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ob->error = n < 0 ? errno : ENOSPC;
			/* Keep whole lines only: drop a partly written one. */
			size_t whole = off;
			while (whole > 0 && ob->buf[whole - 1] != '\n')
				whole--;
			if (ob->own_fd && whole != off && ftruncate(ob->fd, ob->written + whole) == 0)
				lseek(ob->fd, ob->written + whole, SEEK_SET);
			ob->written += whole;
			return -1;
		}
		off += n;
	}
	ob->written += upto;
	memmove(ob->buf, ob->buf + upto, ob->len - upto);
	ob->len -= upto;
	ob->line_start -= upto;
	return 0;
}

int ob_flush(struct outbuf *ob)
{
	if (ob->error)
		return -1;
	/* Only complete lines go out; a line being formatted stays. */
	return ob->line_start ? write_out(ob, ob->line_start) : 0;
}

int ob_close(struct outbuf *ob)
{
	int rc = 0;

	if (!ob->buf)
		return 0;
	if (ob_flush(ob))
		rc = -1;
	if (ob->own_fd && close(ob->fd) && !ob->error) {
		ob->error = errno;
		rc = -1;
	}
	if (ob->error)
		rc = -1;
	free(ob->buf);
	ob->buf = NULL;
	return rc;
}

void ob_strerror(const struct outbuf *ob, char *out, size_t len)
{
	snprintf(out, len, "writing %s: %s", ob->path ? ob->path : "?", strerror(ob->error));
}

int ob_begin(struct outbuf *ob)
{
	if (ob->error)
		return -1;
	ob->line_start = ob->len;
	if (ob->cap - ob->len < OB_LINE_MAX && ob_flush(ob))
		return -1;
	return 0;
}

void ob_end(struct outbuf *ob)
{
	ob->buf[ob->len++] = '\n';
	ob->line_start = ob->len;
	ob->lines++;
}

void ob_lit(struct outbuf *ob, const char *s)
{
	size_t n = strlen(s);
	memcpy(ob->buf + ob->len, s, n);
	ob->len += n;
}

void ob_u64(struct outbuf *ob, uint64_t v)
{
	char tmp[24];
	int i = sizeof(tmp);

	do {
		tmp[--i] = '0' + v % 10;
		v /= 10;
	} while (v);
	memcpy(ob->buf + ob->len, tmp + i, sizeof(tmp) - i);
	ob->len += sizeof(tmp) - i;
}

void ob_s64(struct outbuf *ob, int64_t v)
{
	if (v < 0) {
		ob->buf[ob->len++] = '-';
		ob_u64(ob, (uint64_t)0 - (uint64_t)v);
	} else {
		ob_u64(ob, (uint64_t)v);
	}
}

/* Writes v / 10^decimals with exactly `decimals` digits after the point. */
void ob_fixed(struct outbuf *ob, uint64_t v, unsigned decimals)
{
	uint64_t scale = 1;
	char tmp[24];

	for (unsigned i = 0; i < decimals; i++)
		scale *= 10;
	ob_u64(ob, v / scale);
	if (!decimals)
		return;
	ob->buf[ob->len++] = '.';
	snprintf(tmp, sizeof(tmp), "%0*llu", (int)decimals, (unsigned long long)(v % scale));
	ob_lit(ob, tmp);
}

void ob_double(struct outbuf *ob, double v)
{
	int n = snprintf(ob->buf + ob->len, 32, "%.6g", v);
	if (n > 0 && n < 32)
		ob->len += n;
}

void ob_jstr(struct outbuf *ob, const char *s, size_t maxlen)
{
	static const char hex[] = "0123456789abcdef";
	size_t room = OB_LINE_MAX / 8;  /* keep one field well inside a line */

	if (maxlen > room)
		maxlen = room;
	ob->buf[ob->len++] = '"';
	for (size_t i = 0; i < maxlen && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			ob->buf[ob->len++] = '\\';
			ob->buf[ob->len++] = c;
		} else if (c < 0x20 || c == 0x7f) {
			ob_lit(ob, "\\u00");
			ob->buf[ob->len++] = hex[c >> 4];
			ob->buf[ob->len++] = hex[c & 15];
		} else {
			ob->buf[ob->len++] = c;
		}
	}
	ob->buf[ob->len++] = '"';
}

void ob_key(struct outbuf *ob, const char *key)
{
	ob->buf[ob->len++] = ',';
	ob->buf[ob->len++] = '"';
	ob_lit(ob, key);
	ob->buf[ob->len++] = '"';
	ob->buf[ob->len++] = ':';
}

void ob_key_name(struct outbuf *ob, const char *key, const char *name)
{
	ob_key(ob, key);
	ob->buf[ob->len++] = '"';
	ob_lit(ob, name);
	ob->buf[ob->len++] = '"';
}

int ob_put_line(struct outbuf *ob, const char *text)
{
	size_t n = strlen(text);

	if (ob->error)
		return -1;
	if (ob->cap - ob->len < n + 1 && ob_flush(ob))
		return -1;
	if (ob->cap - ob->len < n + 1) {
		/* Larger than the whole buffer: write it directly. */
		char *big = malloc(n + 1);
		if (!big) {
			ob->error = ENOMEM;
			return -1;
		}
		memcpy(big, text, n);
		big[n] = '\n';
		char *saved = ob->buf;
		size_t saved_cap = ob->cap;
		ob->buf = big;
		ob->len = ob->line_start = n + 1;
		ob->cap = n + 1;
		int rc = write_out(ob, n + 1);
		ob->buf = saved;
		ob->cap = saved_cap;
		ob->len = ob->line_start = 0;
		free(big);
		ob->lines++;
		return rc;
	}
	memcpy(ob->buf + ob->len, text, n);
	ob->len += n;
	ob->buf[ob->len++] = '\n';
	ob->line_start = ob->len;
	ob->lines++;
	return 0;
}
