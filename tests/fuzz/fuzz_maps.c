/* fuzz_maps.c - /proc/PID/maps text: the symbolizer's maps reader
 * (sym_load_maps_file, then lookups in what it kept) and the target
 * finder's line splitter (maps_path in user/core/target.c, static: included).
 * Paths in the input are opened only if they are regular files outside
 * /dev, /proc and /sys (see fuzz_safe_open.h).
 * fuzz-cflags: -DSPANTRACE_USER_SPANS
 * fuzz-sources: user/analysis/symbols.c user/core/stapsdt.c user/core/numparse.c
 * fuzz-libs: -lelf -Wl,--wrap=open
 */
#include "fuzz_common.h"
#include "fuzz_safe_open.h"
#include "../../user/core/target.c"
#include "analysis/symbols.h"

/* No such process: only the given file supplies the maps. */
#define FAKE_PID 999999999

static void check_lookup(struct symbolizer *s, uint64_t addr)
{
	char name[128];
	enum sym_result r;

	memset(name, 'x', sizeof(name));
	r = sym_user(s, FAKE_PID, addr, name, sizeof(name));
	FUZZ_CHECK(r == SYM_FOUND || r == SYM_FALLBACK || r == SYM_ERROR);
	FUZZ_CHECK(memchr(name, 0, sizeof(name)) != NULL && name[0] != '\0');
}

/* maps_path and parse_pid on each line; lookups at each line's start. */
static void walk_lines(struct symbolizer *s, char *text)
{
	char *save = NULL;

	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *end;
		uint64_t start = strtoull(line, &end, 16);
		char copy[512];
		const char *path;
		int deleted = -1;

		snprintf(copy, sizeof(copy), "%s", line);
		path = maps_path(copy, &deleted);
		FUZZ_CHECK(!path || deleted == 0 || deleted == 1);
		FUZZ_CHECK(!path || (path[0] == '/' && path >= copy && path < copy + sizeof(copy)));
		(void)parse_pid(line);
		check_lookup(s, start);
		check_lookup(s, start + 0x10);
		if (*end == '-')
			check_lookup(s, strtoull(end + 1, NULL, 16) - 1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], *text;
	struct symbolizer *s = sym_new();
	int fd = fuzz_memfd(data, size);

	FUZZ_CHECK(s != NULL);
	if (fd >= 0) {
		fuzz_fd_path(fd, path, sizeof(path));
		/* read with fopen, which is not wrapped: /proc/self/fd works */
		(void)sym_load_maps_file(s, FAKE_PID, path);
		close(fd);
	}
	text = fuzz_strdup(data, size);
	if (text)
		walk_lines(s, text);
	free(text);
	sym_free(s);
	return 0;
}
