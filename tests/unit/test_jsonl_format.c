/* test_jsonl_format.c - the fast JSONL/CSV formatter against json-c: every
 * event type renders as one valid JSON object whose fields hold the struct's
 * values (including extremes: u64 max, negative layers), strings are escaped,
 * CSV rows have the header's 10 columns, and a failing write (/dev/full)
 * reports ENOSPC with the file name.
 * `test_jsonl_format --bench N` measures the exporter's events/s instead. */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "analysis/procs.h"
#include "core/events.h"
#include "output/csv.h"
#include "output/jsonl.h"
#include "output/outbuf.h"
#include "spantrace.h"

static int failures;

#define CHECK(cond, ...) do { \
	if (!(cond)) { failures++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, n + 1);
	if (buf && fread(buf, 1, n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* Renders one event to a temp file and parses the single line back. */
static json_object *render(const void *ev, size_t size, char *tmpl)
{
	struct outbuf ob;
	char err[256], *text;
	json_object *j;

	CHECK(ob_open(&ob, tmpl, err, sizeof(err)) == 0, "ob_open: %s", err);
	CHECK(jsonl_write_record(&ob, ev, size) == 0, "export failed");
	CHECK(ob_close(&ob) == 0, "close failed");
	free(ob.path);
	text = slurp(tmpl);
	CHECK(text && strchr(text, '\n') == text + strlen(text) - 1, "not exactly one line: %s", text ? text : "");
	j = text ? json_tokener_parse(text) : NULL;
	CHECK(j != NULL, "does not parse: %s", text ? text : "(null)");
	free(text);
	return j;
}

static uint64_t get_u64(json_object *j, const char *key)
{
	json_object *v;
	if (!json_object_object_get_ex(j, key, &v)) {
		failures++;
		fprintf(stderr, "FAIL: no key %s\n", key);
		return 0;
	}
	return json_object_get_uint64(v);
}

static const char *get_str(json_object *j, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(j, key, &v) ? json_object_get_string(v) : "";
}

static void test_span(char *path)
{
	struct span_event e = { .h = { EV_SPAN, 10, 11, 1, 123456789012345ull } };
	json_object *j, *v;

	e.dur_ns = UINT64_MAX;
	e.kind = SPAN_ATTENTION;
	e.layer = 3;
	e.depth = 2;
	e.parent_kind = SPAN_LAYER;
	e.parent_layer = 3;
	e.req = 7;
	e.pos = 42;
	e.flags = SPAN_F_MISMATCH;
	j = render(&e, sizeof(e), path);
	if (!j)
		return;
	CHECK(!strcmp(get_str(j, "type"), "span"), "type");
	CHECK(!strcmp(get_str(j, "name"), "attention"), "name");
	CHECK(!strcmp(get_str(j, "parent"), "layer"), "parent");
	CHECK(get_u64(j, "dur_ns") == UINT64_MAX, "u64 max survives");
	CHECK(get_u64(j, "ts_ns") == 123456789012345ull, "ts");
	CHECK(get_u64(j, "pos") == 42 && get_u64(j, "req") == 7 && get_u64(j, "depth") == 2, "context");
	CHECK(json_object_object_get_ex(j, "mismatch", &v) && json_object_get_boolean(v), "mismatch flag");
	json_object_put(j);

	/* outermost span: parent null, layer -1 */
	e.depth = 0;
	e.parent_kind = SPAN_KIND_COUNT;
	e.layer = LAYER_NONE;
	e.flags = 0;
	j = render(&e, sizeof(e), path);
	if (!j)
		return;
	CHECK(json_object_object_get_ex(j, "parent", &v) && v == NULL, "parent is null");
	CHECK(json_object_object_get_ex(j, "layer", &v) && json_object_get_int(v) == -1, "layer -1");
	json_object_put(j);
}

static void test_others(char *path)
{
	struct kernel_event k = { .h = { EV_KERNEL, 1, 2, 0, 5 } };
	struct alloc_event a = { .h = { EV_FREE, 1, 2, 0, 6 } };
	struct token_event t = { .h = { EV_TOKEN, 1, 2, 0, 7 } };
	json_object *j, *v;

	k.kernel_id = KERNEL_MATVEC;
	k.start_ns = 100;
	k.end_ns = 350;
	k.layer = -1;
	j = render(&k, sizeof(k), path);
	if (j) {
		CHECK(!strcmp(get_str(j, "name"), "matvec"), "kernel name");
		CHECK(get_u64(j, "dur_ns") == 250, "kernel dur");
		json_object_put(j);
	}
	a.pool = POOL_KV_CACHE;
	a.bytes = 4096;
	a.unknown = 1;
	j = render(&a, sizeof(a), path);
	if (j) {
		CHECK(!strcmp(get_str(j, "type"), "free") && !strcmp(get_str(j, "pool"), "kv_cache"), "free");
		CHECK(json_object_object_get_ex(j, "unknown", &v) && json_object_get_boolean(v), "unknown");
		json_object_put(j);
	}
	t.pos = 3;
	t.token_out = 31999;
	events_set_capture_tokens(0);   /* the default: no content */
	j = render(&t, sizeof(t), path);
	if (j) {
		CHECK(!json_object_object_get_ex(j, "token_out", &v) && !json_object_object_get_ex(j, "token_in", &v),
		      "a token id without --capture-tokens");
		json_object_put(j);
	}
	events_set_capture_tokens(1);
	j = render(&t, sizeof(t), path);
	if (j) {
		CHECK(get_u64(j, "token_out") == 31999, "token_out");
		json_object_put(j);
	}
}

/* ---- the reference: every field the writer emits is documented ---- */

/* The lines of the docs that describe record type `type`: its schema row
 * ("| `type`") or an example line ("\"type\":\"type\""). */
static char *doc_lines_of(const char *const *docs, size_t ndocs, const char *type)
{
	char row[64], example[64], *out = calloc(1, 1);
	size_t len = 0;

	snprintf(row, sizeof(row), "| `%s`", type);
	snprintf(example, sizeof(example), "\"type\":\"%s\"", type);
	for (size_t d = 0; out && d < ndocs; d++) {
		char *text = slurp(docs[d]), *line, *save = NULL;

		CHECK(text != NULL, "cannot read %s (run from the repository root)", docs[d]);
		for (line = text ? strtok_r(text, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
			char *grown;

			char *cell_end = strstr(line + 1, " |");   /* "| `alloc` / `free` |" */
			int in_first_cell = !strncmp(line, "| ", 2) && cell_end &&
					    strstr(line, row + 2) && strstr(line, row + 2) < cell_end;

			if (!in_first_cell && !strstr(line, example))
				continue;
			if (!(grown = realloc(out, len + strlen(line) + 2)))
				break;
			out = grown;
			len += (size_t)sprintf(out + len, "%s\n", line);
		}
		free(text);
	}
	return out;
}

/* key as a word of text: not inside a longer name */
static int has_word(const char *text, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = text; (p = strstr(p, key)); p += n) {
		int before = p > text && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'));
		int after = p[n] == '_' || (p[n] >= 'a' && p[n] <= 'z');

		if (!before && !after)
			return 1;
	}
	return 0;
}

/* Each record type the JSONL writer knows, zeroed but for its type (and
 * enough to show its optional fields), rendered: each field must be in its
 * type's row or example in docs/record.md, opencl.md or requests.md. The
 * header's fields (type, ts_ns, pid, tid, cpu) are documented once. */
static void test_documented(char *path)
{
	static const char *const docs[] = { "docs/record.md", "docs/opencl.md", "docs/requests.md" };
	static const char *const header[] = { "type", "ts_ns", "pid", "tid", "cpu" };
	union { struct event_header h; char raw[1024]; } ev;

	events_set_capture_tokens(1);
	for (unsigned type = 1; type < EV_TYPE_COUNT; type++) {
		size_t size = event_record_size(type);
		json_object *j;

		if (type == EV_SAMPLE || type == EV_DL_CHANGE || !size || size > sizeof(ev))
			continue;   /* the profiler's and the session's own: not JSONL */
		memset(&ev, 0, sizeof(ev));
		ev.h.type = type;
		/* what shows a type's optional fields */
		if (type == EV_HTTP) {
			((struct http_event *)&ev)->events = 3;
			((struct http_event *)&ev)->flags = HTTP_F_PATH_CUT;
			((struct http_event *)&ev)->req = 7;   /* joined (core/reqjoin.h) */
		}
		if (type == EV_REQUEST)
			((struct request_event *)&ev)->from = REQ_FROM_SOCKET;
		if (type == EV_ALLOC)
			((struct alloc_event *)&ev)->unknown = 2;   /* at_attach */
		if (type == EV_CL_WAIT)
			((struct cl_call_event *)&ev)->op = CL_OP_WAIT_EVENTS;
		if (type == EV_CL_TRANSFER)
			((struct cl_call_event *)&ev)->op = CL_OP_READ;
		if (type == EV_CL_BUILD)
			((struct cl_call_event *)&ev)->op = CL_OP_BUILD;
		if (!(j = render(&ev, size, path)))
			continue;
		char *doc = doc_lines_of(docs, sizeof(docs) / sizeof(docs[0]), event_type_name(type));
		CHECK(doc && *doc, "record type %s is in no doc's schema", event_type_name(type));
		json_object_object_foreach(j, key, val) {
			int common = 0;

			(void)val;
			for (size_t h = 0; h < sizeof(header) / sizeof(header[0]); h++)
				common |= !strcmp(key, header[h]);
			CHECK(common || (doc && has_word(doc, key)), "%s.%s is written but not documented",
			      event_type_name(type), key);
		}
		free(doc);
		json_object_put(j);
		unlink(path);
	}
}

static void test_escape(char *path)
{
	struct outbuf ob;
	char err[256], *text;
	json_object *j, *v;
	const char *nasty = "a\"b\\c\n\x01\x7f/é";

	CHECK(ob_open(&ob, path, err, sizeof(err)) == 0, "open");
	ob_begin(&ob);
	ob_lit(&ob, "{\"s\":");
	ob_jstr(&ob, nasty, 100);
	ob_lit(&ob, "}");
	ob_end(&ob);
	ob_close(&ob);
	free(ob.path);
	text = slurp(path);
	j = text ? json_tokener_parse(text) : NULL;
	CHECK(j && json_object_object_get_ex(j, "s", &v) && !strcmp(json_object_get_string(v), nasty),
	      "escaped string round-trips: %s", text ? text : "");
	json_object_put(j);
	free(text);
}

static void test_csv(char *path)
{
	struct span_event e = { .h = { EV_SPAN, 1, 77, 0, 1000 } };
	struct alloc_event a = { .h = { EV_ALLOC, 1, 77, 0, 900 } };
	struct proc_table procs = { 0 };
	struct event_sink memory = { &proc_table_handlers, &procs };
	struct outbuf ob;
	struct csv_writer w = { &ob, { 0, 0 }, &procs };
	struct event_sink csv = { &csv_handlers, &w };
	char err[256], *text;
	int commas = 0;

	/* the process has 5 MB live when the span ends */
	a.pool = POOL_WEIGHTS;
	a.bytes = a.live_bytes = 5000000;
	event_dispatch(&a, sizeof(a), &memory, 1, NULL);
	e.dur_ns = 1234567;
	e.kind = SPAN_QKV;
	e.layer = 2;
	e.pos = 9;
	CHECK(ob_open(&ob, path, err, sizeof(err)) == 0, "open");
	CHECK(event_dispatch(&e, sizeof(e), &csv, 1, NULL) == 0, "csv row");
	ob_close(&ob);
	free(ob.path);
	proc_table_free(&procs);
	text = slurp(path);
	for (char *p = text; p && *p; p++)
		commas += *p == ',';
	CHECK(commas == 9, "10 columns, got %d commas: %s", commas, text ? text : "");
	CHECK(text && strstr(text, ",cpu,77,1.234567,9,2,qkv,1,5.000,"), "row fields: %s", text ? text : "");
	free(text);
}

static void test_enospc(void)
{
	struct span_event e = { .h = { EV_SPAN, 1, 2, 0, 3 } };
	struct outbuf ob;
	char err[256], msg[512];
	int rc = 0;

	if (ob_open(&ob, "/dev/full", err, sizeof(err))) {
		printf("note: no /dev/full, ENOSPC case not run\n");
		return;
	}
	for (int i = 0; i < 100000 && rc == 0; i++)
		rc = jsonl_write_record(&ob, &e, sizeof(e));
	CHECK(ob_close(&ob) != 0, "close reports the error");
	CHECK(ob.error == ENOSPC, "ENOSPC, got %d", ob.error);
	ob_strerror(&ob, msg, sizeof(msg));
	CHECK(strstr(msg, "/dev/full") && strstr(msg, "No space left"), "message: %s", msg);
	free(ob.path);
}

static int bench(long n)
{
	struct span_event e = { .h = { EV_SPAN, 4242, 4243, 1, 1000000000000ull } };
	struct timespec a, b;
	struct outbuf ob;
	char err[256];
	double secs;

	e.dur_ns = 12345;
	e.kind = SPAN_FFN;
	e.layer = 4;
	e.depth = 2;
	e.parent_kind = SPAN_LAYER;
	e.parent_layer = 4;
	e.req = 3;
	if (ob_open(&ob, "/dev/null", err, sizeof(err)))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		e.h.ts_ns += 1000;
		e.pos = (uint32_t)i;
		if (jsonl_write_record(&ob, &e, sizeof(e)))
			return 1;
	}
	ob_close(&ob);
	clock_gettime(CLOCK_MONOTONIC, &b);
	secs = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	printf("exporter: %ld span events in %.3f s = %.2f M events/s (%.1f MB/s)\n", n, secs,
	       n / secs / 1e6, (double)ob.written / secs / 1e6);
	free(ob.path);
	return 0;
}

int main(int argc, char **argv)
{
	char path[] = "/tmp/test_jsonl_XXXXXX";
	int fd;

	if (argc == 3 && !strcmp(argv[1], "--bench"))
		return bench(strtol(argv[2], NULL, 10));
	fd = mkstemp(path);
	if (fd < 0)
		return 1;
	close(fd);
	unlink(path);
	test_span(path);
	unlink(path);
	test_others(path);
	unlink(path);
	test_escape(path);
	unlink(path);
	test_csv(path);
	unlink(path);
	test_enospc();
	test_documented(path);
	if (failures) {
		printf("%d failures\n", failures);
		return 1;
	}
	printf("jsonl/csv formatter: all checks passed\n");
	return 0;
}
