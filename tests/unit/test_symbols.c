/* test_symbols - symbolizes addresses in this very process: its own
 * functions (PIE executable, .symtab), a libc function (shared object,
 * .dynsym), a function in a deleted copy of a library loaded from a path
 * with a space; a synthetic maps file with an overlong line; unknown
 * addresses; and a kernel symbol from /proc/kallsyms when readable. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/symbols.h"

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; \
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* Loops over a volatile so each function is well over 8 bytes long. */
__attribute__((noinline)) int symbols_test_exported(int x)
{
	volatile int acc = x;
	for (int i = 0; i < 4; i++)
		acc = acc * 3 + i;
	return acc;
}

__attribute__((noinline)) static int symbols_test_static(int x)
{
	volatile int acc = x;
	for (int i = 0; i < 4; i++)
		acc = acc ^ (symbols_test_exported(i) + 0x55);
	return acc;
}

static void expect_user(struct symbolizer *s, uint64_t addr, const char *want_substr, enum sym_result want)
{
	char name[256];
	enum sym_result r = sym_user(s, getpid(), addr, name, sizeof(name));
	CHECK(r == want && strstr(name, want_substr), "0x%llx -> %s (%d), want %s (%d)",
	      (unsigned long long)addr, name, r, want_substr, want);
}

static int copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char buf[65536];
	ssize_t n;
	int rc = in >= 0 && out >= 0 ? 0 : -1;
	while (rc == 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			rc = -1;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return rc;
}

/* dlopen a copy of libbz2 from "dir with space", delete it, symbolize. */
static void test_deleted_library(struct symbolizer *s, const char *dir)
{
	static const char *const candidates[] = {
		"/usr/lib/x86_64-linux-gnu/libbz2.so.1.0", "/lib/x86_64-linux-gnu/libbz2.so.1.0",
		"/usr/lib64/libbz2.so.1",
	};
	const char *src = NULL;
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]) && !src; i++)
		if (access(candidates[i], R_OK) == 0)
			src = candidates[i];
	if (!src) {
		printf("note: no libbz2 to copy; deleted-library case not run\n");
		return;
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/lib copy.so", dir);
	CHECK(copy_file(src, path) == 0, "copy %s", src);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	CHECK(h, "dlopen %s: %s", path, dlerror());
	if (!h)
		return;
	void *fn = dlsym(h, "BZ2_bzlibVersion");
	unlink(path);
	CHECK(fn, "dlsym BZ2_bzlibVersion");
	/* The mapping appeared after the first maps read: this is a miss
	 * that must re-read the maps once. */
	if (fn)
		expect_user(s, (uint64_t)(uintptr_t)fn + 2, "BZ2_bzlibVersion", SYM_FOUND);
	dlclose(h);
}

static void test_synthetic_maps(const char *dir)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/maps", dir);
	FILE *f = fopen(path, "w");
	if (!f) {
		CHECK(0, "create %s", path);
		return;
	}
	fputs("10000-20000 r--p 00000000 00:00 0 [heap]\n", f);
	fputs("20000-30000 r-xp 00000000 08:01 77 /nonexistent/", f);
	for (int i = 0; i < 10000; i++)
		fputc('x', f);
	fputs("\n30000-40000 r-xp 00001000 08:01 78 /nonexistent/dir with space/lib x.so (deleted)\n", f);
	fputs("40000-50000 r-xp 00000000 00:00 0 [vdso]\n", f);
	fputs("garbage line\n", f);
	fclose(f);

	struct symbolizer *s = sym_new();
	const pid_t fake = 0x7ffffff0;
	CHECK(s && sym_load_maps_file(s, fake, path) == 0, "load synthetic maps");
	char name[256];
	if (s) {
		CHECK(sym_user(s, fake, 0x30010, name, sizeof(name)) == SYM_FALLBACK &&
		      !strcmp(name, "lib x.so+0x1010"), "space path fallback: %s", name);
		CHECK(sym_user(s, fake, 0x40020, name, sizeof(name)) == SYM_FALLBACK &&
		      !strcmp(name, "[vdso]+0x20"), "vdso fallback: %s", name);
		CHECK(sym_user(s, fake, 0x25000, name, sizeof(name)) == SYM_FALLBACK &&
		      !strcmp(name, "[unknown]"), "overlong line must be skipped: %s", name);
		CHECK(sym_user(s, fake, 0x15000, name, sizeof(name)) == SYM_FALLBACK &&
		      !strcmp(name, "[unknown]"), "non-exec mapping: %s", name);
	}
	sym_free(s);
	unlink(path);
}

static void test_kernel(struct symbolizer *s)
{
	if (!sym_kernel_available(s)) {
		printf("note: /proc/kallsyms has no addresses here (not root or kptr_restrict); kernel case not run\n");
		return;
	}
	uint64_t addr = sym_kernel_lookup_name(s, "schedule");
	CHECK(addr != 0, "kallsyms has no 'schedule'");
	char name[256];
	if (addr)
		CHECK(sym_kernel(s, addr + 4, name, sizeof(name)) == SYM_FOUND &&
		      !strcmp(name, "schedule"), "schedule+4 -> %s", name);
	CHECK(sym_kernel(s, 16, name, sizeof(name)) == SYM_FALLBACK, "address 16 is no symbol");
}

int main(void)
{
	char dir[] = "/tmp/test symbols.XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	struct symbolizer *s = sym_new();
	if (!s)
		return 1;
	CHECK(sym_load_pid(s, getpid()) == 0, "read own maps");
	CHECK(symbols_test_static(2) != 2, "keep the static function");
	expect_user(s, (uint64_t)(uintptr_t)&symbols_test_exported + 5, "symbols_test_exported", SYM_FOUND);
	expect_user(s, (uint64_t)(uintptr_t)&symbols_test_static + 3, "symbols_test_static", SYM_FOUND);
	expect_user(s, (uint64_t)(uintptr_t)&main, "main", SYM_FOUND);
	expect_user(s, (uint64_t)(uintptr_t)&getpid + 1, "getpid", SYM_FOUND);
	expect_user(s, 16, "[unknown]", SYM_FALLBACK);

	/* Executable anonymous memory (a JIT's) has no file: region+offset,
	 * until the process writes /tmp/perf-PID.map naming it. */
	void *anon = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(anon != MAP_FAILED, "mmap an executable page");
	if (anon != MAP_FAILED) {
		char perf_map[64];
		FILE *fp;

		sym_load_pid(s, getpid());
		expect_user(s, (uint64_t)(uintptr_t)anon + 0x10, "[anon]+0x10", SYM_FALLBACK);
		snprintf(perf_map, sizeof(perf_map), "/tmp/perf-%d.map", (int)getpid());
		CHECK((fp = fopen(perf_map, "w")) != NULL, "write %s", perf_map);
		if (fp) {
			fprintf(fp, "not a map line\n%llx 20 LazyCompile:*work /app/x.js:3\n%llx 8 second\n",
				(unsigned long long)(uintptr_t)anon, (unsigned long long)(uintptr_t)anon + 0x40);
			fclose(fp);
			expect_user(s, (uint64_t)(uintptr_t)anon + 0x10, "LazyCompile:*work /app/x.js:3", SYM_FOUND);
			expect_user(s, (uint64_t)(uintptr_t)anon + 0x44, "second", SYM_FOUND);
			expect_user(s, (uint64_t)(uintptr_t)anon + 0x30, "[anon]+0x30", SYM_FALLBACK);
			unlink(perf_map);
		}
		munmap(anon, 4096);
	}
	/* C++ names come demangled (libstdc++'s own, mapped here) */
	void *dtor = dlsym(RTLD_DEFAULT, "_ZNSt9exceptionD1Ev");
	CHECK(dtor != NULL, "libstdc++'s std::exception::~exception() is linked in");
	if (dtor)
		expect_user(s, (uint64_t)(uintptr_t)dtor, "std::exception::~exception()", SYM_FOUND);
	test_deleted_library(s, dir);
	test_kernel(s);
	sym_free(s);
	test_synthetic_maps(dir);
	rmdir(dir);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("test_symbols: all checks passed\n");
	return 0;
}
