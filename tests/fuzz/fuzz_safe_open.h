/* fuzz_safe_open.h - for harnesses linked with -Wl,--wrap=open: the code
 * under test opens paths taken from fuzzed input (maps lines, DT_NEEDED,
 * RPATH), and as root opening some device files has side effects (a
 * watchdog arms on open, a tty or /proc/kmsg read blocks). Only regular
 * files outside /dev, /proc and /sys may be opened; the rest fail EACCES as
 * an unreadable file would, which the code under test must handle anyway. */
#ifndef FUZZ_SAFE_OPEN_H
#define FUZZ_SAFE_OPEN_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int __real_open(const char *path, int flags, ...);

static int fuzz_path_is_safe(const char *path)
{
	char real[PATH_MAX];
	struct stat st;

	if (!realpath(path, real) || stat(real, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	return strncmp(real, "/dev/", 5) && strncmp(real, "/proc/", 6) && strncmp(real, "/sys/", 5);
}

int __wrap_open(const char *path, int flags, ...)
{
	mode_t mode = 0;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;

		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if ((flags & O_ACCMODE) != O_RDONLY || !fuzz_path_is_safe(path)) {
		errno = EACCES;
		return -1;
	}
	return __real_open(path, flags, mode);
}

#endif
