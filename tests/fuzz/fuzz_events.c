/* fuzz_events.c - arbitrary bytes as ring-buffer records, through the one
 * decoder (user/core/events.c) into every consumer at once: JSONL, CSV, the
 * metrics stream, the run statistics, the process table, top's model and
 * the Chrome writer. ASan proves no consumer reads past a record that
 * passed the decoder's checks; FUZZ_CHECK that none reaches a consumer
 * unless it passed them.
 *
 * The input is a sequence of records, each [type][length][bytes]: a record
 * of `length` bytes (in a buffer of exactly that size) whose header type is
 * `type` when it has room for it, filled with the bytes that follow (zeros
 * past the input's end).
 * fuzz-sources: user/core/events.c user/core/userspans.c user/core/clock.c user/output/outbuf.c user/output/jsonl.c user/output/csv.c user/output/metrics.c user/output/chrome.c user/analysis/stats.c user/analysis/procs.c user/analysis/runstats.c user/top/topview.c user/top/topview_refresh.c user/top/topview_tree.c user/top/format.c user/analysis/rssattr.c
 * fuzz-cflags: -DSPANTRACE_USER_SPANS
 * fuzz-libs: -lm
 */
#include "fuzz_common.h"
#include "analysis/procs.h"
#include "analysis/runstats.h"
#include "core/events.h"
#include "output/chrome.h"
#include "output/csv.h"
#include "output/jsonl.h"
#include "output/metrics.h"
#include "top/topview.h"

/* Counts what reached the consumers, and checks that it was whole. */
static uint64_t seen;
static size_t current_size;

static int check_span(void *ctx, const struct span_event *e)
{
	FUZZ_CHECK(current_size >= sizeof(*e) && e->kind < SPAN_KIND_COUNT);
	seen++;
	return 0;
}

static int check_alloc(void *ctx, const struct alloc_event *e)
{
	FUZZ_CHECK(current_size >= sizeof(*e) && e->pool < POOL_COUNT);
	seen++;
	return 0;
}

static int check_kernel(void *ctx, const struct kernel_event *e)
{
	FUZZ_CHECK(current_size >= sizeof(*e) && e->kernel_id < KERNEL_COUNT);
	seen++;
	return 0;
}

static const struct event_handlers checks = {
	.span = check_span, .alloc = check_alloc, .free = check_alloc, .kernel = check_kernel,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outbuf jsonl, csv, metrics_out;
	struct proc_table procs = { .max = 16 };
	struct runstats stats;
	char err[256];
	struct metrics_stream *ms = metrics_new(&procs);
	struct topview *tv = topview_new(1000000000ull, 4, 0);
	struct chrome_writer *cw = chrome_open("/dev/null", 64, err, sizeof(err));
	struct csv_writer cv = { &csv, { 0, 0 }, &procs };

	if (!ms || !tv || !cw || runstats_init(&stats, &(struct slo){ 1000000, 100000 }) || ob_open(&jsonl, "/dev/null", err, sizeof(err)) ||
	    ob_open(&csv, "/dev/null", err, sizeof(err)) || ob_open(&metrics_out, "/dev/null", err, sizeof(err)))
		abort();
	struct event_sink sinks[] = {
		{ &checks, NULL }, { &proc_table_handlers, &procs }, { &runstats_handlers, &stats },
		{ &metrics_handlers, ms }, { &topview_handlers, tv }, { &chrome_handlers, cw },
		{ &jsonl_handlers, &jsonl }, { &csv_handlers, &cv },
	};
	size_t pos = 0;
	uint64_t passed = 0;

	while (pos + 2 <= size) {
		uint8_t type = data[pos], len = data[pos + 1];
		uint8_t *rec = malloc(len ? len : 1);
		size_t avail = size - pos - 2 < len ? size - pos - 2 : len;
		enum event_verdict v;

		if (!rec)
			abort();
		memset(rec, 0, len ? len : 1);
		memcpy(rec, data + pos + 2, avail);
		if (len >= sizeof(__u32))
			memcpy(rec, &(__u32){ type }, sizeof(__u32));
		current_size = len;
		event_dispatch(rec, len, sinks, sizeof(sinks) / sizeof(sinks[0]), &v);
		passed += v == EVENT_OK;
		free(rec);
		pos += 2 + avail;
	}
	topview_refresh(tv, 2000000000ull);
	FILE *devnull = fopen("/dev/null", "w");
	if (devnull) {
		topview_render_text(tv, devnull, 80);
		fclose(devnull);
	}
	metrics_write(ms, &metrics_out, 0, 1.0, passed, 0);
	chrome_close(cw, err, sizeof(err));
	ob_close(&jsonl);
	ob_close(&csv);
	ob_close(&metrics_out);
	free(jsonl.path);
	free(csv.path);
	free(metrics_out.path);
	topview_free(tv);
	metrics_free(ms);
	runstats_free(&stats);
	proc_table_free(&procs);
	return 0;
}
