/* record.c - `spantrace record`: trace one process, a command, or every
 * process of a binary, and write JSONL / CSV / metrics / a summary / a
 * Chrome trace. The records flow through one chain of sinks (see
 * record_sinks); a tick a second writes the status line and metrics. */
#include "commands/commands.h"

#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "analysis/perfev.h"
#include "analysis/procs.h"
#include "analysis/profile.h"
#include "analysis/runstats.h"
#include "core/launch.h"
#include "core/maps.h"
#include "core/numparse.h"
#include "core/options.h"
#include "core/userspans.h"
#include "core/runloop.h"
#include "core/session.h"
#include "core/statereq.h"
#include "output/chrome.h"
#include "output/csv.h"
#include "output/jsonl.h"
#include <unistd.h>
#include "output/metrics.h"
#include "output/otlp_trace.h"
#include "output/outbuf.h"
#include "output/summary.h"

#define NS_PER_S 1000000000ull

struct record_opts {
	struct launch_opts target;
	struct common_opts common;
	const char *out, *csv, *summary, *metrics, *chrome, *otlp;
	unsigned ringbuf_kb;
	uint64_t min_dur_ns;
	int perf;                 /* --perf: span counter deltas */
	struct slo slo;           /* --slo-ttft-ms, --slo-itl-ms: goodput */
	int opencl;               /* --opencl: the OpenCL ICD loader's calls */
};

struct recorder {
	const struct record_opts *o;
	struct launch l;
	struct session s;
	int session_ok;
	struct outbuf jsonl, csv, metrics;   /* buf == NULL: not asked for */
	struct csv_writer csvw;
	struct proc_table procs;
	struct runstats stats;
	struct metrics_stream *ms;
	struct perf_counters pc;              /* --perf */
	struct profile_counters perf_totals;
	struct chrome_writer *chrome;         /* --chrome */
	struct otlp_exporter *otlp;           /* --otlp */
	struct otlp_trace *otlp_spans;
	struct otlp_stats otlp_final;
	struct wall_clock clk;
	uint64_t start_ns, last_tick_ns;
	uint64_t tick_delivered, tick_tokens, last_dropped;  /* at the last tick */
	int http_told;                        /* the silence of -p's sockets was told */
};

#define HTTP_SILENCE_NS 3000000000ull  /* -p with --http and no request this long: why */

/* ---- the sinks, in order: state first, then the outputs that read it ---- */
static size_t record_sinks(struct recorder *r, struct event_sink *sinks)
{
	size_t n = 0;

	sinks[n++] = (struct event_sink){ &proc_table_handlers, &r->procs };
	sinks[n++] = (struct event_sink){ &runstats_handlers, &r->stats };
	if (r->o->perf)
		sinks[n++] = (struct event_sink){ &profile_counters_handlers, &r->perf_totals };
	if (r->ms)
		sinks[n++] = (struct event_sink){ &metrics_handlers, r->ms };
	if (r->chrome)
		sinks[n++] = (struct event_sink){ &chrome_handlers, r->chrome };
	if (r->otlp_spans)
		sinks[n++] = (struct event_sink){ &otlp_trace_handlers, r->otlp_spans };
	sinks[n++] = (struct event_sink){ &jsonl_handlers, &r->jsonl };
	if (r->csv.buf)
		sinks[n++] = (struct event_sink){ &csv_handlers, &r->csvw };
	return n;
}

/* The output that failed first, if any. */
static struct outbuf *failed_output(struct recorder *r)
{
	struct outbuf *obs[] = { &r->jsonl, &r->csv, &r->metrics };

	for (int i = 0; i < 3; i++)
		if (obs[i]->error)   /* 0 for outputs not asked for */
			return obs[i];
	return NULL;
}

/* A pass with no records: what the JSONL buffer holds goes out now, not
 * at the next second (a request the join held, released by the clock,
 * shows within a poll of its release). */
static enum stop_reason idle(void *ctx)
{
	struct recorder *r = ctx;

	ob_flush(&r->jsonl);
	return failed_output(r) ? STOP_OUTPUT_ERROR : STOP_NONE;
}

/* ---- once a second: status line, metrics, drops ---- */
static uint64_t wall_ms(void)
{
	return (uint64_t)clock_read_ns(CLOCK_REALTIME) / 1000000;
}

static enum stop_reason tick(void *ctx, uint64_t now)
{
	struct recorder *r = ctx;
	double secs = (now - r->last_tick_ns) / 1e9;
	/* tokens as the summary counts them: token spans, else emits (serving) */
	uint64_t delivered = session_delivered_total(&r->s),
		 tokens = r->s.delivered[EV_TOKEN] ? r->s.delivered[EV_TOKEN] : r->s.delivered[EV_EMIT];
	uint64_t events = delivered - r->tick_delivered, dropped;
	struct counters c;
	char err[512];

	if (r->l.mode == LAUNCH_BINARY &&
	    session_http_watch_binary(&r->s, launch_binary_path(&r->l, &r->o->target), err, sizeof(err)))
		st_err("%s", err);   /* the processes found so far stay watched */
	if (r->l.mode == LAUNCH_PID && !r->http_told && now - r->start_ns >= HTTP_SILENCE_NS) {
		r->http_told = 1;
		if (session_http_silence(&r->s, r->l.target.pid, err, sizeof(err)))
			st_warn("%s", err);
	}
	maps_read_counters(&r->s, &c);
	dropped = event_types_sum(c.dropped);
	if (!r->o->common.quiet)
		fprintf(stderr, "spantrace: %.0f events/s, %llu dropped, %.1f tok/s\n", secs > 0 ? events / secs : 0.0,
			(unsigned long long)dropped, secs > 0 && tokens >= r->tick_tokens ? (tokens - r->tick_tokens) / secs : 0.0);
	if (r->ms)
		metrics_write(r->ms, &r->metrics, wall_ms(), secs, events, dropped);
	if (r->otlp_spans)
		otlp_trace_flush(r->otlp_spans);
	if (dropped != r->last_dropped)
		jsonl_write_drops(&r->jsonl, mono_now_ns(), &c, delivered);
	ob_flush(&r->jsonl);
	r->last_tick_ns = now;
	r->tick_delivered = delivered;
	r->tick_tokens = tokens;
	r->last_dropped = dropped;
	return failed_output(r) ? STOP_OUTPUT_ERROR : STOP_NONE;
}

/* ---- options ---- */
static const char record_doc[] =
	"Trace the `infer` USDT probes of one process, a command, or every process of a binary.\n"
	"\n"
	"Exactly one target: -p PID, --binary PATH, or -- CMD [ARGS...].\n"
	"Without -o the JSONL stream goes to stdout. The status line goes to stderr once a second.\n"
	"\v"
	"EXAMPLES:\n"
	"  spantrace record -o run.jsonl -- build/infer model.bin --ids -n 64 -b cpu\n"
	"        start the engine under the tracer; no probe is missed\n"
	"  spantrace record -p 1234 --duration 10 --summary s.json -o -\n"
	"        attach to a running engine for ten seconds\n"
	"  spantrace record --binary build/infer --level coarse -o t.jsonl\n"
	"        every engine process started from now on, coarse spans only\n"
	"  spantrace record --csv spans.csv --summary s.json -- build/infer ...\n"
	"        CSV rows and a summary file besides the JSONL on stdout\n"
	"  spantrace record --span uprobe:/usr/bin/gzip:deflate -- gzip -k big.tar\n"
	"        a function of any program as a span (histogram, JSONL, summary)\n"
	"  spantrace record --opencl -p 4321 -o cl.jsonl\n"
	"        any running OpenCL program: kernels by name, waits, transfers, buffers\n"
	"  spantrace record -p $(pidof llama-server) -o reqs.jsonl\n"
	"        llama.cpp's requests, and every HTTP request as its socket saw it (a listening\n"
	"        server: --http by default): arrival, first event, end\n"
	"  spantrace record --engine none -p $(pidof vllm) -o reqs.jsonl\n"
	"        any HTTP server's requests from its sockets alone\n"
	"\n"
	"JSONL record types: session, span, token, request, emit, step, req_state, alloc, free, kv,\n"
	"kernel, tensor, probe, drops, summary; with --opencl also cl_kernel, cl_wait, cl_transfer,\n"
	"cl_build, cl_mem, cl_devtime; with --http (by default for a listening -p PID) also http.\n"
	"Environment: SPANTRACE_OUTPUT, _CSV, _SUMMARY, _METRICS, _CHROME and _LEVEL mirror their\n"
	"flags; a flag wins over its variable.\n"
	"Exit status: 0; 1 on an error of ours; 2 on bad options. With -- CMD, a command that\n"
	"failed by itself gives its own status (128 + N for signal N), as strace does; what it\n"
	"did is recorded all the same.\n"
	"Needs CAP_BPF and CAP_PERFMON (or root).";

enum { OPT_CSV = 1000, OPT_SUMMARY, OPT_METRICS, OPT_RINGBUF, OPT_MIN_DUR, OPT_PERF, OPT_CHROME,
       OPT_SLO_TTFT, OPT_SLO_ITL, OPT_OTLP, OPT_OPENCL, OPT_SPAN };

static const struct argp_option record_options[] = {
	{ "output", 'o', "FILE", 0, "JSONL output (default: stdout; '-' = stdout)", 1 },
	{ "csv", OPT_CSV, "FILE", 0, "CSV, one row per span and kernel", 1 },
	{ "summary", OPT_SUMMARY, "FILE", 0, "Summary JSON at the end", 1 },
	{ "metrics", OPT_METRICS, "FILE", 0, "Metric records (JSONL), one per series per second", 1 },
	{ "perf", OPT_PERF, NULL, 0, "Per-span perf counter deltas (" PERFEV_DEFAULT_EVENTS ") in span records and the summary", 1 },
	{ "chrome", OPT_CHROME, "FILE", 0, "Chrome trace (ui.perfetto.dev) of the run as well", 1 },
	{ "otlp", OPT_OTLP, "URL", 0, "Export spans as OTLP/HTTP JSON to URL/v1/traces (e.g. http://127.0.0.1:4318)", 1 },
	{ "opencl", OPT_OPENCL, NULL, 0,
	  "Also trace the target's calls into the OpenCL ICD loader (libOpenCL.so.1): kernels, waits, "
	  "transfers, buffers, builds; any OpenCL program, no restart", 1 },
	{ "span", OPT_SPAN, "SPEC", 0,
	  "Also a span of any program: uprobe:PATH:FUNCTION[:NAME] (entry to return) or "
	  "usdt:PATH:PROVIDER:BEGIN,END[:NAME] (repeatable)", 1 },
	{ "ringbuf-kb", OPT_RINGBUF, "KB", 0, "Ring buffer size in KiB (default 2048, rounded up to 2^n pages)", 2 },
	{ "min-dur-ns", OPT_MIN_DUR, "NS", 0, "Stream only spans at least this long (all are counted)", 2 },
	{ "slo-ttft-ms", OPT_SLO_TTFT, "MS", 0, "Goodput: a request meets it if its time to first token is at most MS", 3 },
	{ "slo-itl-ms", OPT_SLO_ITL, "MS", 0,
	  "Goodput: a request meets it if its mean gap between tokens after the first (TPOT) is at most MS", 3 },
	{ 0 },
};

static error_t record_parse(int key, char *arg, struct argp_state *state)
{
	struct record_opts *o = state->input;
	uint64_t v;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &o->target;
		state->child_inputs[1] = &o->common;
		break;
	case 'o': o->out = arg; break;
	case OPT_CSV: o->csv = arg; break;
	case OPT_SUMMARY: o->summary = arg; break;
	case OPT_METRICS: o->metrics = arg; break;
	case OPT_RINGBUF:
		if (parse_uint(arg, 4, 1u << 20, &v))
			argp_error(state, "invalid --ringbuf-kb '%s' (4..1048576)", arg);
		o->ringbuf_kb = (unsigned)v;
		break;
	case OPT_MIN_DUR:
		if (parse_uint(arg, 0, UINT64_MAX, &o->min_dur_ns))
			argp_error(state, "invalid --min-dur-ns '%s'", arg);
		break;
	case OPT_PERF: o->perf = 1; break;
	case OPT_OPENCL: o->opencl = o->target.probes_optional = 1; break;
	case OPT_SPAN: user_span_option(state, arg, &o->target); break;
	case OPT_SLO_TTFT:
	case OPT_SLO_ITL: {
		double ms;
		if (parse_real_above(arg, 0, 3600e3, &ms))
			argp_error(state, "invalid %s '%s' (milliseconds > 0)",
				   key == OPT_SLO_TTFT ? "--slo-ttft-ms" : "--slo-itl-ms", arg);
		*(key == OPT_SLO_TTFT ? &o->slo.ttft_ns : &o->slo.itl_ns) = (uint64_t)(ms * 1e6);
		break;
	}
	case OPT_CHROME: o->chrome = arg; break;
	case OPT_OTLP: o->otlp = arg; break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* ---- setup ---- */
static int open_file_outputs(struct recorder *r, char *err, size_t errlen)
{
	const struct record_opts *o = r->o;

	if (ob_open(&r->jsonl, o->out ? o->out : "-", err, errlen))
		return -1;
	if (o->csv) {
		if (ob_open(&r->csv, o->csv, err, errlen))
			return -1;
		ob_put_line(&r->csv, CSV_HEADER);
		r->csvw = (struct csv_writer){ &r->csv, r->clk, &r->procs };
	}
	if (o->metrics) {
		if (ob_open(&r->metrics, o->metrics, err, errlen))
			return -1;
		if (!(r->ms = metrics_new(&r->procs))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	if (o->summary) {
		/* Fail now, not after the run, when the summary cannot be written. */
		struct outbuf probe;
		if (ob_open(&probe, o->summary, err, errlen))
			return -1;
		ob_close(&probe);
		free(probe.path);
	}
	return 0;
}

static int open_outputs(struct recorder *r, char *err, size_t errlen)
{
	const struct record_opts *o = r->o;

	if (open_file_outputs(r, err, errlen))
		return -1;
	if (o->perf) {
		if (perfev_counters_open(&r->pc, NULL, err, errlen))
			return -1;
		profile_counters_init(&r->perf_totals, r->pc.names, r->pc.ncounters);
	}
	if (o->chrome) {
		r->chrome = chrome_open(o->chrome, o->common.max_events, err, errlen);
		if (!r->chrome)
			return -1;
		chrome_set_counter_names(r->chrome, r->pc.names, r->pc.ncounters);
		chrome_set_device_offset(r->chrome, clock_raw_to_mono_ns());
	}
	if (o->otlp) {
		char host[256] = "";
		gethostname(host, sizeof(host) - 1);
		if (!(r->otlp = otlp_open(o->otlp, "traces", err, errlen)))
			return -1;
		if (!(r->otlp_spans = otlp_trace_new(r->otlp, &r->clk, host))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	return 0;
}

/* Sends the last spans (for at most 10 s) and keeps the transport's counts
 * for the summary and the status line. */
static void close_otlp(struct recorder *r)
{
	char line[256];

	if (!r->otlp)
		return;
	otlp_trace_flush(r->otlp_spans);
	otlp_close(r->otlp, 10, &r->otlp_final);
	r->otlp = NULL;
	otlp_stats_text(&r->otlp_final, "spans", line, sizeof(line));
	if (!r->o->common.quiet)
		fprintf(stderr, "spantrace: %s\n", line);
}

static json_object *otlp_json(const struct otlp_stats *st, uint64_t built)
{
	json_object *j = json_object_new_object();

	json_object_object_add(j, "spans", json_object_new_int64((int64_t)built));
	json_object_object_add(j, "sent", json_object_new_int64((int64_t)st->items_sent));
	json_object_object_add(j, "requests", json_object_new_int64((int64_t)st->requests));
	json_object_object_add(j, "retries", json_object_new_int64((int64_t)st->retries));
	json_object_object_add(j, "rejected", json_object_new_int64((int64_t)st->items_rejected));
	json_object_object_add(j, "dropped_queue_full", json_object_new_int64((int64_t)st->dropped_queue_full));
	json_object_object_add(j, "dropped_failed", json_object_new_int64((int64_t)st->dropped_failed));
	json_object_object_add(j, "dropped_at_exit", json_object_new_int64((int64_t)st->dropped_shutdown));
	return j;
}

static int start_session(struct recorder *r, char *err, size_t errlen)
{
	const struct record_opts *o = r->o;
	const struct target *t = &r->l.target;
	struct event_sink sinks[SESSION_MAX_SINKS];
	struct session_opts so = {
		.pid_filter = t->pid > 0 ? (uint32_t)t->pid : 0,
		.level = o->common.level,
		.min_dur_ns = o->min_dur_ns,
		.stream_mode = STREAM_ALL,
		.ringbuf_kb = o->ringbuf_kb,
		.perf_ncounters = r->pc.ncounters,
		.perf_ncpus = r->pc.ncpus,
		.opencl = o->opencl,
		.opencl_binary = r->o->target.binary,
		.http = launch_wants_http(&o->target),
		.http_alone = o->target.no_children,
		.no_probes = t->engine != ENGINE_INFER,
		.engines = t->engine == ENGINE_LLAMACPP || t->pending,
	};

	if (session_open(&r->s, &so, sinks, record_sinks(r, sinks), err, errlen))
		return -1;
	r->session_ok = 1;
	if (r->pc.ncounters && perfev_counters_install(&r->pc, maps_perf_counters_fd(&r->s), err, errlen))
		return -1;
	if (session_attach_target(&r->s, t, t->pid > 0 ? t->pid : -1, r->l.mode == LAUNCH_PID, err, errlen))
		return -1;
	if (r->l.mode == LAUNCH_PID && t->engine == ENGINE_INFER && state_request(t->pid) < 0)
		st_err("cannot ask pid %d for its state: %s", (int)t->pid, state_request_error(errno));
	if (r->l.mode == LAUNCH_BINARY && t->engine == ENGINE_INFER && state_request_binary(t->elf) < 0)
		st_err("cannot ask the running processes of %s for their state: %s", t->elf, strerror(errno));
	if (r->l.mode == LAUNCH_BINARY &&
	    session_http_watch_binary(&r->s, launch_binary_path(&r->l, &o->target), err, errlen))
		return -1;
	if (session_http_watch_more(&r->s, o->target.more_pids, o->target.nmore_pids, err, errlen))
		return -1;
	return t->pid > 0 || t->engine != ENGINE_INFER ? 0 : session_follow(&r->s, t->elf, err, errlen);
}

/* The first JSONL line; once it is on disk scripts know the probes are armed. */
static int write_session_line(struct recorder *r)
{
	struct session_info si = {
		.l = &r->l,
		.command = r->o->target.cmd,
		.level = r->o->common.level,
		.start_mono_ns = r->start_ns,
		.start_wall_ns = (uint64_t)((int64_t)r->start_ns + r->clk.mono_to_wall),
		.min_dur_ns = r->o->min_dur_ns,
		.perf = r->o->perf ? &r->pc : NULL,
	};
	json_object *j = summary_session_json(&si, &r->s);
	int rc = json_put_line(&r->jsonl, j);

	json_object_put(j);
	return rc || ob_flush(&r->jsonl) ? -1 : 0;
}

/* ---- the end ---- */

/* "target exited (status N)" for a command that exited by itself. */
static void describe_stop(const struct recorder *r, enum stop_reason why, char *buf, size_t size)
{
	if (why == STOP_TARGET_EXIT && r->l.mode == LAUNCH_COMMAND && WIFEXITED(r->l.status))
		snprintf(buf, size, "target exited (status %d)", WEXITSTATUS(r->l.status));
	else
		snprintf(buf, size, "%s", stop_reason_text(why));
}

/* The last drops and metrics, every line on disk, then the summary. A
 * disk that fills only at the end still decides stop_reason. */
static int write_end(struct recorder *r, const struct counters *c, double wall_s, const char *reason,
		     char *err, size_t errlen)
{
	struct outbuf *obs[] = { &r->jsonl, &r->csv, &r->metrics };
	uint64_t now = mono_now_ns(), delivered = session_delivered_total(&r->s);
	json_object *sum;
	int rc = 0;

	if (!failed_output(r)) {
		jsonl_write_drops(&r->jsonl, now, c, delivered);
		if (r->ms)   /* the interval since the last tick */
			metrics_write(r->ms, &r->metrics, wall_ms(), (now - r->last_tick_ns) / 1e9,
				      delivered - r->tick_delivered, event_types_sum(c->dropped));
	}
	for (int i = 0; i < 3; i++)
		if (obs[i]->buf && !failed_output(r))
			ob_flush(obs[i]);
	sum = summary_json(&r->stats, &r->s, c, wall_s, failed_output(r) ? "write error" : reason,
			   r->o->perf ? &r->pc : NULL, r->o->perf ? &r->perf_totals : NULL);
	if (!sum) {
		snprintf(err, errlen, "out of memory building the summary");
		return -1;
	}
	if (r->otlp_spans)
		json_object_object_add(sum, "otlp", otlp_json(&r->otlp_final, otlp_trace_spans(r->otlp_spans)));
	if (!failed_output(r))
		json_put_line(&r->jsonl, sum);
	if (r->o->summary && json_write_file(r->o->summary, sum, err, errlen))
		rc = -1;
	json_object_put(sum);
	for (int i = 0; i < 3; i++)
		if (obs[i]->buf)
			ob_close(obs[i]);
	if (failed_output(r)) {
		ob_strerror(failed_output(r), err, errlen);
		rc = -1;
	}
	return rc;
}

static int finish(struct recorder *r, enum stop_reason why, char *err, size_t errlen)
{
	double wall_s = (mono_now_ns() - r->start_ns) / 1e9;
	char reason[128], cerr[256];
	struct counters c;
	int rc;

	/* Nothing may still be producing when the counters are read: a target
	 * that exited produces nothing more, anything else is detached first. */
	if (why != STOP_TARGET_EXIT || r->l.mode == LAUNCH_BINARY)
		session_detach(&r->s);
	if (session_drain(&r->s) < 0 && !failed_output(r))
		snprintf(err, errlen, "ring buffer error while draining");
	maps_read_counters(&r->s, &c);
	launch_end(&r->l);   /* interrupted or timed out: the command does not outlive us */
	describe_stop(r, why, reason, sizeof(reason));
	close_otlp(r);
	rc = write_end(r, &c, wall_s, reason, err, errlen);
	if (r->chrome && chrome_close(r->chrome, cerr, sizeof(cerr)) && !rc) {
		snprintf(err, errlen, "%s", cerr);
		rc = -1;
	}
	r->chrome = NULL;
	if (!r->o->common.quiet)
		fprintf(stderr, "spantrace: %llu events, %llu dropped (fired %llu), %llu span errors, %s\n",
			(unsigned long long)session_delivered_total(&r->s),
			(unsigned long long)event_types_sum(c.dropped), (unsigned long long)event_types_sum(c.fired),
			(unsigned long long)c.span_errors, rc ? "stopped: write error" : reason);
	return rc;
}

static void recorder_free(struct recorder *r)
{
	struct outbuf *obs[] = { &r->jsonl, &r->csv, &r->metrics };

	launch_end(&r->l);
	if (r->session_ok)
		session_close(&r->s);
	for (int i = 0; i < 3; i++) {
		if (obs[i]->buf)
			ob_close(obs[i]);
		free(obs[i]->path);
	}
	if (r->chrome)
		chrome_close(r->chrome, NULL, 0);
	otlp_close(r->otlp, 0, NULL);
	otlp_trace_free(r->otlp_spans);
	metrics_free(r->ms);
	runstats_free(&r->stats);
	proc_table_free(&r->procs);
	perfev_counters_close(&r->pc);
}

/* Everything after the options: the exit status. */
static int record_main(const struct record_opts *o)
{
	struct recorder r = { .o = o };
	char err[512] = "";
	int rc = 1;

	if (session_check_caps(err, sizeof(err))) {
		st_err("%s", err);
		return 1;
	}
	wall_clock_init(&r.clk);
	/* A command is forked now but waits: it runs once the probes are armed. */
	if (launch_start(&r.l, &o->target, err, sizeof(err))) {
		st_err("%s", err);
		return 1;
	}
	if (runstats_init(&r.stats, &o->slo)) {
		snprintf(err, sizeof(err), "out of memory");
		goto out;
	}
	/* Before attaching: a slow attach must not swallow a Ctrl-C (and a
	 * background job starts with SIGINT ignored). */
	runloop_install_signals();
	if (open_outputs(&r, err, sizeof(err)) || start_session(&r, err, sizeof(err)))
		goto out;
	r.stats.http = r.s.http;   /* the socket's figures are the requests' headline */
	r.start_ns = r.last_tick_ns = mono_now_ns();
	if (write_session_line(&r)) {
		if (r.jsonl.error)
			ob_strerror(&r.jsonl, err, sizeof(err));
		else
			snprintf(err, sizeof(err), "out of memory writing the session record");
		goto out;
	}
	st_debug("attached to %s (pid %d) in %.3f ms", r.l.target.elf, (int)r.l.target.pid, r.s.attach_ns / 1e6);
	if (launch_release(&r.l, err, sizeof(err)))   /* the probes are armed: let it exec */
		st_err("%s", err);
	err[0] = 0;
	struct runloop rl = {
		.s = &r.s, .target = &r.l, .tick_ns = NS_PER_S, .on_tick = tick, .on_idle = idle, .ctx = &r, .input_fd = -1,
		.deadline_ns = o->common.duration_s > 0 ? r.start_ns + (uint64_t)(o->common.duration_s * 1e9) : 0,
	};
	rc = finish(&r, runloop_run(&rl), err, sizeof(err)) ? 1 : 0;
	if (!rc && session_engine_check(&r.s, &r.l.target, o->target.probes_optional, err, sizeof(err)))
		rc = 1;
	if (!rc)
		rc = launch_command_failure(&r.l);
out:
	if (rc && err[0])
		st_err("%s", err);
	recorder_free(&r);
	return rc;
}

int cmd_record(int argc, char **argv)
{
	static const struct common_opts defaults = { .level = LEVEL_DETAIL, .max_events = CHROME_DEFAULT_MAX_EVENTS };
	struct argp_child children[3];
	struct argp argp = { record_options, record_parse, "[-p PID | --binary PATH | -- CMD [ARGS...]]",
			     record_doc, children, NULL, NULL };
	struct record_opts o = { .common = defaults };

	tracing_argp_children(children, COMMON_ALL, &defaults);
	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, &o))
		return 2;
	return record_main(&o);
}
