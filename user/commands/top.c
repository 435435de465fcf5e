/* top.c - `spantrace top`: the live view (top/topview.h) fed by a session.
 * Interactive curses on a terminal, `top -b` style text frames otherwise;
 * either way the one run loop draws a frame per tick. */
#include "commands/commands.h"

#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/launch.h"
#include "core/maps.h"
#include "core/numparse.h"
#include "core/options.h"
#include "core/userspans.h"
#include "core/runloop.h"
#include "core/session.h"
#include "core/statereq.h"
#include "top/screen.h"
#include "top/topview.h"
/* After our headers: term.h's `lines` macro would rename struct fields. */
#include <curses.h>
#include <term.h>

#define DELAY_MIN_S 0.1
#define DELAY_MAX_S 3600.0
#define WIDTH_MIN 40

struct top_opts {
	struct launch_opts target;
	struct common_opts common;
	double delay_s;
	int batch;
	int iterations;          /* 0 = until the target exits or q / ^C */
	int width;               /* batch frame width, 0 = 80 */
	const char *cmd_output;
	int opencl;              /* --opencl: rows for the OpenCL loader's calls */
};

struct top_run {
	const struct top_opts *o;
	struct session s;
	int session_ok;
	struct launch l;
	struct topview *tv;
	int interactive;             /* curses; else batch text frames */
	struct top_screen *screen;   /* the terminal while the view runs */
	int frames;                  /* ticks so far (-n counts them) */
	int write_failed;
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
	"  spantrace top --opencl -p $(pidof clpeak)\n"
	"        any OpenCL program: its loader calls (enqueue, wait, transfer, build) as rows\n"
	"\n"
	"Batch mode ends when the target exits (after a final frame), after -n frames, after "
	"--duration, or on SIGINT/SIGTERM (after a final frame). Dropped events are counted and "
	"shown in the header. Environment: SPANTRACE_LEVEL, SPANTRACE_INTERVAL_SECS (-d) and "
	"SPANTRACE_CMD_OUTPUT mirror their flags; a flag wins. Needs CAP_BPF and CAP_PERFMON (or root).";

enum { OPT_CMD_OUTPUT = 0x5400, OPT_OPENCL, OPT_SPAN };

static const struct argp_option top_options[] = {
	{ "delay", 'd', "SECONDS", 0, "Refresh interval (default 1; 0.1..3600); the window is 10 intervals", 1 },
	{ "batch", 'b', NULL, 0, "Text frames on stdout, no curses", 1 },
	{ "iterations", 'n', "N", 0, "Stop after N refresh intervals", 1 },
	{ "width", 'w', "COLS", 0, "Width of batch frames (default 80)", 1 },
	{ "cmd-output", OPT_CMD_OUTPUT, "FILE", 0,
	  "Send -- CMD's stdout and stderr here (default: /dev/null when interactive, else ours)", 1 },
	{ "span", OPT_SPAN, "SPEC", 0,
	  "Also a span of any program, a row of its own: uprobe:PATH:FUNCTION[:NAME] or "
	  "usdt:PATH:PROVIDER:BEGIN,END[:NAME] (repeatable)", 1 },
	{ "opencl", OPT_OPENCL, NULL, 0,
	  "Also trace the target's calls into the OpenCL ICD loader: rows cl enqueue/wait/transfer/build/device", 1 },
	{ 0 },
};

static error_t top_parse(int key, char *arg, struct argp_state *state)
{
	struct top_opts *o = state->input;
	uint64_t v;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &o->target;
		state->child_inputs[1] = &o->common;
		break;
	case 'd':
		if (parse_real(arg, DELAY_MIN_S, DELAY_MAX_S, &o->delay_s))
			argp_error(state, "invalid delay '%s' (seconds, %.1f..%.0f)", arg, DELAY_MIN_S, DELAY_MAX_S);
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
	case OPT_OPENCL: o->opencl = o->target.probes_optional = 1; break;
	case OPT_SPAN: user_span_option(state, arg, &o->target); break;
	case ARGP_KEY_END:
		if (o->cmd_output && !o->target.cmd)
			argp_error(state, "--cmd-output is only for -- CMD");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* ---- frames ---- */
static void update_losses(struct top_run *r)
{
	struct counters c;

	if (maps_read_counters(&r->s, &c) == 0) {
		topview_set_drops(r->tv, event_types_sum(c.dropped));
		topview_set_http(r->tv, r->s.http, c.http_begun > c.http_done ? c.http_begun - c.http_done : 0);
	}
	topview_set_invalid(r->tv, session_invalid_total(&r->s));
}

/* One frame: batch text on stdout, or the curses screen. */
static int frame(struct top_run *r, uint64_t now)
{
	update_losses(r);
	topview_poll_proc(r->tv);
	topview_refresh(r->tv, now);
	if (r->screen) {
		top_screen_draw(r->screen, r->tv);
		return 0;
	}
	if (topview_render_text(r->tv, stdout, r->o->width) || fputc('\n', stdout) == EOF || fflush(stdout)) {
		r->write_failed = 1;
		return -1;
	}
	return 0;
}

static enum stop_reason on_tick(void *ctx, uint64_t now)
{
	struct top_run *r = ctx;
	char err[512];

	/* --http with --binary: the binary's new processes' sockets too */
	if (r->l.mode == LAUNCH_BINARY &&
	    session_http_watch_binary(&r->s, launch_binary_path(&r->l, &r->o->target), err, sizeof(err)))
		st_err("%s", err);
	if (frame(r, now))
		return STOP_OUTPUT_ERROR;
	r->frames++;
	return r->o->iterations && r->frames >= r->o->iterations ? STOP_DONE : STOP_NONE;
}

static enum stop_reason on_keys(void *ctx)
{
	struct top_run *r = ctx;

	return top_screen_keys(r->screen, r->tv) ? STOP_DONE : STOP_NONE;
}

/* The interactive view stays up, marked [exited], until q. */
static enum stop_reason on_target_exit(void *ctx)
{
	struct top_run *r = ctx;

	topview_set_ended(r->tv, 1);
	return STOP_NONE;
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
static int start_tracing(struct top_run *r, char *err, size_t errlen)
{
	const struct top_opts *o = r->o;
	const struct target *t = &r->l.target;
	struct session_opts so = {
		.pid_filter = t->pid > 0 ? (uint32_t)t->pid : 0,
		.level = o->common.level,
		.stream_mode = STREAM_ALL,
		.opencl = o->opencl,
		.opencl_binary = o->target.binary,
		.no_probes = t->engine != ENGINE_INFER,
		.engines = t->engine == ENGINE_LLAMACPP || t->pending,
		.http = launch_wants_http(&o->target),
		.http_alone = o->target.no_children,
	};

	r->tv = topview_new((uint64_t)(o->delay_s * 1e9), TOPVIEW_DEFAULT_SLOTS, mono_now_ns());
	if (!r->tv || topview_set_target(r->tv, t->shown, trace_level_name(o->common.level))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	struct event_sink sink = { &topview_handlers, r->tv };
	if (session_open(&r->s, &so, &sink, 1, err, errlen))
		return -1;
	r->session_ok = 1;
	if (session_attach_target(&r->s, t, t->pid > 0 ? t->pid : -1, r->l.mode == LAUNCH_PID, err, errlen) ||
	    (t->pid <= 0 && t->engine == ENGINE_INFER && session_follow(&r->s, t->elf, err, errlen)) ||
	    (r->l.mode == LAUNCH_BINARY &&
	     session_http_watch_binary(&r->s, launch_binary_path(&r->l, &o->target), err, errlen)) ||
	    session_http_watch_more(&r->s, o->target.more_pids, o->target.nmore_pids, err, errlen) ||
	    launch_release(&r->l, err, errlen))
		return -1;
	if (r->l.mode == LAUNCH_PID && t->engine == ENGINE_INFER && state_request(t->pid) < 0)
		st_err("cannot ask pid %d for its state: %s", (int)t->pid, state_request_error(errno));
	if (r->l.mode == LAUNCH_BINARY && t->engine == ENGINE_INFER && state_request_binary(t->elf) < 0)
		st_err("cannot ask the running processes of %s for their state: %s", t->elf, strerror(errno));
	st_debug("attached to %s (pid %d) in %.3f ms", t->elf, (int)t->pid, r->s.attach_ns / 1e6);
	return 0;
}

static enum stop_reason run_view(struct top_run *r)
{
	const struct top_opts *o = r->o;
	uint64_t start = mono_now_ns();
	struct runloop rl = {
		.s = &r->s, .target = &r->l, .ctx = r, .input_fd = -1,
		.tick_ns = (uint64_t)(o->delay_s * 1e9), .on_tick = on_tick,
		.deadline_ns = o->common.duration_s > 0 ? start + (uint64_t)(o->common.duration_s * 1e9) : 0,
	};

	if (r->screen) {
		rl.input_fd = top_screen_input_fd(r->screen);
		rl.on_input = on_keys;
		rl.on_target_exit = on_target_exit;
		frame(r, start);   /* the screen is not blank until the first tick */
	}
	return runloop_run(&rl);
}

/* Batch mode ends with a final frame, unless the output itself failed. */
static int end_view(struct top_run *r, enum stop_reason why, char *err, size_t errlen)
{
	if (!r->interactive && why != STOP_OUTPUT_ERROR && why != STOP_DONE) {
		if (why == STOP_TARGET_EXIT)
			topview_set_ended(r->tv, 1);
		if (frame(r, mono_now_ns()))
			why = STOP_OUTPUT_ERROR;
	}
	if (why == STOP_OUTPUT_ERROR)
		snprintf(err, errlen, r->write_failed ? "cannot write the frame" : "a record could not be handled");
	else if (why == STOP_RINGBUF_ERROR)
		snprintf(err, errlen, "reading the ring buffer failed");
	return why == STOP_OUTPUT_ERROR || why == STOP_RINGBUF_ERROR ? -1 : 0;
}

static void report_end(struct top_run *r, int rc)
{
	struct counters c;
	uint64_t dropped = 0, fired = 0;
	char how[64];

	if (r->o->common.quiet)
		return;
	if (maps_read_counters(&r->s, &c) == 0) {
		dropped = event_types_sum(c.dropped);
		fired = event_types_sum(c.fired);
	}
	launch_describe_exit(&r->l, how, sizeof(how));
	fprintf(stderr, "spantrace: %llu events, %llu dropped (fired %llu)%s%s%s\n",
		(unsigned long long)session_delivered_total(&r->s), (unsigned long long)dropped,
		(unsigned long long)fired, r->l.mode == LAUNCH_BINARY ? "" : "; target ",
		r->l.mode == LAUNCH_BINARY ? "" : how, rc ? "; stopped on an error" : "");
}

/* Everything after the options: 0 or 1 (the error already printed). */
static int top_main(struct top_opts *o)
{
	int interactive = !o->batch && isatty(STDOUT_FILENO);
	struct top_run r = { .o = o, .interactive = interactive };
	char err[512] = "";
	int rc = 1;

	if (session_check_caps(err, sizeof(err)) || (interactive && check_terminal(err, sizeof(err)))) {
		st_err("%s", err);
		return 1;
	}
	set_command_io(o, interactive);
	if (launch_start(&r.l, &o->target, err, sizeof(err))) {
		st_err("%s", err);
		return 1;
	}
	runloop_install_signals();
	if (start_tracing(&r, err, sizeof(err)))
		goto out;
	if (interactive && !(r.screen = top_screen_open())) {
		snprintf(err, sizeof(err), "cannot set up the terminal (TERM=%s)", getenv("TERM") ? getenv("TERM") : "");
		goto out;
	}
	enum stop_reason why = run_view(&r);
	top_screen_close(r.screen);
	r.screen = NULL;
	/* Probes off first, so the loss counters are final when reported. */
	session_detach(&r.s);
	session_consume(&r.s);
	rc = end_view(&r, why, err, sizeof(err));
	if (!rc)
		rc = session_engine_check(&r.s, &r.l.target, o->target.probes_optional, err, sizeof(err));
	launch_end(&r.l);
	report_end(&r, rc);
out:
	if (rc && err[0])
		st_err("%s", err);
	top_screen_close(r.screen);
	launch_end(&r.l);
	if (r.session_ok)
		session_close(&r.s);
	topview_free(r.tv);
	return rc ? 1 : 0;
}

int cmd_top(int argc, char **argv)
{
	static const struct common_opts defaults = { .level = LEVEL_DETAIL };
	struct argp_child children[3];
	struct argp argp = { top_options, top_parse, "[-p PID | --binary PATH | -- CMD [ARGS...]]", top_doc,
			     children, NULL, NULL };
	struct top_opts o = { .delay_s = 1.0, .common = defaults };

	argv[0] = (char *)"spantrace top";  /* argp names the program after it in messages */
	tracing_argp_children(children, COMMON_ALL & ~COMMON_MAX_EVENTS, &defaults);  /* no Chrome trace */
	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, &o))
		return 2;
	return top_main(&o);
}
