/* runloop.h - the one loop every command runs.
 *
 * It waits on the ring buffer (and an optional input fd), hands records to
 * the session's sinks, calls the command's periodic tick, and stops for the
 * first of: SIGINT/SIGTERM (the one stop flag), the deadline, the target's
 * exit, a callback's request, or an error. What to do after it stops (the
 * final frame, the summary) is the command's.
 *
 *   runloop_install_signals();          // before attaching: Ctrl-C counts
 *   ...session_attach...
 *   struct runloop rl = { .s = &s, .target = &l, .tick_ns = NS_PER_S,
 *                         .on_tick = tick, .ctx = me };
 *   enum stop_reason why = runloop_run(&rl);
 */
#ifndef SPANTRACE_RUNLOOP_H
#define SPANTRACE_RUNLOOP_H

#include <stdint.h>
#include "core/launch.h"
#include "core/session.h"

enum stop_reason {
	STOP_NONE = 0,       /* go on (what a callback returns to continue) */
	STOP_SIGNAL,         /* SIGINT or SIGTERM */
	STOP_DURATION,       /* the deadline passed */
	STOP_TARGET_EXIT,    /* the traced process (or command) exited */
	STOP_DONE,           /* the command had what it wanted (top -n, q) */
	STOP_OUTPUT_ERROR,   /* a sink or a callback could not write */
	STOP_RINGBUF_ERROR,  /* reading the ring buffer failed */
	STOP_HANGUP,         /* the input fd hung up (top's terminal went away) */
};

struct runloop {
	struct session *s;
	struct launch *target;    /* watched for exit; NULL: none */
	uint64_t deadline_ns;     /* CLOCK_MONOTONIC; 0: none */
	uint64_t tick_ns;         /* period of on_tick; 0: no ticks */
	int poll_ms;              /* longest wait between reads (0: 50) */
	int input_fd;             /* >= 0: on_input when readable */
	void *ctx;
	/* Callbacks return STOP_NONE to go on, or why to stop. */
	enum stop_reason (*on_tick)(void *ctx, uint64_t now_ns);
	/* The input fd is readable, or a signal interrupted the wait. */
	enum stop_reason (*on_input)(void *ctx);
	/* The target exited (its records are consumed); NULL stops the loop. */
	enum stop_reason (*on_target_exit)(void *ctx);
	/* SIGHUP; NULL leaves SIGHUP ignored. */
	void (*on_hup)(void *ctx);
	/* A pass read no records: an output that buffers writes what it holds,
	 * so that records the clock released (held requests) show at once. */
	enum stop_reason (*on_idle)(void *ctx);
};

/* SIGINT/SIGTERM raise the stop flag and SIGHUP the reopen flag; SIGPIPE is
 * ignored, so a closed output is a write error and not a silent death. Call
 * it before attaching: a slow attach must not swallow a Ctrl-C. */
int runloop_install_signals(void);
/* 1 once SIGINT or SIGTERM arrived. */
int runloop_stop_requested(void);

enum stop_reason runloop_run(struct runloop *rl);

/* "interrupted", "duration reached", "target exited", "done", "write error",
 * "ring buffer error". */
const char *stop_reason_text(enum stop_reason r);

#endif
