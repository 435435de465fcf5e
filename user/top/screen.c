/* screen.c - the interactive curses screen of `spantrace top` (see
 * screen.h): it draws the lines topview.c formats and feeds it the keys. */
#include "top/screen.h"

#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { PAIR_ALERT = 1 };

struct top_screen {
	SCREEN *term;
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

/* The header lines and the column titles; returns the next free line. */
static int draw_header(struct top_screen *scr, struct topview *tv, char *line, size_t size)
{
	int width = COLS, alert, y = 0, nhead = topview_header_count(tv);

	for (int i = 0; i < nhead && y < LINES; i++, y++) {
		topview_format_header(tv, i, line, size, width, &alert);
		attr_t a = alert ? (A_BOLD | (scr->has_color ? COLOR_PAIR(PAIR_ALERT) : A_REVERSE)) : A_NORMAL;
		attron(a);
		mvaddnstr(y, 0, line, width);
		attroff(a);
	}
	if (y < LINES) {
		topview_format_columns(tv, line, size, width);
		attron(A_REVERSE);
		mvaddnstr(y, 0, line, width);
		for (int x = (int)strlen(line); x < width; x++)
			addch(' ');
		attroff(A_REVERSE);
		y++;
	}
	return y;
}

/* The table from line y, scrolled so that the selection is on screen. */
static void draw_rows(struct top_screen *scr, struct topview *tv, int y, char *line, size_t size)
{
	int width = COLS, rows = LINES - y - 1; /* the last line is the status line */
	int sel = (int)topview_selected(tv), n = (int)topview_nrows(tv);

	if (rows < 1)
		rows = 1;
	topview_set_page(tv, rows);
	if (sel < scr->top)
		scr->top = sel;
	if (sel >= scr->top + rows)
		scr->top = sel - rows + 1;
	if (scr->top > n - rows)
		scr->top = n - rows > 0 ? n - rows : 0;
	if (n == 0 && y < LINES)
		mvaddnstr(y, 0, "(no spans yet)", width);
	for (int i = scr->top; i < n && y < LINES - 1; i++, y++) {
		topview_format_row(tv, (size_t)i, line, size, width);
		if (i == sel)
			attron(A_REVERSE);
		mvaddnstr(y, 0, line, width);
		if (i == sel) {
			for (int x = (int)strlen(line); x < width; x++)
				addch(' ');
			attroff(A_REVERSE);
		}
	}
}

static void draw_status(struct topview *tv, char *line, size_t size)
{
	static const char *const sort_names[TOPVIEW_SORT_COUNT_] = {
		"tree", "count", "rate", "mean", "p50", "p95", "p99", "max", "%fwd",
	};

	snprintf(line, size, "q quit  h help  Enter expand  l layers  s sort:%s  p %s  r reset",
		 sort_names[topview_sort_column(tv)], topview_paused(tv) ? "resume" : "pause");
	attron(A_DIM);
	mvaddnstr(LINES - 1, 0, line, COLS - 1); /* not the last cell: no scroll */
	attroff(A_DIM);
}

void top_screen_draw(struct top_screen *scr, struct topview *tv)
{
	char line[TOPVIEW_LINE_MAX];

	erase();
	draw_rows(scr, tv, draw_header(scr, tv, line, sizeof(line)), line, sizeof(line));
	draw_status(tv, line, sizeof(line));
	if (topview_help_shown(tv))
		draw_help();
	refresh();
}

struct top_screen *top_screen_open(void)
{
	struct top_screen *scr = calloc(1, sizeof(*scr));

	if (!scr)
		return NULL;
	/* Keys come from the terminal even when stdin is redirected (a traced
	 * command may be reading it). */
	scr->keys = isatty(STDIN_FILENO) ? NULL : fopen("/dev/tty", "re");
	/* newterm, unlike initscr, reports failure instead of exiting. */
	scr->term = newterm(NULL, stdout, scr->keys ? scr->keys : stdin);
	if (!scr->term) {
		if (scr->keys)
			fclose(scr->keys);
		free(scr);
		return NULL;
	}
	set_term(scr->term);
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	curs_set(0);
	scr->has_color = has_colors();
	if (scr->has_color) {
		start_color();
		use_default_colors();
		init_pair(PAIR_ALERT, COLOR_RED, -1);
	}
	return scr;
}

int top_screen_input_fd(const struct top_screen *scr)
{
	return scr->keys ? fileno(scr->keys) : STDIN_FILENO;
}

int top_screen_keys(struct top_screen *scr, struct topview *tv)
{
	int ch, redraw = 0;

	while ((ch = getch()) != ERR) {
		enum topview_key_result k = topview_key(tv, ch);
		if (k == TOPVIEW_KEY_QUIT)
			return 1;
		redraw |= k == TOPVIEW_KEY_REDRAW;
	}
	if (redraw)
		top_screen_draw(scr, tv);
	return 0;
}

void top_screen_close(struct top_screen *scr)
{
	if (!scr)
		return;
	endwin();
	delscreen(scr->term);
	if (scr->keys)
		fclose(scr->keys);
	free(scr);
}
