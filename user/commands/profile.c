/* profile.c - `spantrace profile`: CPU samples and perf counters,
 * attributed to the engine's spans, written into one directory.
 *
 * One session does everything: the span probes (as record), per-CPU
 * counters read by the BPF side at span begin/end (perf_ncounters), and a
 * per-CPU cpu-clock sampling event whose program tags each sample with the
 * sampled thread's innermost span, or the process's (worker threads). */
#include "analysis/profile.h"
#include "commands/commands.h"

#include <argp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>
#include "core/clock.h"
#include "output/chrome.h"
#include "core/options.h"
#include "core/runloop.h"
#include "output/jsonl.h"
#include "output/summary.h"
#include "core/launch.h"
#include "core/numparse.h"
#include "output/outbuf.h"
#include "analysis/perfev.h"
#include "core/maps.h"
#include "core/session.h"

#define TOP_FUNCTIONS 15
#define MAX_SYM_PIDS 256

struct profile_opts {
	struct launch_opts target;
	struct common_opts common;
	unsigned hz;
	const char *events;
	const char *dir;
};

/* What the run has seen, beyond struct profile_samples/struct profile_counters. */
struct profiler {
	const struct session *s;
	struct profile_samples samples;
	struct profile_counters counters;
	struct chrome_writer *chrome;
	struct outbuf spans;
	uint64_t inherited;            /* samples attributed via proc_span */
	uint64_t alloc_failed;
	uint64_t span_count[SPAN_KINDS], span_ns[SPAN_KINDS];
	struct sym_pid {
		pid_t pid;
		int engine;                /* maps read after its first probe hit */
	} sym_pids[MAX_SYM_PIDS];
	size_t nsym_pids;
	__u64 kips[PROFILE_STACK_DEPTH], uips[PROFILE_STACK_DEPTH];
};

/* ---- events ---- */
/* Maps are read on a pid's first sample, while it surely lives, and again
 * on its first probe hit: a command's first samples come from our forked
 * child before it execs the engine, whose maps are then all different. */
static void symbols_for_pid(struct profiler *p, pid_t pid, int engine)
{
	struct sym_pid *sp = NULL;

	for (size_t i = 0; i < p->nsym_pids && !sp; i++)
		if (p->sym_pids[i].pid == pid)
			sp = &p->sym_pids[i];
	if (sp && (sp->engine || !engine))
		return;
	if (!sp && p->nsym_pids < MAX_SYM_PIDS) {
		sp = &p->sym_pids[p->nsym_pids++];
		sp->pid = pid;
	}
	if (sp)
		sp->engine = engine;
	if (sym_load_pid(p->samples.sym, pid))
		st_debug("cannot read /proc/%d/maps; its frames stay unresolved", (int)pid);
}

static int on_sample(void *ctx, const struct sample_event *e)
{
	struct profiler *p = ctx;
	const char *span = e->kind != SPAN_KIND_COUNT ? span_kind_name(e->kind) : NULL;
	int have_k = maps_read_stack(p->s, e->kstack_id, p->kips) == 0;
	int have_u = maps_read_stack(p->s, e->ustack_id, p->uips) == 0;

	symbols_for_pid(p, (pid_t)e->h.pid, 0);
	if (e->flags & SAMPLE_F_INHERITED)
		p->inherited++;
	if (profile_samples_add(&p->samples, (pid_t)e->h.pid, span, have_k ? p->kips : NULL,
				have_k ? PROFILE_STACK_DEPTH : 0, have_u ? p->uips : NULL,
				have_u ? PROFILE_STACK_DEPTH : 0, 1))
		p->alloc_failed++;
	return 0;
}

/* Every probe record: the process is our engine, its maps are final. */
static int on_probe(void *ctx, const struct event_header *h)
{
	symbols_for_pid(ctx, (pid_t)h->pid, 1);
	return 0;
}

static int on_span(void *ctx, const struct span_event *e)
{
	struct profiler *p = ctx;

	on_probe(p, &e->h);
	p->span_count[e->kind]++;
	p->span_ns[e->kind] += e->dur_ns;
	return 0;
}

static int on_token(void *ctx, const struct token_event *e) { return on_probe(ctx, &e->h); }
static int on_request(void *ctx, const struct request_event *e) { return on_probe(ctx, &e->h); }
static int on_alloc(void *ctx, const struct alloc_event *e) { return on_probe(ctx, &e->h); }
static int on_kv(void *ctx, const struct kv_event *e) { return on_probe(ctx, &e->h); }
static int on_kernel(void *ctx, const struct kernel_event *e) { return on_probe(ctx, &e->h); }

static const struct event_handlers profiler_handlers = {
	.span = on_span,
	.token = on_token,
	.request = on_request,
	.alloc = on_alloc,
	.free = on_alloc,
	.kv = on_kv,
	.kernel = on_kernel,
	.sample = on_sample,
};

/* spans.jsonl holds only the spans. */
static int write_span(void *ob, const struct span_event *e)
{
	return jsonl_handlers.span(ob, e);
}

static const struct event_handlers spans_only_handlers = { .span = write_span };

/* The profiler first (symbols before anything is written), then the
 * counter totals, the spans file and the Chrome trace. */
static size_t profiler_sinks(struct profiler *p, struct event_sink *sinks)
{
	size_t n = 0;

	sinks[n++] = (struct event_sink){ &profiler_handlers, p };
	sinks[n++] = (struct event_sink){ &profile_counters_handlers, &p->counters };
	sinks[n++] = (struct event_sink){ &spans_only_handlers, &p->spans };
	sinks[n++] = (struct event_sink){ &chrome_handlers, p->chrome };
	return n;
}

/* ---- the output directory ---- */

static int dir_made;   /* make_dir created it: a run that fails before writing removes it */

/* A failed run leaves no empty directory of its own making behind
 * (rmdir: only an empty one goes, so nothing written is lost). */
static void drop_empty_dir(const struct profile_opts *o)
{
	if (dir_made && o->dir)
		rmdir(o->dir);
	dir_made = 0;
}

static int make_dir(struct profile_opts *o, char *buf, size_t len, char *err, size_t errlen)
{
	if (!o->dir) {
		time_t now = time(NULL);
		struct tm tm;
		localtime_r(&now, &tm);
		strftime(buf, len, "spantrace-profile-%Y%m%d-%H%M%S", &tm);
		o->dir = buf;
	}
	if (mkdir(o->dir, 0750) == 0)
		dir_made = 1;
	else if (errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", o->dir, strerror(errno));
		return -1;
	}
	struct stat st;
	if (lstat(o->dir, &st) || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s is not a directory", o->dir);
		return -1;
	}
	return 0;
}

static void out_path(const struct profile_opts *o, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", o->dir, name);
}

/* Creates DIR/name (no symlink following, 0640) for stdio. */
static FILE *out_file(const struct profile_opts *o, const char *name, char *err, size_t errlen)
{
	char path[4096];
	int fd;
	FILE *f;

	out_path(o, name, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		snprintf(err, errlen, "cannot create %.400s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	return f;
}

static int close_file(FILE *f, const struct profile_opts *o, const char *name, char *err,
		      size_t errlen)
{
	int bad = ferror(f);
	if (fclose(f) || bad) {
		snprintf(err, errlen, "cannot write %s/%s", o->dir, name);
		return -1;
	}
	return 0;
}

/* Writes j to DIR/name and releases j. */
static int write_json(const struct profile_opts *o, const char *name, json_object *j,
		      char *err, size_t errlen)
{
	char path[4096];
	int rc;

	out_path(o, name, path, sizeof(path));
	rc = json_write_file(path, j, err, errlen);
	json_object_put(j);
	return rc;
}

/* ---- summary.json ---- */
static json_object *samples_json(const struct profiler *p, const struct counters *c, unsigned hz)
{
	json_object *j = json_object_new_object();
	if (!j)
		return NULL;
	json_object_object_add(j, "hz", json_object_new_int64(hz));
	json_object_object_add(j, "total", json_object_new_uint64(p->samples.samples));
	json_object_object_add(j, "no_span", json_object_new_uint64(p->samples.no_span));
	json_object_object_add(j, "pool_idle", json_object_new_uint64(p->samples.pool_idle));
	json_object_object_add(j, "inherited", json_object_new_uint64(p->inherited));
	json_object_object_add(j, "no_user_stack", json_object_new_uint64(p->samples.no_user_stack));
	json_object_object_add(j, "stack_errors", json_object_new_uint64(c->stack_errors));
	json_object_object_add(j, "fired", json_object_new_uint64(c->fired[EV_SAMPLE]));
	json_object_object_add(j, "dropped", json_object_new_uint64(c->dropped[EV_SAMPLE]));
	json_object_object_add(j, "distinct_stacks", json_object_new_uint64(folded_stacks(p->samples.folded)));
	return j;
}

static json_object *spans_json(const struct profiler *p)
{
	json_object *j = json_object_new_object();
	for (int k = 0; j && k < SPAN_KINDS; k++) {
		if (!p->span_count[k])
			continue;
		json_object *s = json_object_new_object();
		json_object_object_add(s, "count", json_object_new_uint64(p->span_count[k]));
		json_object_object_add(s, "total_ns", json_object_new_uint64(p->span_ns[k]));
		json_object_object_add(j, span_kind_name(k), s);
	}
	return j;
}

static json_object *profile_summary_json(const struct profile_opts *o, const struct profiler *p,
				 const struct session *s, const struct counters *c,
				 const struct perf_counters *pc, const struct launch *l, double wall_s)
{
	json_object *j = json_object_new_object();
	char how[128];

	if (!j)
		return NULL;
	launch_describe_exit(l, how, sizeof(how));
	json_object_object_add(j, "binary", json_object_new_string(l->target.shown));
	json_object_object_add(j, "target", json_object_new_string(launch_mode_name(l->mode)));
	json_object_object_add(j, "target_exit", json_object_new_string(how));
	json_object_object_add(j, "wall_s", json_object_new_double(wall_s));
	json_object_object_add(j, "perf_counters", summary_perf_names_json(pc));
	json_object_object_add(j, "perf_counters_dropped", json_object_new_string(pc->dropped));
	json_object_object_add(j, "counter_scope",
			       json_object_new_string("per-CPU; a span's delta is its CPU's count between begin and end, "
						      "spans that changed CPU are unmeasured"));
	json_object_object_add(j, "samples", samples_json(p, c, o->hz));
	json_object_object_add(j, "spans", spans_json(p));
	json_object_object_add(j, "counters", profile_counters_json(&p->counters));
	json_object_object_add(j, "loss", summary_loss_json(s, c));
	return j;
}

/* ---- writing everything ---- */
/* What the tables below stand on: every stack lost, said first. */
static void write_stack_losses(FILE *f, const struct profiler *p, const struct counters *c)
{
	fprintf(f, "# %llu samples; %llu without a user stack (their id failed: %llu stack errors in the "
		"kernel, map full or unreadable), charged to their span with no frames\n",
		(unsigned long long)p->samples.samples, (unsigned long long)p->samples.no_user_stack,
		(unsigned long long)c->stack_errors);
}

static int write_samples(const struct profile_opts *o, const struct profiler *p, const struct counters *c,
			 char *err, size_t errlen)
{
	FILE *f = out_file(o, "folded.txt", err, errlen);
	if (!f)
		return -1;
	folded_write(p->samples.folded, f);
	if (close_file(f, o, "folded.txt", err, errlen))
		return -1;
	f = out_file(o, "top_functions.txt", err, errlen);
	if (!f)
		return -1;
	write_stack_losses(f, p, c);
	folded_write_top(p->samples.folded, f, TOP_FUNCTIONS);
	return close_file(f, o, "top_functions.txt", err, errlen);
}

static int write_outputs(const struct profile_opts *o, struct profiler *p, const struct session *s,
			 const struct counters *c, const struct perf_counters *pc, const struct launch *l,
			 double wall_s, char *err, size_t errlen)
{
	int rc = 0;

	if (write_samples(o, p, c, err, errlen) ||
	    write_json(o, "counters.json", profile_counters_json(&p->counters), err, errlen) ||
	    write_json(o, "summary.json", profile_summary_json(o, p, s, c, pc, l, wall_s), err, errlen))
		rc = -1;
	if (ob_close(&p->spans)) {
		if (!rc)
			ob_strerror(&p->spans, err, errlen);
		rc = -1;
	}
	if (p->chrome) {
		char cerr[256];
		if (chrome_close(p->chrome, cerr, sizeof(cerr)) && !rc) {
			snprintf(err, errlen, "%s", cerr);
			rc = -1;
		}
		p->chrome = NULL;
	}
	if (p->alloc_failed && !rc) {
		snprintf(err, errlen, "out of memory: %llu records could not be aggregated",
			 (unsigned long long)p->alloc_failed);
		rc = -1;
	}
	return rc;
}

static void report(const struct profile_opts *o, const struct profiler *p, const struct counters *c)
{
	if (o->common.quiet)
		return;
	fprintf(stderr, "spantrace: %llu samples (%llu outside spans, %llu a pool waiting, %llu without a user "
		"stack, %llu dropped), %llu spans, %llu events dropped in total\n",
		(unsigned long long)p->samples.samples, (unsigned long long)p->samples.no_span,
		(unsigned long long)p->samples.pool_idle, (unsigned long long)p->samples.no_user_stack,
		(unsigned long long)c->dropped[EV_SAMPLE], (unsigned long long)c->fired[EV_SPAN],
		(unsigned long long)event_types_sum(c->dropped));
	profile_counters_write(&p->counters, stderr);
	fprintf(stderr, "spantrace: wrote %s/{folded.txt, top_functions.txt, counters.json, summary.json, "
		"spans.jsonl, trace.json}\n", o->dir);
}

/* ---- the run ---- */
static int profiler_init(struct profiler *p, const struct profile_opts *o, const struct perf_counters *pc,
			 char *err, size_t errlen)
{
	char path[4096];

	memset(p, 0, sizeof(*p));
	if (profile_samples_init(&p->samples)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* kallsyms now, not on the first sample: reading it takes long
	 * enough for a short target to exit before its maps are read. */
	if (!sym_kernel_available(p->samples.sym))
		st_info("kernel symbols unavailable (/proc/kallsyms); kernel frames stay unresolved");
	profile_counters_init(&p->counters, pc->names, pc->ncounters);
	out_path(o, "spans.jsonl", path, sizeof(path));
	if (ob_open(&p->spans, path, err, errlen))
		return -1;
	out_path(o, "trace.json", path, sizeof(path));
	p->chrome = chrome_open(path, o->common.max_events, err, errlen);
	if (!p->chrome)
		return -1;
	chrome_set_counter_names(p->chrome, pc->names, pc->ncounters);
	chrome_set_device_offset(p->chrome, clock_raw_to_mono_ns());
	return 0;
}

static void profiler_free(struct profiler *p)
{
	if (p->chrome)
		chrome_close(p->chrome, NULL, 0);
	if (p->spans.buf)
		ob_close(&p->spans);
	free(p->spans.path);
	profile_samples_free(&p->samples);
}

/* Opens the perf events and the session and attaches everything. */
static int start(const struct profile_opts *o, struct session *s, struct launch *l,
		 struct perf_counters *pc, struct perf_sampler *ps, struct profiler *p, int *session_ok,
		 char *err, size_t errlen)
{
	struct event_sink sinks[SESSION_MAX_SINKS];
	struct session_opts so = {
		.pid_filter = l->target.pid > 0 ? (uint32_t)l->target.pid : 0,
		.level = o->common.level,
		.stream_mode = STREAM_ALL,
		.perf_mode = 1,
		.perf_ncounters = pc->ncounters,
		.perf_ncpus = pc->ncpus,
		.ringbuf_kb = 16384, /* samples arrive in bursts from every CPU */
		.no_probes = l->target.engine != ENGINE_INFER,
		.engines = l->target.engine == ENGINE_LLAMACPP || l->target.pending,
	};

	if (session_open(s, &so, sinks, profiler_sinks(p, sinks), err, errlen))
		return -1;
	*session_ok = 1;
	p->s = s;
	if (pc->ncounters &&
	    perfev_counters_install(pc, maps_perf_counters_fd(s), err, errlen))
		return -1;
	if (session_attach_target(s, &l->target, l->target.pid > 0 ? l->target.pid : -1, l->mode == LAUNCH_PID, err,
				  errlen) ||
	    session_attach_sampler(s, ps->fds, ps->ncpus, err, errlen))
		return -1;
	return launch_release(l, err, errlen);
}

/* The run loop until the target exits, the duration or a signal; then
 * nothing may still be producing when the counters are read. Returns the
 * wall time. */
static double run(const struct profile_opts *o, struct session *s, struct launch *l, struct profiler *p,
		  struct counters *c)
{
	uint64_t t0 = mono_now_ns();
	char err[PATH_MAX + 128];
	struct runloop rl = {
		.s = s, .target = l, .ctx = p, .input_fd = -1,
		.deadline_ns = o->common.duration_s > 0 ? t0 + (uint64_t)(o->common.duration_s * 1e9) : 0,
	};
	enum stop_reason why = runloop_run(&rl);
	double wall_s = (mono_now_ns() - t0) / 1e9;

	session_detach(s);
	session_consume(s);
	launch_end(l);
	maps_read_counters(s, c);
	st_debug("stopped: %s", stop_reason_text(why));
	if (session_engine_check(s, &l->target, o->target.probes_optional, err, sizeof(err)))
		st_err("%s", err);
	if (why == STOP_RINGBUF_ERROR)
		st_err("reading the ring buffer failed; writing what was read");
	return wall_s;
}

static int profile_main(struct profile_opts *o)
{
	struct perf_counters pc = { 0 };
	struct perf_sampler ps = { 0 };
	struct session s = { 0 };
	struct profiler p;
	struct launch l;
	struct counters c;
	char err[512], dirbuf[64];
	int rc = 1, session_ok = 0;

	err[0] = 0;
	memset(&p, 0, sizeof(p));
	if (session_check_caps(err, sizeof(err)) || make_dir(o, dirbuf, sizeof(dirbuf), err, sizeof(err)) ||
	    perfev_counters_open(&pc, o->events, err, sizeof(err)) ||
	    perfev_sampler_open(&ps, o->hz, err, sizeof(err))) {
		st_err("%s", err);
		perfev_counters_close(&pc);
		drop_empty_dir(o);
		return 1;
	}
	if (launch_start(&l, &o->target, err, sizeof(err))) {
		st_err("%s", err);
		perfev_sampler_close(&ps);
		perfev_counters_close(&pc);
		drop_empty_dir(o);
		return 1;
	}
	runloop_install_signals();
	if (profiler_init(&p, o, &pc, err, sizeof(err)) ||
	    start(o, &s, &l, &pc, &ps, &p, &session_ok, err, sizeof(err)))
		goto out;
	double wall_s = run(o, &s, &l, &p, &c);
	if (write_outputs(o, &p, &s, &c, &pc, &l, wall_s, err, sizeof(err)))
		goto out;
	report(o, &p, &c);
	rc = 0;
out:
	if (rc && err[0])
		st_err("%s", err);
	if (rc)
		drop_empty_dir(o);
	launch_end(&l);
	if (!rc)
		rc = launch_command_failure(&l);
	if (session_ok)
		session_close(&s);
	profiler_free(&p);
	perfev_sampler_close(&ps);
	perfev_counters_close(&pc);
	return rc;
}

/* ---- options ---- */
static const char profile_doc[] =
	"Sample the CPU and read perf counters, attributed to the engine's spans.\n"
	"\n"
	"Each CPU sample is tagged with the span the sampled thread is in (or, for\n"
	"worker threads, the span the process is in). Counters are read by the BPF\n"
	"program at every span begin and end on the span's CPU; a span that moved to\n"
	"another CPU is counted as unmeasured. Hardware events are dropped with a\n"
	"note where there is no PMU (VMs).\n"
	"\n"
	"Writes into DIR: folded.txt (flamegraph.pl / speedscope input, rooted at the\n"
	"span), top_functions.txt, counters.json, summary.json, spans.jsonl (with\n"
	"counter deltas, names in summary.json perf_counters) and trace.json (Chrome\n"
	"trace, for ui.perfetto.dev).\n"
	"\n"
	"With --binary only processes that have entered a span are sampled, and the\n"
	"run ends with --duration or Ctrl-C.\n"
	"\v"
	"EXAMPLES:\n"
	"  spantrace profile -- build/infer model.bin -z tokenizer.bin -n 64 -b cpu\n"
	"  spantrace profile -F 999 -o prof -- build/infer model.bin --ids -n 32\n"
	"        npx speedscope prof/folded.txt   (the flame graph, npm speedscope)\n"
	"  spantrace profile -p 1234 --duration 10 --events task-clock,page-faults\n"
	"  spantrace profile --binary build/infer --level coarse --duration 30\n"
	"\n"
	"Exit status: 0; 1 on an error of ours; 2 on bad options. With -- CMD, a command that\n"
	"failed by itself gives its own status (128 + N for signal N); DIR is written all the same.\n"
	"Needs CAP_BPF and CAP_PERFMON (or root).";

enum { OPT_EVENTS = 2000 };

static const struct argp_option profile_options[] = {
	{ "freq", 'F', "HZ", 0, "Samples per second per CPU (default 99)", 1 },
	{ "events", OPT_EVENTS, "LIST", 0, "Counters, comma-separated (default " PERFEV_DEFAULT_EVENTS ")", 1 },
	{ "output", 'o', "DIR", 0, "Output directory (default ./spantrace-profile-<time>)", 1 },
	{ 0 },
};

static error_t profile_parse(int key, char *arg, struct argp_state *state)
{
	struct profile_opts *o = state->input;
	uint64_t v;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &o->target;
		state->child_inputs[1] = &o->common;
		break;
	case 'F':
		if (parse_uint(arg, 1, 100000, &v))
			argp_error(state, "invalid frequency '%s' (1..100000 Hz)", arg);
		o->hz = (unsigned)v;
		break;
	case OPT_EVENTS: o->events = arg; break;
	case 'o': o->dir = arg; break;
	case ARGP_KEY_SUCCESS:
		/* a profile is stacks per span: no socket request would show in it */
		if (o->target.http || o->target.engine == ENGINE_NONE)
			argp_error(state, "--http and --engine none are for record, top and daemon, not profile");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int cmd_profile(int argc, char **argv)
{
	static const struct common_opts defaults = { .level = LEVEL_DETAIL, .max_events = CHROME_DEFAULT_MAX_EVENTS };
	struct argp_child children[3];
	struct argp argp = { profile_options, profile_parse, "[-p PID | --binary PATH | -- CMD [ARGS...]]",
			     profile_doc, children, NULL, NULL };
	struct profile_opts o = { .hz = PERFEV_DEFAULT_HZ, .common = defaults };

	argv[0] = (char *)"spantrace profile";
	tracing_argp_children(children, COMMON_ALL, &defaults);
	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, &o))
		return 2;
	return profile_main(&o);
}
