/* runloop.c - the one run loop and its signals (see runloop.h). */
#include "core/runloop.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>

#define DEFAULT_POLL_MS 50

static volatile sig_atomic_t stop_flag, hup_flag;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void on_hup_signal(int sig)
{
	(void)sig;
	hup_flag = 1;
}

int runloop_install_signals(void)
{
	struct sigaction sa;

	/* No SA_RESTART: a blocked poll returns EINTR and sees the flag. */
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_stop_signal;
	if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL))
		return -1;
	sa.sa_handler = on_hup_signal;
	if (sigaction(SIGHUP, &sa, NULL))
		return -1;
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

int runloop_stop_requested(void)
{
	return stop_flag != 0;
}

const char *stop_reason_text(enum stop_reason r)
{
	switch (r) {
	case STOP_SIGNAL: return "interrupted";
	case STOP_DURATION: return "duration reached";
	case STOP_TARGET_EXIT: return "target exited";
	case STOP_DONE: return "done";
	case STOP_HANGUP: return "terminal hung up";
	case STOP_OUTPUT_ERROR: return "write error";
	case STOP_RINGBUF_ERROR: return "ring buffer error";
	default: return "running";
	}
}

/* How long to wait: until the next tick or the deadline, at most poll_ms. */
static int wait_ms(const struct runloop *rl, uint64_t now, uint64_t next_tick)
{
	uint64_t ms = (uint64_t)(rl->poll_ms > 0 ? rl->poll_ms : DEFAULT_POLL_MS);
	uint64_t until[2] = { rl->on_tick ? next_tick : 0, rl->deadline_ns };

	for (int i = 0; i < 2; i++) {
		if (!until[i])
			continue;
		uint64_t left = until[i] > now ? (until[i] - now + 999999) / 1000000 : 0;
		if (left < ms)
			ms = left;
	}
	return (int)ms;
}

/* Waits for records or input; 1 when the input fd is readable or a signal
 * cut the wait short, 2 when the input fd hung up (it would poll ready
 * forever: a closed terminal must end the loop, not spin it). */
static int wait_for_work(const struct runloop *rl, int timeout_ms)
{
	struct pollfd fds[2] = {
		{ .fd = session_epoll_fd(rl->s), .events = POLLIN },
		{ .fd = rl->input_fd, .events = POLLIN },
	};
	int n = poll(fds, rl->input_fd >= 0 ? 2 : 1, timeout_ms);

	if (n < 0)
		return errno == EINTR;
	if (rl->input_fd >= 0 && (fds[1].revents & (POLLHUP | POLLERR | POLLNVAL)))
		return 2;
	return rl->input_fd >= 0 && (fds[1].revents & POLLIN);
}

/* The records waiting now (*n of them); the reason to stop if reading failed. */
static enum stop_reason consume(struct runloop *rl, int *n)
{
	int rc = session_consume(rl->s);

	*n = rc > 0 ? rc : 0;
	if (rc >= 0)
		return STOP_NONE;
	return rl->s->cb_error ? STOP_OUTPUT_ERROR : STOP_RINGBUF_ERROR;
}

/* One pass after a wait: records, input, signals, target, idle, deadline, tick. */
static enum stop_reason step(struct runloop *rl, int input_ready, uint64_t *next_tick)
{
	int got = 0, more = 0;
	enum stop_reason why = consume(rl, &got);
	uint64_t now;

	if (why == STOP_NONE && input_ready == 2)
		return STOP_HANGUP;
	if (why == STOP_NONE && input_ready && rl->on_input)
		why = rl->on_input(rl->ctx);
	if (why != STOP_NONE)
		return why;
	if (stop_flag)
		return STOP_SIGNAL;
	session_follow_poll(rl->s);   /* binary mode: a file renamed over the traced one */
	if (hup_flag) {
		hup_flag = 0;
		if (rl->on_hup)
			rl->on_hup(rl->ctx);
	}
	if (rl->target && launch_target_gone(rl->target)) {
		/* Whatever it fired before exiting is still in the buffer. */
		if ((why = consume(rl, &more)) != STOP_NONE)
			return why;
		if (!rl->on_target_exit)
			return STOP_TARGET_EXIT;
		rl->target = NULL;   /* gone for good; the callback chose to go on */
		if ((why = rl->on_target_exit(rl->ctx)) != STOP_NONE)
			return why;
	}
	if (!got && rl->on_idle && (why = rl->on_idle(rl->ctx)) != STOP_NONE)
		return why;
	now = mono_now_ns();
	if (rl->deadline_ns && now >= rl->deadline_ns)
		return STOP_DURATION;
	if (rl->on_tick && now >= *next_tick) {
		*next_tick += rl->tick_ns;
		if (*next_tick <= now)
			*next_tick = now + rl->tick_ns;  /* fell behind: no burst of ticks */
		return rl->on_tick(rl->ctx, now);
	}
	return STOP_NONE;
}

enum stop_reason runloop_run(struct runloop *rl)
{
	uint64_t next_tick = mono_now_ns() + rl->tick_ns;
	enum stop_reason why = stop_flag ? STOP_SIGNAL : STOP_NONE;

	while (why == STOP_NONE) {
		int ready = wait_for_work(rl, wait_ms(rl, mono_now_ns(), next_tick));
		why = step(rl, ready, &next_tick);
	}
	return why;
}
