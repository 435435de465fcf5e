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
#include "output/chrome.h"
#include "output/export.h"
#include "core/launch.h"
#include "core/numparse.h"
#include "output/outbuf.h"
#include "analysis/perfev.h"
#include "core/maps.h"
#include "core/session.h"

#define POLL_MS 50
#define TOP_FUNCTIONS 15
#define MAX_SYM_PIDS 256

struct profile_opts {
	struct launch_opts target;
	unsigned hz;
	const char *events;
	const char *dir;
	enum trace_level level;
	double duration_s;
	uint64_t max_events;
	int quiet;
};

/* What the run has seen, beyond struct profile_samples/struct profile_counters. */
struct profiler {
	const struct session *s;
	struct profile_samples samples;
	struct profile_counters counters;
	struct chrome_writer *chrome;
	struct outbuf spans;
	int spans_failed;
	uint64_t inherited;            /* samples attributed via proc_span */
	uint64_t alloc_failed;
	uint64_t span_count[SPAN_KIND_COUNT], span_ns[SPAN_KIND_COUNT];
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

static void on_sample(struct profiler *p, const struct sample_event *e)
{
	const char *span = e->kind < SPAN_KIND_COUNT ? span_kind_name(e->kind) : NULL;
	int have_k = maps_read_stack(p->s, e->kstack_id, p->kips) == 0;
	int have_u = maps_read_stack(p->s, e->ustack_id, p->uips) == 0;

	symbols_for_pid(p, (pid_t)e->h.pid, 0);
	if (e->flags & SAMPLE_F_INHERITED)
		p->inherited++;
	if (profile_samples_add(&p->samples, (pid_t)e->h.pid, span, have_k ? p->kips : NULL,
				have_k ? PROFILE_STACK_DEPTH : 0, have_u ? p->uips : NULL,
				have_u ? PROFILE_STACK_DEPTH : 0, 1))
		p->alloc_failed++;
}

static void on_span(struct profiler *p, const void *data, size_t size)
{
	const struct span_event *e = data;

	profile_counters_add(&p->counters, e);
	if (e->kind < SPAN_KIND_COUNT) {
		p->span_count[e->kind]++;
		p->span_ns[e->kind] += e->dur_ns;
	}
	if (!p->spans_failed && export_jsonl_event(&p->spans, data, size))
		p->spans_failed = 1;
}

static int on_event(void *ctx, const void *data, size_t size)
{
	struct profiler *p = ctx;
	const struct event_header *h = data;

	if (h->type == EV_SAMPLE) {
		if (size >= sizeof(struct sample_event))
			on_sample(p, data);
		return 0;
	}
	symbols_for_pid(p, (pid_t)h->pid, 1);
	if (h->type == EV_SPAN && size >= sizeof(struct span_event))
		on_span(p, data, size);
	if (p->chrome && chrome_write_record(p->chrome, data, size))
		p->alloc_failed++;
	return 0;
}

/* ---- the output directory ---- */
static int make_dir(struct profile_opts *o, char *buf, size_t len, char *err, size_t errlen)
{
	if (!o->dir) {
		time_t now = time(NULL);
		struct tm tm;
		localtime_r(&now, &tm);
		strftime(buf, len, "spantrace-profile-%Y%m%d-%H%M%S", &tm);
		o->dir = buf;
	}
	if (mkdir(o->dir, 0750) && errno != EEXIST) {
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
	FILE *f;
	int rc;

	if (!j) {
		snprintf(err, errlen, "out of memory building %s", name);
		return -1;
	}
	f = out_file(o, name, err, errlen);
	if (!f) {
		json_object_put(j);
		return -1;
	}
	fputs(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE), f);
	fputc('\n', f);
	rc = close_file(f, o, name, err, errlen);
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
	for (int k = 0; j && k < SPAN_KIND_COUNT; k++) {
		if (!p->span_count[k])
			continue;
		json_object *s = json_object_new_object();
		json_object_object_add(s, "count", json_object_new_uint64(p->span_count[k]));
		json_object_object_add(s, "total_ns", json_object_new_uint64(p->span_ns[k]));
		json_object_object_add(j, span_kind_name(k), s);
	}
	return j;
}

static json_object *loss_json(const struct session *s, const struct counters *c)
{
	json_object *j = json_object_new_object();
	uint64_t fired = event_types_sum(c->fired), dropped = event_types_sum(c->dropped);
	uint64_t delivered = session_delivered_total(s);
	if (!j)
		return NULL;
	json_object_object_add(j, "fired", json_object_new_uint64(fired));
	json_object_object_add(j, "delivered", json_object_new_uint64(delivered));
	json_object_object_add(j, "dropped", json_object_new_uint64(dropped));
	json_object_object_add(j, "balanced", json_object_new_boolean(delivered + dropped == fired));
	json_object_object_add(j, "span_errors", json_object_new_uint64(c->span_errors));
	json_object_object_add(j, "orphan_ends", json_object_new_uint64(c->orphan_ends));
	json_object_object_add(j, "counters_invalid", json_object_new_uint64(c->counters_invalid));
	return j;
}

static json_object *summary_json(const struct profile_opts *o, const struct profiler *p,
				 const struct session *s, const struct counters *c,
				 const struct perf_counters *pc, const struct launch *l, double wall_s)
{
	json_object *j = json_object_new_object(), *names = json_object_new_array();
	char how[128];

	if (!j || !names) {
		json_object_put(j);
		json_object_put(names);
		return NULL;
	}
	for (unsigned i = 0; i < pc->ncounters; i++)
		json_object_array_add(names, json_object_new_string(pc->names[i]));
	launch_describe_exit(l, how, sizeof(how));
	json_object_object_add(j, "binary", json_object_new_string(l->target.shown));
	json_object_object_add(j, "target", json_object_new_string(launch_mode_name(l->mode)));
	json_object_object_add(j, "target_exit", json_object_new_string(how));
	json_object_object_add(j, "wall_s", json_object_new_double(wall_s));
	json_object_object_add(j, "perf_counters", names);
	json_object_object_add(j, "perf_counters_dropped", json_object_new_string(pc->dropped));
	json_object_object_add(j, "counter_scope",
			       json_object_new_string("per-CPU; a span's delta is its CPU's count between begin and end, "
						      "spans that changed CPU are unmeasured"));
	json_object_object_add(j, "samples", samples_json(p, c, o->hz));
	json_object_object_add(j, "spans", spans_json(p));
	json_object_object_add(j, "counters", profile_counters_json(&p->counters));
	json_object_object_add(j, "loss", loss_json(s, c));
	return j;
}

/* ---- writing everything ---- */
static int write_samples(const struct profile_opts *o, const struct profiler *p, char *err, size_t errlen)
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
	folded_write_top(p->samples.folded, f, TOP_FUNCTIONS);
	return close_file(f, o, "top_functions.txt", err, errlen);
}

static int write_outputs(const struct profile_opts *o, struct profiler *p, const struct session *s,
			 const struct counters *c, const struct perf_counters *pc, const struct launch *l,
			 double wall_s, char *err, size_t errlen)
{
	int rc = 0;

	if (write_samples(o, p, err, errlen) ||
	    write_json(o, "counters.json", profile_counters_json(&p->counters), err, errlen) ||
	    write_json(o, "summary.json", summary_json(o, p, s, c, pc, l, wall_s), err, errlen))
		rc = -1;
	if (ob_close(&p->spans) || p->spans_failed) {
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
	if (o->quiet)
		return;
	fprintf(stderr, "spantrace: %llu samples (%llu outside spans, %llu dropped), %llu spans, "
		"%llu events dropped in total\n",
		(unsigned long long)p->samples.samples, (unsigned long long)p->samples.no_span,
		(unsigned long long)c->dropped[EV_SAMPLE], (unsigned long long)c->fired[EV_SPAN],
		(unsigned long long)event_types_sum(c->dropped));
	profile_counters_write(&p->counters, stderr);
	fprintf(stderr, "spantrace: wrote %s/{folded.txt, top_functions.txt, counters.json, summary.json, "
		"spans.jsonl, trace.json}\n", o->dir);
}

/* ---- the run ---- */
static const char *run_loop(const struct profile_opts *o, struct session *s, struct launch *l)
{
	uint64_t start = mono_now_ns();
	uint64_t deadline = o->duration_s > 0 ? start + (uint64_t)(o->duration_s * 1e9) : 0;

	for (;;) {
		if (session_poll(s, POLL_MS) < 0)
			return "ring buffer error";
		if (session_stop_requested)
			return "interrupted";
		if (deadline && mono_now_ns() >= deadline)
			return "duration reached";
		if (launch_target_gone(l))
			return "target exited";
	}
}

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
	p->chrome = chrome_open(path, o->max_events, err, errlen);
	if (!p->chrome)
		return -1;
	chrome_set_counter_names(p->chrome, pc->names, pc->ncounters);
	chrome_set_device_offset(p->chrome, chrome_measure_raw_offset());
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
	struct session_opts so = {
		.pid_filter = l->target.pid > 0 ? (uint32_t)l->target.pid : 0,
		.level = o->level,
		.stream_mode = STREAM_ALL,
		.perf_mode = 1,
		.perf_ncounters = pc->ncounters,
		.perf_ncpus = pc->ncpus,
		.ringbuf_kb = 16384, /* samples arrive in bursts from every CPU */
	};

	if (session_open(s, &so, on_event, p, err, errlen))
		return -1;
	*session_ok = 1;
	p->s = s;
	if (pc->ncounters &&
	    perfev_counters_install(pc, maps_perf_counters_fd(s), err, errlen))
		return -1;
	if (session_attach(s, l->target.elf, l->target.pid > 0 ? l->target.pid : -1, err, errlen) ||
	    session_attach_sampler(s, ps->fds, ps->ncpus, err, errlen))
		return -1;
	return launch_release(l, err, errlen);
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
		return 1;
	}
	if (launch_start(&l, &o->target, err, sizeof(err))) {
		st_err("%s", err);
		perfev_sampler_close(&ps);
		perfev_counters_close(&pc);
		return 1;
	}
	if (profiler_init(&p, o, &pc, err, sizeof(err)) ||
	    start(o, &s, &l, &pc, &ps, &p, &session_ok, err, sizeof(err)))
		goto out;
	uint64_t t0 = mono_now_ns();
	const char *why = session_stop_requested ? "interrupted" : run_loop(o, &s, &l);
	double wall_s = (mono_now_ns() - t0) / 1e9;
	/* Nothing may still be producing when the counters are read. */
	session_detach(&s);
	session_drain(&s);
	launch_end(&l);
	maps_read_counters(&s, &c);
	st_debug("stopped: %s", why);
	if (write_outputs(o, &p, &s, &c, &pc, &l, wall_s, err, sizeof(err)))
		goto out;
	report(o, &p, &c);
	rc = 0;
out:
	if (rc && err[0])
		st_err("%s", err);
	launch_end(&l);
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
	"        flamegraph.pl prof/folded.txt > prof.svg\n"
	"  spantrace profile -p 1234 --duration 10 --events task-clock,page-faults\n"
	"  spantrace profile --binary build/infer --level coarse --duration 30\n"
	"\n"
	"Needs CAP_BPF and CAP_PERFMON (or root).";

enum { OPT_EVENTS = 2000, OPT_LEVEL, OPT_DURATION, OPT_MAX_EVENTS };

static const struct argp_option profile_options[] = {
	{ "freq", 'F', "HZ", 0, "Samples per second per CPU (default 99)", 1 },
	{ "events", OPT_EVENTS, "LIST", 0, "Counters, comma-separated (default " PERFEV_DEFAULT_EVENTS ")", 1 },
	{ "output", 'o', "DIR", 0, "Output directory (default ./spantrace-profile-<time>)", 1 },
	{ "level", OPT_LEVEL, "LEVEL", 0, "coarse or detail (default) spans", 1 },
	{ "duration", OPT_DURATION, "SEC", 0, "Stop after SEC seconds", 1 },
	{ "max-events", OPT_MAX_EVENTS, "N", 0, "At most N events in trace.json (default 1000000)", 1 },
	{ "quiet", 'q', NULL, 0, "No summary on stderr", 2 },
	{ "verbose", 'v', NULL, 0, "More logging (twice: libbpf debug)", 2 },
	{ 0 },
};

static error_t profile_parse(int key, char *arg, struct argp_state *state)
{
	struct profile_opts *o = state->input;
	uint64_t v;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &o->target;
		break;
	case 'F':
		if (parse_uint(arg, 1, 100000, &v))
			argp_error(state, "invalid frequency '%s' (1..100000 Hz)", arg);
		o->hz = (unsigned)v;
		break;
	case OPT_EVENTS: o->events = arg; break;
	case 'o': o->dir = arg; break;
	case OPT_LEVEL:
		if (trace_level_parse(arg, &o->level))
			argp_error(state, "invalid level '%s' (coarse or detail)", arg);
		break;
	case OPT_DURATION:
		if (parse_real_above(arg, 0, DURATION_MAX_S, &o->duration_s))
			argp_error(state, "invalid duration '%s' (seconds > 0)", arg);
		break;
	case OPT_MAX_EVENTS:
		if (parse_uint(arg, 1, UINT64_MAX, &v))
			argp_error(state, "invalid --max-events '%s' (a whole number >= 1)", arg);
		o->max_events = v;
		break;
	case 'q': o->quiet = 1; break;
	case 'v': st_verbose++; break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int cmd_profile(int argc, char **argv)
{
	static const struct argp_child children[] = { { &launch_argp, 0, "Target (exactly one):", 0 }, { 0 } };
	static const struct argp argp = { profile_options, profile_parse,
					  "[-p PID | --binary PATH | -- CMD [ARGS...]]", profile_doc,
					  children, NULL, NULL };
	struct profile_opts o = { .hz = PERFEV_DEFAULT_HZ, .level = LEVEL_DETAIL };

	argv[0] = (char *)"spantrace profile";
	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, &o))
		return 2;
	session_install_signals();
	return profile_main(&o);
}
