/* screen.h - the interactive view of `spantrace top` on a terminal: draws
 * the lines topview.c formats and turns keys into topview_key() calls. The
 * loop around it is the one run loop (commands/top.c): a frame per tick,
 * keys when the terminal has input. */
#ifndef SPANTRACE_SCREEN_H
#define SPANTRACE_SCREEN_H

#include "top/topview.h"

struct top_screen;

/* Takes over the terminal; NULL if it cannot (the caller says so). */
struct top_screen *top_screen_open(void);
/* Readable when a key is waiting. */
int top_screen_input_fd(const struct top_screen *scr);
void top_screen_draw(struct top_screen *scr, struct topview *tv);
/* Handles every waiting key, redrawing if one changed the view; 1 on q. */
int top_screen_keys(struct top_screen *scr, struct topview *tv);
/* Gives the terminal back as it was. NULL is fine. */
void top_screen_close(struct top_screen *scr);

#endif
