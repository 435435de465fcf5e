/* test_chrome - writes a Chrome trace with the streaming writer, parses it
 * back with json-c and checks structure, per-thread nesting, counts, the
 * device clock mapping, escaping, truncation and O_NOFOLLOW. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "output/chrome.h"

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; \
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

#define PID 4242u
#define LAYERS 3
#define OPS 3
#define TOKENS 4

static struct span_event span(__u32 tid, __u64 ts, __u64 dur, __u32 kind, int layer, __u32 depth)
{
	struct span_event e = { .h = { .type = EV_SPAN, .pid = PID, .tid = tid, .ts_ns = ts },
				.dur_ns = dur, .kind = kind, .layer = layer, .depth = depth,
				.req = 7, .pos = 1, .ncounters = 2, .counters = { 111, 222 } };
	return e;
}

/* One forward pass as the kernel emits it: every span at its end, so the
 * children come before their parents. The first child of each span begins
 * at the same nanosecond as its parent (the tie the writer must order). */
static int emit_forward(struct chrome_writer *cw, __u32 tid, __u64 t0, int *count)
{
	__u64 layer_len = 1000, op_len = 300;
	for (int l = 0; l < LAYERS; l++) {
		__u64 lt = t0 + (__u64)l * layer_len;
		for (int o = 0; o < OPS; o++) {
			struct span_event op = span(tid, lt + (__u64)o * op_len, op_len - 1,
						    SPAN_QKV + (unsigned)o, l, 2);
			if (chrome_span(cw, &op))
				return -1;
			(*count)++;
		}
		struct span_event ly = span(tid, lt, layer_len - 1, SPAN_LAYER, l, 1);
		if (chrome_span(cw, &ly))
			return -1;
		(*count)++;
	}
	struct span_event fw = span(tid, t0, LAYERS * layer_len + 1, SPAN_FORWARD, LAYER_NONE, 0);
	(*count)++;
	return chrome_span(cw, &fw);
}

static long long to_ns(json_object *o)
{
	return llround(json_object_get_double(o) * 1000.0);
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;
	json_object_object_get_ex(o, key, &v);
	return v;
}

/* Every X event on a thread is inside the enclosing open one or after it. */
static void check_nesting(json_object *events, __u32 tid, int expect)
{
	long long stack_end[64];
	int depth = 0, seen = 0;
	long long last_ts = -1;
	size_t n = json_object_array_length(events);
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(events, i);
		if (strcmp(json_object_get_string(get(e, "ph")), "X") ||
		    (__u32)json_object_get_int(get(e, "tid")) != tid)
			continue;
		long long ts = to_ns(get(e, "ts")), end = ts + to_ns(get(e, "dur"));
		CHECK(ts >= last_ts, "tid %u: events out of begin order", tid);
		last_ts = ts;
		while (depth > 0 && ts >= stack_end[depth - 1])
			depth--;
		if (depth > 0)
			CHECK(end <= stack_end[depth - 1], "tid %u: event at %lld overlaps its parent", tid, ts);
		CHECK(depth == json_object_get_int(get(get(e, "args"), "depth")),
		      "tid %u: nesting depth %d but span depth %d", tid, depth,
		      json_object_get_int(get(get(e, "args"), "depth")));
		if (depth < 64)
			stack_end[depth++] = end;
		seen++;
	}
	CHECK(seen == expect, "tid %u: %d spans, expected %d", tid, seen, expect);
}

static void test_full(const char *dir)
{
	char path[512], err[256];
	snprintf(path, sizeof(path), "%s/trace.json", dir);
	struct chrome_writer *cw = chrome_open(path, 0, err, sizeof(err));
	CHECK(cw, "open: %s", err);
	if (!cw)
		return;
	static const char *const names[] = { "task-clock", "page-faults" };
	chrome_set_counter_names(cw, names, 2);
	chrome_set_device_offset(cw, 5000);
	CHECK(chrome_add_meta(cw, "command", "infer \"quoted\"\n") == 0, "meta");

	int spans_a = 0, spans_b = 0;
	for (int t = 0; t < TOKENS; t++) {
		CHECK(emit_forward(cw, 100, 1000000 + (__u64)t * 10000, &spans_a) == 0, "span a");
		CHECK(emit_forward(cw, 101, 1000500 + (__u64)t * 10000, &spans_b) == 0, "span b");
		struct token_event tok = { .h = { .type = EV_TOKEN, .pid = PID, .tid = 100,
						  .ts_ns = 1000000 + (__u64)t * 10000 },
					   .dur_ns = 4000, .pos = (__u32)t, .token_out = 9 };
		CHECK(chrome_token(cw, &tok) == 0, "token");
		struct kernel_event k = { .h = { .type = EV_KERNEL, .pid = PID, .tid = 100 },
					  .kernel_id = KERNEL_MATVEC, .queue = 0, .layer = 1,
					  .start_ns = 995000 + (__u64)t * 10000,
					  .end_ns = 995700 + (__u64)t * 10000 };
		CHECK(chrome_kernel(cw, &k) == 0, "kernel");
		struct kv_event kv = { .h = { .type = EV_KV, .pid = PID, .ts_ns = 1000001 },
				       .used_bytes = 4096u * (unsigned)(t + 1) };
		CHECK(chrome_write_record(cw, &kv, sizeof(kv)) == 0, "kv record");
		CHECK(chrome_write_record(cw, &kv, sizeof(kv) - 1) == -1, "short record accepted");
	}
	struct alloc_event al = { .h = { .type = EV_ALLOC, .pid = PID, .ts_ns = 999999 },
				  .live_bytes = 12345, .pool = POOL_ACTIVATIONS };
	CHECK(chrome_alloc(cw, &al) == 0, "alloc");
	struct alloc_event unknown_free = al;
	unknown_free.h.type = EV_FREE;
	unknown_free.unknown = 1;
	CHECK(chrome_write_record(cw, &unknown_free, sizeof(unknown_free)) == 0, "unknown free");
	uint64_t written = chrome_events_written(cw);
	CHECK(chrome_close(cw, err, sizeof(err)) == 0, "close: %s", err);

	struct stat st;
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640, "mode %o", st.st_mode & 0777);

	json_object *root = json_object_from_file(path);
	CHECK(root, "trace does not parse as JSON");
	if (!root)
		return;
	json_object *events = get(root, "traceEvents");
	CHECK(events && json_object_is_type(events, json_type_array), "no traceEvents array");
	CHECK(!strcmp(json_object_get_string(get(root, "displayTimeUnit")), "ns"), "displayTimeUnit");
	json_object *other = get(root, "otherData");
	CHECK(json_object_get_int(get(other, "truncated")) == 0, "truncated != 0");
	CHECK(!strcmp(json_object_get_string(get(other, "command")), "infer \"quoted\"\n"), "meta escaping");

	int x_span = 0, x_kernel = 0, inst = 0, ctr = 0, meta = 0, queue_named = 0;
	size_t n = json_object_array_length(events);
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(events, i);
		const char *ph = json_object_get_string(get(e, "ph"));
		const char *cat = get(e, "cat") ? json_object_get_string(get(e, "cat")) : "";
		if (!strcmp(ph, "X") && !strcmp(cat, "span")) {
			x_span++;
			json_object *c = get(get(e, "args"), "counters");
			CHECK(c && json_object_get_int(get(c, "page-faults")) == 222, "span counters");
		} else if (!strcmp(ph, "X") && !strcmp(cat, "opencl")) {
			x_kernel++;
			CHECK(json_object_get_int(get(e, "tid")) == (int)CHROME_QUEUE_TID_BASE, "queue tid");
			long long ts = to_ns(get(e, "ts"));
			CHECK((ts - 1000000) % 10000 == 0, "kernel ts %lld not start+offset", ts);
			CHECK(to_ns(get(e, "dur")) == 700, "kernel dur");
		} else if (!strcmp(ph, "i")) {
			inst++;
			CHECK((to_ns(get(e, "ts")) - 1004000) % 10000 == 0, "token at its end");
		} else if (!strcmp(ph, "C")) {
			ctr++;
		} else if (!strcmp(ph, "M")) {
			meta++;
			if (!strcmp(json_object_get_string(get(get(e, "args"), "name")), "OpenCL queue 0 (device clock)"))
				queue_named++;
		}
	}
	CHECK(x_span == spans_a + spans_b, "%d span events, expected %d", x_span, spans_a + spans_b);
	CHECK(x_kernel == TOKENS, "%d kernel events", x_kernel);
	CHECK(inst == TOKENS, "%d token events", inst);
	CHECK(ctr == TOKENS + 1, "%d counter events", ctr);
	CHECK(queue_named == 1, "queue track named %d times", queue_named);
	CHECK(meta == 4, "%d metadata events (process, 2 threads, queue)", meta);
	CHECK((uint64_t)json_object_get_int64(get(other, "events")) == written &&
	      written == (uint64_t)(n - (size_t)meta), "otherData.events");
	check_nesting(events, 100, spans_a);
	check_nesting(events, 101, spans_b);
	json_object_put(root);
}

static void test_truncation(const char *dir)
{
	char path[512], err[256];
	snprintf(path, sizeof(path), "%s/small.json", dir);
	struct chrome_writer *cw = chrome_open(path, 10, err, sizeof(err));
	CHECK(cw, "open: %s", err);
	if (!cw)
		return;
	for (int i = 0; i < 50; i++) {
		struct span_event e = span(100, 1000 + (__u64)i * 10, 5, SPAN_FORWARD, LAYER_NONE, 0);
		chrome_span(cw, &e);
	}
	CHECK(chrome_events_truncated(cw) == 40, "truncated %llu",
	      (unsigned long long)chrome_events_truncated(cw));
	CHECK(chrome_close(cw, err, sizeof(err)) == 0, "close: %s", err);
	json_object *root = json_object_from_file(path);
	CHECK(root, "truncated trace does not parse");
	if (!root)
		return;
	json_object *events = get(root, "traceEvents");
	int x = 0;
	for (size_t i = 0; i < json_object_array_length(events); i++)
		x += !strcmp(json_object_get_string(get(json_object_array_get_idx(events, i), "ph")), "X");
	CHECK(x == 10, "%d events kept, expected 10", x);
	CHECK(json_object_get_int(get(get(root, "otherData"), "truncated")) == 40, "otherData.truncated");
	json_object_put(root);
}

static void test_nofollow(const char *dir)
{
	char target[512], link[512], err[256];
	snprintf(target, sizeof(target), "%s/target", dir);
	snprintf(link, sizeof(link), "%s/link.json", dir);
	FILE *f = fopen(target, "w");
	if (f)
		fclose(f);
	CHECK(symlink(target, link) == 0, "symlink");
	struct chrome_writer *cw = chrome_open(link, 0, err, sizeof(err));
	CHECK(!cw && strstr(err, "link.json"), "opened through a symlink");
	if (cw)
		chrome_close(cw, err, sizeof(err));
}

static void test_raw_offset(void)
{
	/* MONOTONIC and MONOTONIC_RAW only drift apart by NTP slew: the
	 * offset is stable between two measurements. */
	int64_t a = clock_raw_to_mono_ns(), b = clock_raw_to_mono_ns();
	CHECK(llabs(a - b) < 100000, "raw offset unstable: %lld vs %lld", (long long)a, (long long)b);
}

int main(void)
{
	char dir[] = "/tmp/test_chrome.XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	umask(022);
	test_full(dir);
	test_truncation(dir);
	test_nofollow(dir);
	test_raw_offset();
	static const char *const files[] = { "trace.json", "small.json", "link.json", "target" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char file[600];
		snprintf(file, sizeof(file), "%s/%s", dir, files[i]);
		unlink(file);
	}
	rmdir(dir);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("test_chrome: all checks passed\n");
	return 0;
}
