/* topview.h - the model and text rendering of `spantrace top`.
 *
 * Three layers, so the model is testable without BPF or a terminal:
 *   1. ingest:  topview_handlers, a sink of the session (core/events.h), or
 *               topview_on_*() directly; calls must not run concurrently
 *               with each other or with 2/3;
 *   2. refresh: topview_refresh(tv, now) turns windows into the numbers on
 *               screen (skipped while paused, so the screen freezes while
 *               events keep being counted);
 *   3. render:  topview_render_text() for batch mode (-b, no tty), or the
 *               line formatters the curses screen draws (top/screen.h).
 * commands/top.c runs them from the one run loop: a frame per tick.
 *
 * Every time is CLOCK_MONOTONIC ns (bpf_ktime_get_ns' clock). A span counts
 * in the window at its end (ts_ns + dur_ns); an OpenCL kernel at its batch's
 * host time, with its device duration end_ns - start_ns.
 *
 * Columns: COUNT = events since start (never reset), RATE/s = events per
 * second over the window, LAST = the latest duration, MEAN/P50/P95/P99/MAX
 * over the window (the one histogram, stats.h), %FWD = the row's summed time in
 * the window over the `forward` rows' summed time in the window. Rates
 * divide by the window's time, cut to the time since start or reset.
 * Header tok/s: "now" = tokens in the window over the window's time since the
 * first token began; "avg" = all tokens over first token begin .. last token
 * end (what the engine reports as its tok/s for a single run). */
#ifndef SPANTRACE_TOPVIEW_H
#define SPANTRACE_TOPVIEW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <linux/types.h>
#include "core/events.h"
#include "spantrace.h"

#define TOPVIEW_DEFAULT_SLOTS 10
#define TOPVIEW_MAX_LAYERS 256  /* larger layer numbers are counted as bad */
#define TOPVIEW_MAX_PIDS 16     /* pids tracked for the header and RSS */
#define TOPVIEW_LINE_MAX 512    /* longest formatted line, NUL included */

struct topview;

/* A window of nslots slots of refresh_ns each (TOPVIEW_DEFAULT_SLOTS slots
 * of the refresh interval: a 1 s refresh shows the last ~10 s). NULL on
 * allocation failure or zero arguments. */
struct topview *topview_new(uint64_t refresh_ns, unsigned nslots, uint64_t start_ns);
void topview_free(struct topview *tv);

/* Header facts; strings are copied. level: "coarse" or "detail". */
int topview_set_target(struct topview *tv, const char *binary, const char *level);
/* Sum of counters.dropped[] over types and CPUs; non-zero is flagged. */
void topview_set_drops(struct topview *tv, uint64_t dropped);
/* Records the session's decoder rejected; shown among the bad events. */
void topview_set_invalid(struct topview *tv, uint64_t invalid);
/* --http is traced, with the socket's requests in flight now. */
void topview_set_http(struct topview *tv, int traced, uint64_t in_flight);
/* Say the traced program has gone (shown in the header). */
void topview_set_ended(struct topview *tv, int ended);

/* ---- 1. ingest ---- */
void topview_on_span(struct topview *tv, const struct span_event *ev);
void topview_on_token(struct topview *tv, const struct token_event *ev);
void topview_on_request(struct topview *tv, const struct request_event *ev);
void topview_on_kernel(struct topview *tv, const struct kernel_event *ev);
void topview_on_alloc(struct topview *tv, const struct alloc_event *ev);
void topview_on_free(struct topview *tv, const struct alloc_event *ev);
void topview_on_kv(struct topview *tv, const struct kv_event *ev);
/* Request level: the rows ttft, itl, queue and step, and the requests pane
 * (running/waiting, KV, the last step's batch, the oldest requests in flight). */
void topview_on_emit(struct topview *tv, const struct emit_event *ev);
void topview_on_step(struct topview *tv, const struct step_event *ev);
void topview_on_http(struct topview *tv, const struct http_event *ev);
void topview_on_req_state(struct topview *tv, const struct req_state_event *ev);
/* The session's sink: every record type; ctx is the struct topview. */
extern const struct event_handlers topview_handlers;
/* One record through the decoder; one it rejects is counted as a bad
 * event. Always returns 0. */
int topview_on_record(void *tv, const void *data, size_t size);

/* Reads /proc/PID/statm of every pid seen; the header shows the summed RSS.
 * Returns how many pids could not be read (gone). */
int topview_poll_proc(struct topview *tv);
/* RSS of one process in bytes from /proc/PID/statm; -1 if unreadable. */
int topview_read_rss(__u32 pid, uint64_t *bytes);

/* ---- 2. refresh ---- */
void topview_refresh(struct topview *tv, uint64_t now_ns);

/* ---- keys (pure: only view state changes) ----
 * q quit; Up/Down or k/j move, PgUp/PgDn, Home/End (g/G); Enter or e expand
 * or collapse the selected row; l split the layer aggregate into layer N rows
 * (or merge them back); s cycle the sort column (S back); p or space pause;
 * r reset the windows; h or ? help (any key closes it). ch is a curses key
 * code (KEY_UP, ...) or a character. */
enum topview_key_result {
	TOPVIEW_KEY_IGNORED = 0,
	TOPVIEW_KEY_REDRAW,
	TOPVIEW_KEY_QUIT,
};
enum topview_key_result topview_key(struct topview *tv, int ch);

/* ---- rows: the same lines both renderers draw ---- */
enum topview_sort {
	TOPVIEW_SORT_TREE = 0, /* natural order */
	TOPVIEW_SORT_COUNT,
	TOPVIEW_SORT_RATE,
	TOPVIEW_SORT_MEAN,
	TOPVIEW_SORT_P50,
	TOPVIEW_SORT_P95,
	TOPVIEW_SORT_P99,
	TOPVIEW_SORT_MAX,
	TOPVIEW_SORT_SHARE,
	TOPVIEW_SORT_COUNT_,   /* number of sort modes */
};

/* Numbers of one visible row after the last refresh. */
struct topview_row {
	const char *name;      /* e.g. "forward", "layers (6)", "layer 3", "matvec" */
	int depth;             /* tree depth, 0 = top */
	int expandable, expanded;
	uint64_t count;        /* since start */
	uint64_t last_ns;
	uint64_t wcount;       /* in the window */
	double rate;           /* per second over the window */
	double mean_ns;
	uint64_t p50_ns, p95_ns, p99_ns, max_ns;
	double share;          /* of forward time in the window; < 0: none */
	/* device clock: the kernels the spans launched (0 = none in the window) */
	uint64_t dev_wcount, dev_p50_ns, dev_p99_ns;
};

size_t topview_nrows(const struct topview *tv);
/* 0 and *out filled for a visible row, -1 past the end. name stays valid
 * until the next refresh or key. */
int topview_row_at(const struct topview *tv, size_t i, struct topview_row *out);
/* Finds a visible row by its displayed name (trimmed); -1 if none. */
long topview_find_row(const struct topview *tv, const char *name);
size_t topview_selected(const struct topview *tv);
enum topview_sort topview_sort_column(const struct topview *tv);
int topview_paused(const struct topview *tv);
int topview_help_shown(const struct topview *tv);
/* Rows the screen shows at once (curses sets it; PgUp/PgDn move that many). */
void topview_set_page(struct topview *tv, int rows);
/* The refresh interval (= one window slot). */
uint64_t topview_slot_ns(const struct topview *tv);

/* Formatted lines of `width` columns at most (no newline). Header line i,
 * 0 <= i < topview_header_count(); *alert is set when the line reports a
 * problem (drops, errors) and should stand out. */
int topview_header_count(const struct topview *tv);
void topview_format_header(const struct topview *tv, int i, char *buf, size_t size, int width, int *alert);
void topview_format_columns(const struct topview *tv, char *buf, size_t size, int width);
void topview_format_row(const struct topview *tv, size_t i, char *buf, size_t size, int width);
/* Help text lines (NULL-terminated). */
extern const char *const topview_help_lines[];

/* ---- 3. render ---- */
/* The whole view as plain text, like one frame of `top -b`. width 0: 80. */
int topview_render_text(const struct topview *tv, FILE *out, int width);

#endif
