/* test_perfev - event list parsing; per-CPU software counters that really
 * count (page faults of pages this test touches); hardware events dropped
 * with a warning where there is no PMU; installing into a PERF_EVENT_ARRAY
 * map with the documented layout; the sampling event's frequency bounds. */
#include <bpf/bpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "analysis/perfev.h"

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; \
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static void test_parse(void)
{
	const struct perf_event_desc *ev[PERF_COUNTERS_MAX];
	unsigned n;
	char err[512];
	CHECK(perfev_parse_list("task-clock,cycles", ev, PERF_COUNTERS_MAX, &n, err, sizeof(err)) == 0 &&
	      n == 2 && !strcmp(ev[1]->name, "cycles") && ev[1]->hardware, "parse two");
	CHECK(perfev_parse_list("task-clock,bogus", ev, PERF_COUNTERS_MAX, &n, err, sizeof(err)) == -1 &&
	      strstr(err, "unknown event 'bogus'") && strstr(err, "page-faults"), "unknown: %s", err);
	CHECK(perfev_parse_list("page-faults,page-faults", ev, PERF_COUNTERS_MAX, &n, err, sizeof(err)) == -1 &&
	      strstr(err, "twice"), "duplicate: %s", err);
	CHECK(perfev_parse_list("task-clock,,page-faults", ev, PERF_COUNTERS_MAX, &n, err, sizeof(err)) == -1 &&
	      strstr(err, "empty"), "empty: %s", err);
	CHECK(perfev_parse_list("task-clock,page-faults,cpu-clock,context-switches,cpu-migrations",
				ev, PERF_COUNTERS_MAX, &n, err, sizeof(err)) == -1 && strstr(err, "at most"),
	      "too many: %s", err);
	CHECK(perfev_scale(100, 200, 50) == 400 && perfev_scale(100, 200, 0) == 100 &&
	      perfev_scale(7, 10, 10) == 7, "scaling");
}

static void test_counters(void)
{
	struct perf_counters pc;
	char err[512];
	/* cycles is dropped here (no PMU in this VM) or kept on real hardware. */
	if (perfev_counters_open(&pc, "page-faults,cycles,context-switches", err, sizeof(err))) {
		CHECK(0, "open: %s", err);
		return;
	}
	CHECK(pc.ncounters == 3 || (pc.ncounters == 2 && !strcmp(pc.dropped, "cycles")),
	      "ncounters %u dropped '%s'", pc.ncounters, pc.dropped);
	CHECK(!strcmp(pc.names[0], "page-faults"), "names[0] %s", pc.names[0]);
	printf("counters: %u opened on %u CPUs, dropped '%s'\n", pc.ncounters, pc.ncpus, pc.dropped);

	__u64 before, after;
	CHECK(perfev_counters_read(&pc, 0, &before) == 0, "read");
	size_t pages = 2000, page = (size_t)sysconf(_SC_PAGESIZE);
	char *mem = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(mem != MAP_FAILED, "mmap");
	if (mem != MAP_FAILED) {
		/* One fault per page: no (m)THP folios, which THP=always would give
		 * (EINVAL: a kernel without THP, where faults are per page anyway). */
		CHECK(madvise(mem, pages * page, MADV_NOHUGEPAGE) == 0 || errno == EINVAL,
		      "madvise: %s", strerror(errno));
		for (size_t i = 0; i < pages; i++)
			mem[i * page] = 1;
		munmap(mem, pages * page);
	}
	CHECK(perfev_counters_read(&pc, 0, &after) == 0, "read");
	CHECK(after - before >= pages, "page-faults counted %llu, touched %zu pages",
	      (unsigned long long)(after - before), pages);

	/* A map just large enough takes the fds; one entry short is refused. */
	__u32 need = pc.ncpus * pc.ncounters;
	int map = bpf_map_create(BPF_MAP_TYPE_PERF_EVENT_ARRAY, "perf_counters", 4, 4, need, NULL);
	CHECK(map >= 0, "create map: %s", strerror(errno));
	if (map >= 0) {
		CHECK(perfev_counters_install(&pc, map, err, sizeof(err)) == 0, "install: %s", err);
		close(map);
	}
	map = bpf_map_create(BPF_MAP_TYPE_PERF_EVENT_ARRAY, "perf_small", 4, 4, need - 1, NULL);
	if (map >= 0) {
		CHECK(perfev_counters_install(&pc, map, err, sizeof(err)) == -1 &&
		      strstr(err, "PERF_EVENT_ARRAY"), "short map accepted");
		close(map);
	}
	perfev_counters_close(&pc);
	CHECK(perfev_counters_open(&pc, "nope", err, sizeof(err)) == -1 && strstr(err, "'nope'"),
	      "bad list: %s", err);
}

static void test_sampler(void)
{
	struct perf_sampler ps;
	char err[512];
	CHECK(perfev_sampler_open(&ps, 0, err, sizeof(err)) == -1 && strstr(err, "-F 0"), "hz 0");
	CHECK(perfev_sampler_open(&ps, 100000000, err, sizeof(err)) == -1, "hz too high");
	if (perfev_sampler_open(&ps, PERFEV_DEFAULT_HZ, err, sizeof(err))) {
		CHECK(0, "sampler: %s", err);
		return;
	}
	int opened = 0;
	for (unsigned c = 0; c < ps.ncpus; c++)
		opened += ps.fds[c] >= 0;
	CHECK(opened >= 1 && ps.hz == PERFEV_DEFAULT_HZ, "sampler fds %d", opened);
	perfev_sampler_close(&ps);
}

int main(void)
{
	test_parse();
	if (geteuid() != 0) {
		if (failures)
			return 1;
		printf("needs root (CAP_PERFMON) for CPU-wide perf events\n");
		return 77;
	}
	test_counters();
	test_sampler();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("test_perfev: all checks passed\n");
	return 0;
}
