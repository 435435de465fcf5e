/* topview_curses.c - the run loops of `spantrace top`: the interactive
 * curses screen and batch mode. Both draw the lines topview.c formats. */
#include "top/topview.h"

#include <curses.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

struct saved_signals {
	struct sigaction intr, term;
};

/* No SA_RESTART: a blocked poll returns EINTR and the loop sees the flag. */
static void catch_stop_signals(struct saved_signals *saved)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	stop_requested = 0;
	sigaction(SIGINT, &sa, &saved->intr);
	sigaction(SIGTERM, &sa, &saved->term);
}

static void restore_signals(const struct saved_signals *saved)
{
	sigaction(SIGINT, &saved->intr, NULL);
	sigaction(SIGTERM, &saved->term, NULL);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Poll timeout until `due`, at most cap_ms so keys stay responsive. */
static int ms_until(uint64_t due, uint64_t now, int cap_ms)
{
	if (due <= now)
		return 0;
	uint64_t ms = (due - now + 999999) / 1000000;
	return ms < (uint64_t)cap_ms ? (int)ms : cap_ms;
}

/* A poll that has reported the end is not called again; time still passes. */
static int poll_events(struct topview *tv, topview_poll_fn poll, void *ctx, int *ended, int timeout_ms)
{
	if (*ended) {
		struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		return 0;
	}
	int rc = poll(ctx, timeout_ms);
	if (rc == -EINTR)
		return 0;
	if (rc < 0)
		return rc;
	if (rc == 1) {
		*ended = 1;
		topview_set_ended(tv, 1);
	}
	return 0;
}

/* ---- batch ---- */

static int batch_frame(struct topview *tv, FILE *out, int width)
{
	uint64_t now = mono_ns();
	topview_poll_proc(tv);
	topview_refresh(tv, now);
	if (topview_render_text(tv, out, width) != 0)
		return -EIO;
	fputc('\n', out);
	return fflush(out) == 0 ? 0 : -EIO;
}

int topview_run_batch(struct topview *tv, FILE *out, topview_poll_fn poll, void *ctx,
		      int iterations, int width)
{
	struct saved_signals saved;
	catch_stop_signals(&saved);
	uint64_t interval = topview_slot_ns(tv);
	uint64_t due = mono_ns() + interval;
	int ended = 0, frames = 0, rc = 0;
	while (!stop_requested) {
		uint64_t now = mono_ns();
		if (now < due && !ended) {
			rc = poll_events(tv, poll, ctx, &ended, ms_until(due, now, 1000));
			if (rc < 0)
				break;
			continue;
		}
		if ((rc = batch_frame(tv, out, width)) < 0)
			break;
		due += interval;
		if (due < now)
			due = now + interval; /* fell behind: don't burst frames */
		if ((iterations > 0 && ++frames >= iterations) || ended)
			break;
	}
	if (stop_requested && rc == 0)
		rc = batch_frame(tv, out, width); /* the final numbers on ^C */
	restore_signals(&saved);
	return rc;
}

/* ---- curses ---- */

enum { PAIR_ALERT = 1 };

struct screen {
	int top;  /* first table row drawn (scroll offset) */
	int has_color;
	FILE *keys; /* /dev/tty when stdin is not the terminal, else NULL */
};

static void draw_help(void)
{
	int n = 0, w = 0;
	for (; topview_help_lines[n]; n++) {
		int len = (int)strlen(topview_help_lines[n]);
		w = len > w ? len : w;
	}
	int h = n + 2, wide = w + 4;
	if (h > LINES)
		h = LINES;
	if (wide > COLS)
		wide = COLS;
	int y0 = (LINES - h) / 2, x0 = (COLS - wide) / 2;
	for (int y = 0; y < h; y++) {
		move(y0 + y, x0);
		for (int x = 0; x < wide; x++)
			addch(y == 0 || y == h - 1 ? '-' : x == 0 || x == wide - 1 ? '|' : ' ');
	}
	for (int i = 0; i < n && i + 1 < h - 1; i++)
		mvaddnstr(y0 + 1 + i, x0 + 2, topview_help_lines[i], wide - 4);
}

static void draw(struct topview *tv, struct screen *scr)
{
	char line[TOPVIEW_LINE_MAX];
	int width = COLS, alert, y = 0;
	erase();
	int nhead = topview_header_count(tv);
	for (int i = 0; i < nhead && y < LINES; i++, y++) {
		topview_format_header(tv, i, line, sizeof(line), width, &alert);
		attr_t a = alert ? (A_BOLD | (scr->has_color ? COLOR_PAIR(PAIR_ALERT) : A_REVERSE)) : A_NORMAL;
		attron(a);
		mvaddnstr(y, 0, line, width);
		attroff(a);
	}
	if (y < LINES) {
		topview_format_columns(tv, line, sizeof(line), width);
		attron(A_REVERSE);
		mvaddnstr(y, 0, line, width);
		for (int x = (int)strlen(line); x < width; x++)
			addch(' ');
		attroff(A_REVERSE);
		y++;
	}
	int rows = LINES - y - 1; /* the last line is the status line */
	if (rows < 1)
		rows = 1;
	topview_set_page(tv, rows);
	int sel = (int)topview_selected(tv), n = (int)topview_nrows(tv);
	if (sel < scr->top)
		scr->top = sel;
	if (sel >= scr->top + rows)
		scr->top = sel - rows + 1;
	if (scr->top > n - rows)
		scr->top = n - rows > 0 ? n - rows : 0;
	if (n == 0 && y < LINES)
		mvaddnstr(y, 0, "(no spans yet)", width);
	for (int i = scr->top; i < n && y < LINES - 1; i++, y++) {
		topview_format_row(tv, (size_t)i, line, sizeof(line), width);
		if (i == sel)
			attron(A_REVERSE);
		mvaddnstr(y, 0, line, width);
		if (i == sel) {
			for (int x = (int)strlen(line); x < width; x++)
				addch(' ');
			attroff(A_REVERSE);
		}
	}
	static const char *const sort_names[TOPVIEW_SORT_COUNT_] = {
		"tree", "count", "rate", "mean", "p50", "p95", "p99", "max", "%fwd",
	};
	snprintf(line, sizeof(line), "q quit  h help  Enter expand  l layers  s sort:%s  p %s  r reset",
		 sort_names[topview_sort_column(tv)], topview_paused(tv) ? "resume" : "pause");
	attron(A_DIM);
	mvaddnstr(LINES - 1, 0, line, width - 1); /* not the last cell: no scroll */
	attroff(A_DIM);
	if (topview_help_shown(tv))
		draw_help();
	refresh();
}

static SCREEN *screen_open(struct screen *scr)
{
	/* Keys come from the terminal even when stdin is redirected (a traced
	 * command may be reading it). */
	scr->keys = isatty(STDIN_FILENO) ? NULL : fopen("/dev/tty", "re");
	/* newterm, unlike initscr, reports failure instead of exiting. */
	SCREEN *s = newterm(NULL, stdout, scr->keys ? scr->keys : stdin);
	if (!s) {
		if (scr->keys)
			fclose(scr->keys);
		return NULL;
	}
	set_term(s);
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	curs_set(0);
	scr->top = 0;
	scr->has_color = has_colors();
	if (scr->has_color) {
		start_color();
		use_default_colors();
		init_pair(PAIR_ALERT, COLOR_RED, -1);
	}
	return s;
}

int topview_run_curses(struct topview *tv, topview_poll_fn poll, void *ctx)
{
	struct screen scr;
	struct saved_signals saved;
	SCREEN *s = screen_open(&scr);
	if (!s)
		return -1;
	catch_stop_signals(&saved);
	uint64_t interval = topview_slot_ns(tv);
	uint64_t due = mono_ns();
	int ended = 0, rc = 0, quit = 0;
	while (!quit && !stop_requested) {
		uint64_t now = mono_ns();
		if (now >= due) {
			topview_poll_proc(tv);
			topview_refresh(tv, now);
			draw(tv, &scr);
			due += interval;
			if (due < now)
				due = now + interval;
		}
		rc = poll_events(tv, poll, ctx, &ended, ms_until(due, mono_ns(), 50));
		if (rc < 0)
			break;
		int ch, redraw = 0;
		while ((ch = getch()) != ERR) {
			enum topview_key_result k = topview_key(tv, ch);
			if (k == TOPVIEW_KEY_QUIT) {
				quit = 1;
				break;
			}
			redraw |= k == TOPVIEW_KEY_REDRAW;
		}
		if (redraw && !quit)
			draw(tv, &scr);
	}
	endwin();
	delscreen(s);
	if (scr.keys)
		fclose(scr.keys);
	restore_signals(&saved);
	return rc;
}
