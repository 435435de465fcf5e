/* test_rotate.c - rotating JSONL: per-file cap, total cap, retention,
 * whole lines only, drops counted, earlier runs' files counted, SIGHUP
 * reopen, bad directories, and a failing write cut back (RLIMIT_FSIZE). */
#include "output/rotate.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; \
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static char err[256];

struct dir_stock {
	unsigned files;          /* our spantrace-*.jsonl files */
	unsigned long long bytes;
	unsigned long long max_file;
	int torn;                /* a file not ending in '\n' or with a short line */
};

/* What is really on disk, independent of the rotator's own accounting. */
static struct dir_stock take_stock(const char *dir, size_t line_len)
{
	struct dir_stock s = { 0 };
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		/* ours end in "-<digits>.jsonl" */
		if (strncmp(e->d_name, "spantrace-", 10) || n < 8 || strcmp(e->d_name + n - 6, ".jsonl") ||
		    e->d_name[n - 7] < '0' || e->d_name[n - 7] > '9')
			continue;
		char path[512];
		struct stat sb;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lstat(path, &sb) < 0 || !S_ISREG(sb.st_mode))
			continue;
		s.files++;
		s.bytes += (unsigned long long)sb.st_size;
		if ((unsigned long long)sb.st_size > s.max_file)
			s.max_file = (unsigned long long)sb.st_size;
		if (line_len && sb.st_size % (off_t)line_len)
			s.torn = 1;
	}
	if (d)
		closedir(d);
	return s;
}

static void make_line(char *buf, size_t len, unsigned i)
{
	/* {"i":NNNNN,"pad":"xxx..."}\n, exactly len bytes with the newline */
	int n = snprintf(buf, len, "{\"i\":%05u,\"pad\":\"", i);
	memset(buf + n, 'x', len - (size_t)n - 3);
	memcpy(buf + len - 3, "\"}\n", 3);
}

static void test_caps(const char *dir)
{
	struct rotate_opts o = { dir, "spantrace", 100, 350, 10 };
	struct rotator *r = rotate_open(&o, err, sizeof(err));
	CHECK(r, "open: %s", err);
	if (!r)
		return;
	char line[30];
	for (unsigned i = 0; i < 50; i++) {
		make_line(line, sizeof(line), i);
		CHECK(rotate_write(r, line, sizeof(line)) == 0, "line %u written", i);
		/* The caps hold after every single write, not just at the end. */
		struct dir_stock now = take_stock(dir, sizeof(line));
		CHECK(now.bytes <= 350 && now.max_file <= 100, "after line %u: %llu bytes, largest file %llu",
		      i, now.bytes, now.max_file);
	}
	struct rotate_stats st;
	rotate_get_stats(r, &st);
	struct dir_stock d = take_stock(dir, sizeof(line));
	CHECK(st.lines_written == 50 && st.lines_dropped == 0, "50 written, 0 dropped");
	CHECK(d.max_file <= 100, "per-file cap: largest %llu", d.max_file);
	CHECK(d.bytes <= 350, "total cap: %llu bytes on disk", d.bytes);
	CHECK(!d.torn, "whole lines only");
	CHECK(st.disk_bytes == d.bytes && st.files == d.files, "accounting %llu/%u matches disk %llu/%u",
	      (unsigned long long)st.disk_bytes, st.files, d.bytes, d.files);
	CHECK(st.files_deleted == st.files_created - d.files, "created - deleted = present");
	CHECK(st.files_deleted > 0, "old files were deleted");

	/* A line bigger than a file can hold is dropped whole. */
	char big[200];
	memset(big, 'y', sizeof(big));
	CHECK(rotate_write(r, big, sizeof(big)) < 0, "oversized line dropped");
	rotate_get_stats(r, &st);
	CHECK(st.lines_dropped == 1, "drop counted");
	CHECK(take_stock(dir, sizeof(line)).bytes == d.bytes, "nothing of the dropped line on disk");
	rotate_close(r);

	/* Files from this earlier run count against a new, tighter cap. */
	struct rotate_opts tight = { dir, "spantrace", 100, 120, 10 };
	r = rotate_open(&tight, err, sizeof(err));
	CHECK(r, "reopen tight: %s", err);
	if (r) {
		d = take_stock(dir, sizeof(line));
		CHECK(d.bytes <= 120, "earlier files trimmed to the new total cap: %llu", d.bytes);
		rotate_get_stats(r, &st);
		CHECK(st.disk_bytes == d.bytes, "accounting includes earlier files");
		rotate_close(r);
	}
}

static void test_retain(const char *dir)
{
	struct rotate_opts o = { dir, "spantrace", 60, 1 << 20, 3 };
	struct rotator *r = rotate_open(&o, err, sizeof(err));
	CHECK(r, "open: %s", err);
	if (!r)
		return;
	char line[30];
	for (unsigned i = 0; i < 40; i++) {
		make_line(line, sizeof(line), i);
		rotate_write(r, line, sizeof(line));
	}
	CHECK(take_stock(dir, sizeof(line)).files == 3, "retain 3 keeps 3 files");

	/* Lines without a newline get one. */
	struct rotate_stats before, after;
	rotate_get_stats(r, &before);
	CHECK(rotate_write(r, "{\"a\":1}", 7) == 0, "short line");
	rotate_get_stats(r, &after);
	CHECK(after.bytes_written == before.bytes_written + 8, "newline added");

	/* SIGHUP path: a file moved away is forgotten, a new file is started. */
	char old_path[512], moved[600];
	snprintf(old_path, sizeof(old_path), "%s", rotate_current_path(r));
	snprintf(moved, sizeof(moved), "%s.moved", old_path);
	CHECK(rename(old_path, moved) == 0, "rename current away");
	CHECK(rotate_reopen(r) == 0, "reopen");
	CHECK(strcmp(rotate_current_path(r), old_path) != 0, "new file after reopen");
	rotate_get_stats(r, &after);
	CHECK(after.files == take_stock(dir, 0).files, "moved file no longer counted (%u)", after.files);
	CHECK(access(moved, F_OK) == 0, "moved file left alone");
	rotate_close(r);
}

/* A write that fails halfway must leave no partial line behind. */
static void test_write_failure(const char *dir)
{
	struct rotate_opts o = { dir, "spantrace", 4096, 1 << 20, 5 };
	struct rotator *r = rotate_open(&o, err, sizeof(err));
	CHECK(r, "open: %s", err);
	if (!r)
		return;
	struct rlimit old, lim;
	getrlimit(RLIMIT_FSIZE, &old);
	lim = old;
	lim.rlim_cur = 1000;
	signal(SIGXFSZ, SIG_IGN);
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
	char line[300];
	int written = 0, dropped = 0;
	for (unsigned i = 0; i < 5; i++) {
		make_line(line, sizeof(line), i);
		if (rotate_write(r, line, sizeof(line)) == 0)
			written++;
		else
			dropped++;
	}
	setrlimit(RLIMIT_FSIZE, &old);
	struct stat sb;
	CHECK(stat(rotate_current_path(r), &sb) == 0 && sb.st_size == 900, "cut back to 3 whole lines (%lld)",
	      (long long)sb.st_size);
	struct rotate_stats st;
	rotate_get_stats(r, &st);
	CHECK(written == 3 && dropped == 2 && st.lines_dropped == 2 && st.last_error != 0,
	      "3 written, 2 dropped and counted (%d/%d)", written, dropped);
	rotate_close(r);
}

static void clean(const char *dir);

static void test_bad_dirs(const char *dir)
{
	char file[512], below[600], nested[600];
	snprintf(file, sizeof(file), "%s/plainfile", dir);
	FILE *f = fopen(file, "w");
	if (f)
		fclose(f);
	/* a missing directory is made, each level 0750; one below a file cannot be */
	snprintf(below, sizeof(below), "%s/sub", file);
	struct rotate_opts o = { below, "spantrace", 100, 100, 1 };
	CHECK(!rotate_open(&o, err, sizeof(err)) && strstr(err, "cannot create it: Not a directory"),
	      "dir below a file: %s", err);
	snprintf(nested, sizeof(nested), "%s/a/b", dir);
	o.dir = nested;
	struct rotator *r = rotate_open(&o, err, sizeof(err));
	struct stat st;
	CHECK(r && stat(nested, &st) == 0 && (st.st_mode & 0777) == 0750, "missing dirs made 0750: %s", err);
	if (r)
		rotate_close(r);
	clean(nested);
	rmdir(nested);
	snprintf(nested, sizeof(nested), "%s/a", dir);
	rmdir(nested);
	o.dir = file;
	CHECK(!rotate_open(&o, err, sizeof(err)) && strstr(err, "Not a directory"), "file as dir: %s", err);
	o.dir = "/proc/self";  /* exists, but nothing can be created there */
	CHECK(!rotate_open(&o, err, sizeof(err)) && strstr(err, "cannot create"), "unwritable: %s", err);
	struct rotate_opts caps = { dir, "spantrace", 100, 50, 1 };
	CHECK(!rotate_open(&caps, err, sizeof(err)), "total below file cap rejected");
	unlink(file);
}

static void clean(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
}

int main(void)
{
	char dir[] = "/tmp/test_rotate.XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	/* Someone else's file in the directory is never touched. */
	char other[512];
	snprintf(other, sizeof(other), "%s/spantrace-notes.jsonl", dir);
	FILE *f = fopen(other, "w");
	if (f) {
		fputs("keep me\n", f);
		fclose(f);
	}
	test_caps(dir);
	CHECK(access(other, F_OK) == 0, "unrelated file kept");
	clean(dir);
	test_retain(dir);
	clean(dir);
	test_write_failure(dir);
	clean(dir);
	test_bad_dirs(dir);
	clean(dir);
	rmdir(dir);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("test_rotate: all checks passed\n");
	return 0;
}
