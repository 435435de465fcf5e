/* fuzz_elf.c - ELF files from the target side: USDT notes and build id
 * (sdt_read), DT_NEEDED/RPATH/RUNPATH (sdt_find_provider_elf) and symbol
 * tables and program headers (the symbolizer, via a maps line naming the
 * file). Libraries named by the input are opened only if they are regular
 * files outside /dev, /proc and /sys (see fuzz_safe_open.h).
 * fuzz-cflags: -DSPANTRACE_USER_SPANS
 * fuzz-sources: user/core/stapsdt.c user/analysis/symbols.c
 * fuzz-libs: -lelf -Wl,--wrap=open
 */
#include "fuzz_common.h"
#include "fuzz_safe_open.h"
#include "core/stapsdt.h"
#include "analysis/symbols.h"

#define FAKE_PID 999999999

static char elf_path[PATH_MAX], maps_path[PATH_MAX];

/* A real file (not a memfd) so realpath and $ORIGIN work. */
static int write_file(const char *path, const void *data, size_t size)
{
	FILE *f = fopen(path, "we");
	int ok;

	if (!f)
		return -1;
	ok = fwrite(data, 1, size, f) == size;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static void check_notes(void)
{
	struct sdt_list l;
	char err[256];

	if (sdt_read(elf_path, &l, err, sizeof(err)) < 0) {
		FUZZ_CHECK(err[0] != '\0');
		return;
	}
	FUZZ_CHECK(strlen(l.build_id) <= 40);
	for (size_t i = 0; i < l.n; i++) {
		const struct sdt_probe *p = &l.probes[i];

		FUZZ_CHECK(memchr(p->provider, 0, sizeof(p->provider)));
		FUZZ_CHECK(memchr(p->name, 0, sizeof(p->name)));
		FUZZ_CHECK(memchr(p->args, 0, sizeof(p->args)));
	}
	sdt_free(&l);
}

static void check_provider(void)
{
	char out[PATH_MAX], err[256];

	out[0] = '\0';
	if (sdt_find_provider_elf(elf_path, "infer", out, sizeof(out), err, sizeof(err)) == 0)
		FUZZ_CHECK(out[0] != '\0');
	else
		FUZZ_CHECK(err[0] != '\0');
}

/* Maps the file at 0x400000 for its first 64 KiB and looks up addresses. */
static void check_symbols(void)
{
	char line[PATH_MAX + 64], name[128];
	struct symbolizer *s = sym_new();
	struct stat st;

	FUZZ_CHECK(s != NULL);
	if (stat(elf_path, &st) == 0) {
		snprintf(line, sizeof(line), "400000-410000 r-xp 00000000 00:01 %llu %s\n",
			 (unsigned long long)st.st_ino, elf_path);
		if (write_file(maps_path, line, strlen(line)) == 0 &&
		    sym_load_maps_file(s, FAKE_PID, maps_path) == 0) {
			for (uint64_t off = 0; off < 0x10000; off += 0x1000 - 0x10) {
				enum sym_result r = sym_user(s, FAKE_PID, 0x400000 + off, name, sizeof(name));

				FUZZ_CHECK(r == SYM_FOUND || r == SYM_FALLBACK);
				FUZZ_CHECK(memchr(name, 0, sizeof(name)) && name[0]);
			}
		}
	}
	sym_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!elf_path[0]) {
		/* run.sh points TMPDIR into the build dir, where a crash's leftovers
		 * may stay; not /dev/shm: fuzz_safe_open.h refuses all of /dev */
		const char *dir = getenv("TMPDIR");

		if (!dir || !*dir)
			dir = "/tmp";
		snprintf(elf_path, sizeof(elf_path), "%s/fuzz-elf-%d.so", dir, (int)getpid());
		snprintf(maps_path, sizeof(maps_path), "%s/fuzz-elf-%d.maps", dir, (int)getpid());
	}
	if (write_file(elf_path, data, size) < 0)
		return 0;
	check_notes();
	check_provider();
	check_symbols();
	unlink(elf_path);
	unlink(maps_path);
	return 0;
}
