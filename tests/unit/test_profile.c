/* test_profile - span-tagged samples become symbolized folded stacks (user
 * frames of this process, a kernel frame when kallsyms is readable), and
 * per-span counter deltas become totals and means that leave spans without
 * a valid delta out of the mean. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/profile.h"

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; \
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* Loops over a volatile so each function is well over 8 bytes long. */
__attribute__((noinline)) int profile_test_inner(int x)
{
	volatile int acc = x;
	for (int i = 0; i < 4; i++)
		acc = acc * 5 + i;
	return acc;
}

/* Named as libgomp's own waits are (gomp_*): a pool worker's spin. */
__attribute__((noinline)) int gomp_test_wait(int x)
{
	volatile int acc = x;
	for (int i = 0; i < 4; i++)
		acc = acc * 3 + i;
	return acc;
}

__attribute__((noinline)) int profile_test_outer(int x)
{
	volatile int acc = x;
	for (int i = 0; i < 4; i++)
		acc += profile_test_inner(i);
	return acc;
}

static char *folded_text(const struct folded *fd)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	folded_write(fd, f);
	fclose(f);
	return buf;
}

static void test_samples(void)
{
	struct profile_samples ps;
	if (profile_samples_init(&ps)) {
		CHECK(0, "init");
		return;
	}
	CHECK(profile_test_outer(1) != 0, "keep the functions");
	__u64 user[4] = { (__u64)(uintptr_t)&profile_test_inner + 4,
			  (__u64)(uintptr_t)&profile_test_outer + 4, 0, 0xdead };
	__u64 kernel[2] = { 0, 0 };
	const char *kname = NULL;
	if (sym_kernel_available(ps.sym) && (kernel[0] = sym_kernel_lookup_name(ps.sym, "schedule")))
		kname = "schedule";
	kernel[0] += kname ? 4 : 0;
	CHECK(profile_samples_add(&ps, getpid(), "ffn", kernel, 2, user, 4, 2) == 0, "add");
	CHECK(profile_samples_add(&ps, getpid(), NULL, NULL, 0, user, 1, 1) == 0, "add no span");
	CHECK(profile_samples_add(&ps, getpid(), "ffn", NULL, 0, NULL, 0, 1) == 0, "add no stack");
	/* outside every span in a pool's wait: named so, not counted as no span */
	__u64 idle[2] = { (__u64)(uintptr_t)&gomp_test_wait + 4, 0 };
	CHECK(gomp_test_wait(1) != 0, "keep the function");
	CHECK(profile_samples_add(&ps, getpid(), NULL, NULL, 0, idle, 2, 3) == 0, "add pool idle");
	CHECK(ps.samples == 7 && ps.no_span == 1 && ps.pool_idle == 3 && ps.no_user_stack == 1,
	      "counts %llu %llu %llu %llu", (unsigned long long)ps.samples,
	      (unsigned long long)ps.no_span, (unsigned long long)ps.pool_idle,
	      (unsigned long long)ps.no_user_stack);
	char *text = folded_text(ps.folded);
	char want[256];
	snprintf(want, sizeof(want), "ffn;profile_test_outer;profile_test_inner%s%s 2\n",
		 kname ? ";schedule" : "", kname ? PROFILE_KERNEL_SUFFIX : "");
	CHECK(text && strstr(text, want), "folded:\n%s\nwant line: %s", text ? text : "", want);
	CHECK(text && strstr(text, "[no span];profile_test_inner 1\n"), "no-span line:\n%s", text ? text : "");
	CHECK(text && strstr(text, PROFILE_POOL_IDLE ";gomp_test_wait 3\n"), "pool idle line:\n%s",
	      text ? text : "");
	CHECK(text && strstr(text, "ffn 1\n"), "empty stack line:\n%s", text ? text : "");
	CHECK(text && !strstr(text, "dead"), "frames after a zero address must be ignored");
	if (!kname)
		printf("note: kallsyms unreadable here; kernel frame not checked\n");
	free(text);
	profile_samples_free(&ps);
}

static void test_counters(void)
{
	static const char *const names[] = { "task-clock", "page-faults" };
	struct profile_counters pc;
	profile_counters_init(&pc, names, 2);
	struct span_event ev = { .kind = SPAN_FFN, .ncounters = 2, .counters = { 10, 20 } };
	profile_counters_add(&pc, &ev);
	ev.counters[0] = 30;
	ev.counters[1] = 40;
	profile_counters_add(&pc, &ev);
	ev.ncounters = 0; /* migrated: no valid delta */
	ev.counters[0] = 1000000;
	profile_counters_add(&pc, &ev);
	ev.kind = SPAN_KIND_COUNT + 5;
	profile_counters_add(&pc, &ev);

	const struct span_counter_totals *t = &pc.kinds[SPAN_FFN];
	CHECK(t->spans == 3 && t->measured == 2 && t->sum[0] == 40 && t->sum[1] == 60,
	      "ffn totals spans=%llu measured=%llu", (unsigned long long)t->spans,
	      (unsigned long long)t->measured);
	json_object *j = profile_counters_json(&pc);
	json_object *ffn = NULL, *tc = NULL, *mean = NULL;
	CHECK(j && json_object_object_get_ex(j, "ffn", &ffn) &&
	      json_object_object_get_ex(ffn, "task-clock", &tc) &&
	      json_object_object_get_ex(tc, "mean", &mean) && json_object_get_double(mean) == 20.0,
	      "json: %s", j ? json_object_to_json_string(j) : "(null)");
	CHECK(j && json_object_object_length(j) == 1, "only spans seen are listed");
	json_object_put(j);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f) {
		profile_counters_write(&pc, f);
		fclose(f);
	}
	CHECK(buf && strstr(buf, "ffn") && strstr(buf, "30.0") && strstr(buf, "task-clock"),
	      "table:\n%s", buf ? buf : "");
	free(buf);
}

int main(void)
{
	test_samples();
	test_counters();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("test_profile: all checks passed\n");
	return 0;
}
