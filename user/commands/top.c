/* top.c - `spantrace top`: the live view (topview.h) fed by a session.
 * Interactive curses on a terminal, `top -b` style text frames otherwise. */
#include "commands/commands.h"

#include <argp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* export.h before term.h, whose `lines` macro would rename a struct field. */
#include "output/export.h"
#include <curses.h>
#include <term.h>
#include "core/launch.h"
#include "core/numparse.h"
#include "core/maps.h"
#include "core/session.h"
#include "top/topview.h"

#define DELAY_MIN_S 0.1
#define DELAY_MAX_S 3600.0
#define WIDTH_MIN 40

struct top_opts {
	struct launch_opts target;
	double delay_s;
	enum trace_level level;
	int batch;
	int iterations;          /* 0 = until the target exits or q / ^C */
	int width;               /* batch frame width, 0 = 80 */
	const char *cmd_output;
};

/* What the poll callback needs between frames. */
struct top_run {
	struct session *s;
	struct launch *l;
	struct topview *tv;
	uint64_t stop_at_ns;     /* interactive -n: stop here; 0 = never */
};

/* ---- options ---- */
static const char top_doc[] =
	"Live view of a traced engine: per-span counts, rates and latency percentiles, "
	"tokens/s, memory and losses, refreshed every -d seconds.\n"
	"\n"
	"Exactly one target: -p PID, --binary PATH, or -- CMD [ARGS...]. On a terminal the view "
	"is interactive (h for keys); with -b, or when stdout is not a terminal, a text frame is "
	"printed every interval, like `top -b`. A started command is held until the probes are "
	"armed; it runs with its output sent to /dev/null in the interactive view (see "
	"--cmd-output) and stopped with SIGTERM when top quits first.\n"
	"\n"
	"The default level is detail: the view is about where a forward pass spends its time, "
	"and only detail has the phases inside a layer (attention, ffn, matvec...) and the OpenCL "
	"kernels; coarse (request, token, forward, layer, memory) costs fewer probe hits.\n"
	"\v"
	"EXAMPLES:\n"
	"  spantrace top -- build/infer model.bin -z tokenizer.bin -n 256\n"
	"        start the engine under the live view (q quits, e expands a row)\n"
	"  spantrace top -p $(pidof infer) -d 2\n"
	"        watch a running engine, refreshing every 2 seconds\n"
	"  spantrace top -b -d 1 -n 5 --binary build/infer > frames.txt\n"
	"        five one-second text frames over every engine process\n"
	"  spantrace top -b --level coarse -- build/infer model.bin --ids -n 64 -b cpu\n"
	"        a frame a second until the command exits, then a final frame\n"
	"\n"
	"Batch mode ends when the target exits (after a final frame), after -n frames, or on "
	"SIGINT/SIGTERM (after a final frame). Dropped events are counted and shown in the "
	"header. Needs CAP_BPF and CAP_PERFMON (or root).";

enum { OPT_LEVEL = 0x5400, OPT_CMD_OUTPUT };

static const struct argp_option top_options[] = {
	{ "delay", 'd', "SECONDS", 0, "Refresh interval (default 1; 0.1..3600); the window is 10 intervals", 1 },
	{ "level", OPT_LEVEL, "LEVEL", 0, "detail (default) or coarse", 1 },
	{ "batch", 'b', NULL, 0, "Text frames on stdout, no curses", 1 },
	{ "iterations", 'n', "N", 0, "Stop after N refresh intervals", 1 },
	{ "width", 'w', "COLS", 0, "Width of batch frames (default 80)", 1 },
	{ "cmd-output", OPT_CMD_OUTPUT, "FILE", 0,
	  "Send -- CMD's stdout and stderr here (default: /dev/null when interactive, else ours)", 1 },
	{ "verbose", 'v', NULL, 0, "More logging (twice: libbpf debug)", 2 },
	{ 0 },
};

static error_t top_parse(int key, char *arg, struct argp_state *state)
{
	struct top_opts *o = state->input;
	uint64_t v;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &o->target;
		break;
	case 'd':
		if (parse_real(arg, DELAY_MIN_S, DELAY_MAX_S, &o->delay_s))
			argp_error(state, "invalid delay '%s' (seconds, %.1f..%.0f)", arg, DELAY_MIN_S, DELAY_MAX_S);
		break;
	case OPT_LEVEL:
		if (trace_level_parse(arg, &o->level))
			argp_error(state, "invalid level '%s' (coarse or detail)", arg);
		break;
	case 'b': o->batch = 1; break;
	case 'n':
		if (parse_uint(arg, 1, 1000000000, &v))
			argp_error(state, "invalid iterations '%s' (a whole number >= 1)", arg);
		o->iterations = (int)v;
		break;
	case 'w':
		if (parse_uint(arg, WIDTH_MIN, TOPVIEW_LINE_MAX - 1, &v))
			argp_error(state, "invalid width '%s' (%d..%d)", arg, WIDTH_MIN, TOPVIEW_LINE_MAX - 1);
		o->width = (int)v;
		break;
	case OPT_CMD_OUTPUT: o->cmd_output = arg; break;
	case 'v': st_verbose++; break;
	case ARGP_KEY_END:
		if (o->cmd_output && !o->target.cmd)
			argp_error(state, "--cmd-output is only for -- CMD");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* ---- the poll the view calls between frames ---- */
static uint64_t dropped_total(const struct session *s)
{
	struct counters c;

	if (maps_read_counters(s, &c))
		return 0;
	return event_types_sum(c.dropped);
}

static int top_poll(void *ctx, int timeout_ms)
{
	struct top_run *r = ctx;
	int rc = session_poll(r->s, timeout_ms);

	/* Records are submitted without wakeups: poll alone can sit on some. */
	if (rc >= 0)
		rc = session_drain(r->s);
	if (rc < 0 && rc != -EINTR)
		return rc;
	if (launch_target_gone(r->l)) {
		session_drain(r->s);  /* the last records of the target */
		topview_set_drops(r->tv, dropped_total(r->s));
		return 1;
	}
	topview_set_drops(r->tv, dropped_total(r->s));
	if (r->stop_at_ns && mono_now_ns() >= r->stop_at_ns)
		return -ECANCELED;  /* interactive -n: a planned stop, not an error */
	return 0;
}

/* ---- running ---- */
static void set_command_io(struct top_opts *o, int interactive)
{
	if (!o->target.cmd)
		return;
	o->target.cmd_output = o->cmd_output;
	if (interactive) {
		/* The screen and the keys are ours. */
		if (!o->target.cmd_output)
			o->target.cmd_output = "/dev/null";
		o->target.cmd_stdin_null = isatty(STDIN_FILENO);
	}
}

static int run_view(struct top_opts *o, struct top_run *r, int interactive)
{
	int rc;

	if (!interactive)
		return topview_run_batch(r->tv, stdout, top_poll, r, o->iterations, o->width);
	if (o->iterations)
		r->stop_at_ns = mono_now_ns() + (uint64_t)(o->delay_s * 1e9) * (uint64_t)o->iterations;
	rc = topview_run_curses(r->tv, top_poll, r);
	return rc == -ECANCELED ? 0 : rc;
}

static void report_end(const struct session *s, const struct launch *l, int rc)
{
	struct counters c;
	uint64_t dropped = 0, fired = 0;
	char how[64];

	if (maps_read_counters(s, &c) == 0) {
		dropped = event_types_sum(c.dropped);
		fired = event_types_sum(c.fired);
	}
	launch_describe_exit(l, how, sizeof(how));
	fprintf(stderr, "spantrace: %llu events, %llu dropped (fired %llu)%s%s%s\n",
		(unsigned long long)session_delivered_total(s), (unsigned long long)dropped,
		(unsigned long long)fired, l->mode == LAUNCH_BINARY ? "" : "; target ",
		l->mode == LAUNCH_BINARY ? "" : how, rc ? "; stopped on an error" : "");
}

/* Fails early, before any command starts, when curses could not run. */
static int check_terminal(char *err, size_t errlen)
{
	int why = 0;

	if (setupterm(NULL, STDOUT_FILENO, &why) != OK) {
		snprintf(err, errlen, "cannot use this terminal (TERM=%s) for the live view; use -b",
			 getenv("TERM") ? getenv("TERM") : "");
		return -1;
	}
	del_curterm(cur_term);
	return 0;
}

/* The view, the session and the armed probes; then the command may run. */
static int start_tracing(const struct top_opts *o, struct top_run *r, int *session_ok, char *err,
			 size_t errlen)
{
	const struct target *t = &r->l->target;
	struct session_opts so = {
		.pid_filter = t->pid > 0 ? (uint32_t)t->pid : 0,
		.level = o->level,
		.stream_mode = STREAM_ALL,
	};

	r->tv = topview_new((uint64_t)(o->delay_s * 1e9), TOPVIEW_DEFAULT_SLOTS, mono_now_ns());
	if (!r->tv || topview_set_target(r->tv, t->shown, trace_level_name(o->level))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (session_open(r->s, &so, topview_on_record, r->tv, err, errlen))
		return -1;
	*session_ok = 1;
	if (session_attach(r->s, t->elf, t->pid > 0 ? t->pid : -1, err, errlen) ||
	    launch_release(r->l, err, errlen))
		return -1;
	st_debug("attached to %s (pid %d) in %.3f ms", t->elf, (int)t->pid, r->s->attach_ns / 1e6);
	return 0;
}

static void describe_view_error(int rc, int interactive, char *err, size_t errlen)
{
	const char *term = getenv("TERM");

	if (rc == -1 && interactive)
		snprintf(err, errlen, "cannot set up the terminal (TERM=%s)", term ? term : "");
	else if (rc == -EIO)
		snprintf(err, errlen, "cannot write the frame");
	else
		snprintf(err, errlen, "%s", strerror(-rc));
}

/* Everything after the options: 0 or 1 (the error already printed). */
static int top_main(struct top_opts *o)
{
	int interactive = !o->batch && isatty(STDOUT_FILENO);
	struct session s = { 0 };
	struct launch l;
	struct top_run r = { .s = &s, .l = &l };
	char err[512];
	int rc = 1, session_ok = 0;

	if (session_check_caps(err, sizeof(err)) || (interactive && check_terminal(err, sizeof(err)))) {
		st_err("%s", err);
		return 1;
	}
	set_command_io(o, interactive);
	if (launch_start(&l, &o->target, err, sizeof(err))) {
		st_err("%s", err);
		return 1;
	}
	if (start_tracing(o, &r, &session_ok, err, sizeof(err)))
		goto out;
	if (session_stop_requested) {
		rc = 0;  /* interrupted while attaching */
		goto out;
	}
	rc = run_view(o, &r, interactive);
	if (rc < 0)
		describe_view_error(rc, interactive, err, sizeof(err));
	/* Probes off first, so the loss counters are final when reported. */
	session_detach(&s);
	session_drain(&s);
	launch_end(&l);
	report_end(&s, &l, rc);
	rc = rc ? 1 : 0;
out:
	if (rc)
		st_err("%s", err);
	launch_end(&l);
	if (session_ok)
		session_close(&s);
	topview_free(r.tv);
	return rc;
}

int cmd_top(int argc, char **argv)
{
	static const struct argp_child children[] = { { &launch_argp, 0, "Target (exactly one):", 0 }, { 0 } };
	static const struct argp argp = { top_options, top_parse, "[-p PID | --binary PATH | -- CMD [ARGS...]]",
					  top_doc, children, NULL, NULL };
	struct top_opts o = { .delay_s = 1.0, .level = LEVEL_DETAIL };

	argv[0] = (char *)"spantrace top";  /* argp names the program after it in messages */
	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, &o))
		return 2;
	/* SIGINT/SIGTERM before the view starts set session_stop_requested;
	 * the view catches them itself while it runs. SIGPIPE is ignored so a
	 * closed pipe is a write error, not a silent death. */
	session_install_signals();
	return top_main(&o);
}
