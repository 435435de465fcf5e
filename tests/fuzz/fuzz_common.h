/* fuzz_common.h - helpers shared by the libFuzzer harnesses in tests/fuzz.
 * Harnesses are built by tests/fuzz/run.sh; each names the project sources it
 * compiles in on a "fuzz-sources:" line and extra link flags on "fuzz-libs:". */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* An invariant the code under test promised and broke: crash so libFuzzer
 * records the input, with a line saying which promise. */
#define FUZZ_CHECK(cond)                                                        \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n",  \
				#cond, __FILE__, __LINE__);                     \
			abort();                                                \
		}                                                               \
	} while (0)

/* Writes data to an anonymous in-memory file and returns its fd (or -1);
 * loaders that take a path get "/proc/self/fd/N" from fuzz_fd_path. */
static inline int fuzz_memfd(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-input", MFD_CLOEXEC);
	size_t done = 0;

	if (fd < 0)
		return -1;
	while (done < size) {
		ssize_t n = write(fd, data + done, size - done);
		if (n <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	return fd;
}

static inline void fuzz_fd_path(int fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/* Copies data into a NUL-terminated heap string (NULs inside stay: callers
 * see the first segment, or split with fuzz_split). NULL on ENOMEM. */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		return NULL;
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* Splits buf (size bytes plus a terminating NUL) at every NUL into at most
 * max strings; returns how many. */
static inline int fuzz_split(char *buf, size_t size, char **out, int max)
{
	int n = 0;
	size_t start = 0;

	for (size_t i = 0; i <= size && n < max; i++)
		if (buf[i] == '\0') {
			out[n++] = buf + start;
			start = i + 1;
		}
	return n;
}

#endif
