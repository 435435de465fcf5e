/* session.c - the libbpf lifecycle the commands share (see session.h):
 * privileges, then open (knobs, map sizes, which programs load), load,
 * the ring buffer's records into the joins and the decoder, then detach
 * and close. The attaches (and the engine's probe table) are
 * session_attach.c, --http's session_http.c, the links kept
 * session_links.c. */
#include "core/session_impl.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "core/clock.h"
#include "core/engines.h"
#include "core/log.h"
#include "core/opencl_attach.h"
#include "core/target.h"
#include "core/userspans.h"
#include "core/fleet.h"
#include "core/follow.h"
#include "core/features.h"
#include "core/uprobe_multi.h"

/* 2 MiB: ~0.4 s of detail-level events at 500 tok/s against a 50 ms poll.
 * The data pages are mapped twice (for wrap-around), so this is ~4 MB of RSS. */
#define DEFAULT_RINGBUF_KB 2048

static int libbpf_print(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	if (lvl == LIBBPF_DEBUG && st_verbose < 2)
		return 0;
	if (lvl == LIBBPF_INFO && !st_verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* ---- privileges ---- */
/* The privileges, then the kernel features every tracing command needs
 * (core/features.h): both before anything is started or created. */
int session_check_caps(char *err, size_t errlen)
{
	unsigned long long eff;
	int bpf, perfmon, sysadmin;

	if (caps_effective(&eff)) {
		snprintf(err, errlen, "cannot read capabilities: %s", strerror(errno));
		return -1;
	}
	bpf = (eff >> CAP_BPF) & 1;
	perfmon = (eff >> CAP_PERFMON) & 1;
	sysadmin = (eff >> CAP_SYS_ADMIN) & 1;
	if (sysadmin || (bpf && perfmon))
		return features_require(err, errlen);
	snprintf(err, errlen, "insufficient privileges: need CAP_BPF and CAP_PERFMON (missing%s%s); run as root",
		 bpf ? "" : " CAP_BPF", perfmon ? "" : " CAP_PERFMON");
	return -1;
}

/* ---- lifecycle ---- */
static unsigned ringbuf_size(unsigned kb)
{
	unsigned long want = (unsigned long)(kb ? kb : DEFAULT_RINGBUF_KB) * 1024;
	unsigned long size = (unsigned long)sysconf(_SC_PAGESIZE);

	/* The kernel needs a power-of-two number of pages. */
	while (size < want && size < (1ul << 30))
		size <<= 1;
	return (unsigned)size;
}

/* Every record goes through the one decoder; records it rejects are
 * counted by verdict, and a sink's error stops the consume. */
static int dispatch(void *ctx, const void *data, size_t size)
{
	struct session *s = ctx;
	enum event_verdict v;
	int rc = event_dispatch(data, size, s->sinks, s->nsinks, &v);

	if (v != EVENT_OK)
		s->invalid[v]++;
	if (rc && !s->cb_error)
		s->cb_error = rc;
	return rc;
}

/* A watched command's dynamic linker changed its libraries, and the BPF
 * side stopped it: attach llama.cpp if it is there now, then let it go on. */
static void dl_changed(struct session *s, pid_t pid)
{
	struct target t;
	char err[PATH_MAX + 128];

	memset(&t, 0, sizeof(t));
	if (pid == s->dl_pid && s->skel->bss->dl_watch && !engine_llamacpp_in_pid(pid, &t)) {
		s->skel->bss->dl_watch = 0;
		if (session_attach_engine(s, &t, pid, err, sizeof(err)))
			st_err("pid %d loaded llama.cpp, but %s", (int)pid, err);
		else
			st_debug("pid %d loaded llama.cpp: %s", (int)pid, t.shown);
	}
	kill(pid, SIGCONT);
}

/* From the device-time join to the request join (core/reqjoin.h), then the decoder. */
static int to_reqjoin(void *ctx, const void *data, size_t size)
{
	struct session *s = ctx;

	return reqjoin_feed(&s->reqjoin, data, size);
}

/* Records reach the decoder through the device-time join (core/devjoin.h). */
static int ring_cb(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;
	const struct event_header *h = data;

	s->delivered[size >= sizeof(*h) && h->type < EV_TYPE_COUNT ? h->type : 0]++;
	if (size >= sizeof(*h) && h->type == EV_DL_CHANGE) {
		dl_changed(s, (pid_t)h->pid);
		return 0;
	}
	return devjoin_feed(&s->join, data, size);
}

/* The --opencl programs (core/opencl_attach.h) are verified and loaded only
 * when asked for; without them their maps shrink to one entry. binary
 * (--binary, else NULL): only processes running that executable are
 * traced, though the loader is shared. */
static int opencl_set_autoload(struct session *s, int on, const char *binary)
{
	size_t n, nmaps;
	const struct cl_probe *p = opencl_probes(&n);
	const char *const *maps = opencl_maps(&nmaps);
	struct bpf_program *prog;
	struct bpf_map *map;
	uint64_t ino;
	uint32_t dev;

	for (size_t i = 0; i < n; i++)
		if ((prog = bpf_object__find_program_by_name(s->skel->obj, p[i].prog)))
			bpf_program__set_autoload(prog, on);
	for (size_t i = 0; !on && i < nmaps; i++)
		if (!(map = bpf_object__find_map_by_name(s->skel->obj, maps[i])) || bpf_map__set_max_entries(map, 1))
			return -1;
	if (!on || !binary)
		return 0;
	if (opencl_exe_id(binary, &ino, &dev))
		return -1;
	s->skel->rodata->cl_exe_ino = ino;
	s->skel->rodata->cl_exe_dev = dev;
	return 0;
}

/* Engine profiles' programs (bpf/engines.bpf.h: engine_*, and dl_change)
 * are verified and loaded, and their maps sized, only for a session that
 * may meet another engine: they cost every other session its load time. */
static int engines_set_autoload(struct session *s, int on, char *err, size_t errlen)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, s->skel->obj) {
		const char *name = bpf_program__name(prog);

		if (!strncmp(name, "engine_", 7) || !strcmp(name, "dl_change"))
			bpf_program__set_autoload(prog, on);
	}
	if (!on && (bpf_map__set_max_entries(s->skel->maps.seqs, 1) ||
		    bpf_map__set_max_entries(s->skel->maps.engine_calls, 1) ||
		    bpf_map__set_max_entries(s->skel->maps.prompts, 1) ||
		    bpf_map__set_max_entries(s->skel->maps.prompt_prefix, 1) ||   /* 2 MiB */
		    bpf_map__set_max_entries(s->skel->maps.seq_kv, 1))) {         /* 4 MiB */
		snprintf(err, errlen, "cannot size the engine profile maps");
		return -1;
	}
	return 0;
}

/* Every engine probe program goes through uprobe_multi links (when the
 * kernel has them), as the function probes do (prepare_func_links). */
static int prepare_engine_links(struct session *s)
{
	struct engine_probe table[PROBE_ID_COUNT];
	struct bpf_program *progs[PROBE_ID_COUNT];
	size_t n = session_engine_probes(s->skel, table), nprogs = 0;

	/* each program once, however many rows share it */
	for (size_t i = 0; i < n; i++) {
		size_t j = 0;

		while (j < nprogs && progs[j] != table[i].prog)
			j++;
		if (j == nprogs)
			progs[nprogs++] = table[i].prog;
	}
	return umulti_prepare(progs, nprogs);
}

/* Every program that probes a function (an engine profile's, --span's,
 * --opencl's) goes through uprobe_multi links too: libbpf's per-probe
 * links close one after another, ~100 ms each here, where the multi
 * links' closes overlap (core/uprobe_multi.h). dl_change stays libbpf's. */
static int prepare_func_links(struct session *s)
{
	struct bpf_program *progs[64], *prog;
	size_t n = 0, ncl;
	const struct cl_probe *cl = opencl_probes(&ncl);

	bpf_object__for_each_program(prog, s->skel->obj) {
		const char *name = bpf_program__name(prog);
		int cl_prog = 0;

		for (size_t i = 0; i < ncl; i++)
			cl_prog |= !strcmp(name, cl[i].prog);
		if (n < sizeof(progs) / sizeof(progs[0]) &&
		    (cl_prog || prog == s->skel->progs.user_fn_entry || prog == s->skel->progs.user_fn_return ||
		     (!strncmp(name, "engine_", 7) && prog != s->skel->progs.engine_flush)))
			progs[n++] = prog;
	}
	if (umulti_prepare(progs, n))
		return -1;
	s->func_multi = 1;
	return 0;
}

/* Only the programs a session can attach are verified: the kernel's
 * verifier took 0.5 s for each of op_end, cl_batch, and --span's returns
 * and ends, 2.1 of the 3.4 s `record -p --level coarse` spent loading
 * (2026-11-27, a Zen 3 VM; 1.2 s after this). So a row's program loads
 * when a row the level attaches uses it, and --span's when there are
 * specs (all parsed before the session opens). */
static void set_level_autoload(struct session *s, const struct session_opts *o)
{
	struct spantrace_bpf *sk = s->skel;
	int spans = user_span_count() > 0;

	for (unsigned id = 0; id < PROBE_ID_COUNT; id++)
		bpf_program__set_autoload(session_probe_program(sk, id), false);
	for (unsigned id = 0; id < PROBE_ID_COUNT && !o->no_probes; id++)
		if (probe_rows[id].level != PROBE_LEVEL_DETAIL || o->level == LEVEL_DETAIL)
			bpf_program__set_autoload(session_probe_program(sk, id), true);
	bpf_program__set_autoload(sk->progs.user_fn_entry, spans);
	bpf_program__set_autoload(sk->progs.user_fn_return, spans);
	bpf_program__set_autoload(sk->progs.user_usdt_begin, spans);
	bpf_program__set_autoload(sk->progs.user_usdt_end, spans);
}

/* The profile maps cost nothing unless profiling: one entry each then. */
static int size_profile_maps(struct session *s, const struct session_opts *o,
			     char *err, size_t errlen)
{
	unsigned counters = o->perf_ncounters ? o->perf_ncpus * o->perf_ncounters : 1;

	if (o->perf_ncounters > PERF_COUNTERS_MAX || counters == 0) {
		snprintf(err, errlen, "invalid perf counter setup (%u counters, %u CPUs)",
			 o->perf_ncounters, o->perf_ncpus);
		return -1;
	}
	if (bpf_map__set_max_entries(s->skel->maps.perf_counters, counters) ||
	    bpf_map__set_max_entries(s->skel->maps.thread_counters,
				     o->perf_ncounters ? bpf_map__max_entries(s->skel->maps.threads) : 1) ||
	    bpf_map__set_max_entries(s->skel->maps.stacks, o->perf_mode ? PROFILE_STACK_ENTRIES : 1)) {
		snprintf(err, errlen, "cannot size the profile maps");
		return -1;
	}
	/* The sampling program is only verified and loaded when it is used. */
	bpf_program__set_autoload(s->skel->progs.profile_sample, o->perf_mode != 0);
	if (opencl_set_autoload(s, o->opencl, o->opencl_binary)) {
		snprintf(err, errlen, "cannot set up --opencl (%s)",
			 o->opencl_binary ? o->opencl_binary : "map sizes");
		return -1;
	}
	if (session_http_set_autoload(s, o->http)) {
		snprintf(err, errlen, "cannot set up --http (map sizes)");
		return -1;
	}
	return engines_set_autoload(s, o->engines, err, errlen);
}

/* The const volatile knobs and the ring buffer's size, before load. */
static int set_knobs(struct session *s, const struct session_opts *o, char *err, size_t errlen)
{
	s->skel->rodata->target_tgid = o->pid_filter;
	s->skel->rodata->level = o->level;
	s->skel->rodata->min_dur_ns = o->min_dur_ns;
	s->skel->rodata->perf_mode = o->perf_mode;
	s->skel->rodata->perf_ncounters = o->perf_ncounters;
	s->skel->rodata->stream_mode = o->stream_mode;
	s->skel->rodata->loaded = (o->no_probes ? 0 : LOADED_PROBES) | (o->engines ? LOADED_ENGINES : 0) |
				  (o->opencl ? LOADED_OPENCL : 0) | (o->http ? LOADED_HTTP : 0);
	s->ringbuf_bytes = ringbuf_size(o->ringbuf_kb);
	/* Wake the reader once a quarter of the buffer is waiting. */
	s->skel->rodata->wakeup_bytes = s->ringbuf_bytes / 4;
	if (bpf_map__set_max_entries(s->skel->maps.rb, s->ringbuf_bytes)) {
		snprintf(err, errlen, "cannot size the ring buffer to %u bytes", s->ringbuf_bytes);
		return -1;
	}
	return 0;
}

int session_open(struct session *s, const struct session_opts *o, const struct event_sink *sinks,
		 size_t nsinks, char *err, size_t errlen)
{
	struct session_opts with = *o;
	struct bpf_program *prog;
	int rc;

	memset(s, 0, sizeof(*s));
	if (with.http && feature_present(FEAT_SOCK_TP) == 0) {
		st_warn("HTTP requests are not traced: this kernel lacks the sock:sock_recv_length and "
			"sock_send_length tracepoints (Linux 6.3; `spantrace check`)");
		with.http = 0;
	}
	o = &with;
	if (nsinks > SESSION_MAX_SINKS) {
		snprintf(err, errlen, "too many record consumers (%zu)", nsinks);
		return -1;
	}
	memcpy(s->sinks, sinks, nsinks * sizeof(*sinks));
	s->nsinks = nsinks;
	s->level = o->level;
	s->stream_mode = o->stream_mode;
	s->opencl = o->opencl;
	s->http = o->http;
	s->http_alone = o->http_alone;
	/* the detail level attaches cl_batch: device spans then expect kernels */
	devjoin_init(&s->join, o->level == LEVEL_DETAIL, to_reqjoin, s);
	reqjoin_init(&s->reqjoin, dispatch, s);
	libbpf_set_print(libbpf_print);
	s->skel = spantrace_bpf__open();
	if (!s->skel) {
		snprintf(err, errlen, "cannot open the BPF object: %s", strerror(errno));
		return -1;
	}
	if (set_knobs(s, o, err, errlen) || size_profile_maps(s, o, err, errlen))
		goto fail;
	set_level_autoload(s, o);
	s->skel->rodata->engine_abi = engine_abi_of(ENGINE_LLAMACPP);
	/* Probes are attached by session_attach, for the level's probe names. */
	bpf_object__for_each_program(prog, s->skel->obj)
		bpf_program__set_autoattach(prog, false);
	s->um = umulti_new();
	if (!s->um || (umulti_enabled(s->um) && (prepare_engine_links(s) || prepare_func_links(s)))) {
		snprintf(err, errlen, "cannot set up the USDT links");
		goto fail;
	}
	rc = spantrace_bpf__load(s->skel);
	if (rc) {
		snprintf(err, errlen, "cannot load the BPF programs: %s (run with -v for the verifier log)",
			 strerror(-rc));
		goto fail;
	}
	if (umulti_enabled(s->um) && umulti_set_specs_map(s->um, s->skel->obj, err, errlen))
		goto fail;
	/* Loading parsed the kernel's BTF (several MB, freed by libbpf); give
	 * those pages back so a long session's RSS is what it really uses. */
	malloc_trim(0);
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.rb), ring_cb, s, NULL);
	if (!s->rb) {
		snprintf(err, errlen, "cannot set up the ring buffer: %s", strerror(errno));
		goto fail;
	}
	return 0;
fail:
	reqjoin_free(&s->reqjoin);
	umulti_free(s->um);
	s->um = NULL;
	spantrace_bpf__destroy(s->skel);
	s->skel = NULL;
	return -1;
}

/* ---- reading, detach, close ---- */

int session_epoll_fd(const struct session *s)
{
	return ring_buffer__epoll_fd(s->rb);
}

int session_consume(struct session *s)
{
	int n = ring_buffer__consume(s->rb);

	/* held requests go on by the clock too, however idle the server */
	if (n >= 0 && !s->detached && (s->reqjoin.ntwins || s->reqjoin.nheld))
		reqjoin_tick(&s->reqjoin, mono_now_ns());
	/* once detached nothing more can come: spans waiting for a forward go on */
	if (n >= 0 && s->detached) {
		devjoin_flush(&s->join);
		reqjoin_flush(&s->reqjoin);
	}
	if (s->cb_error)
		return s->cb_error;
	return n;
}

int session_drain(struct session *s)
{
	int n = ring_buffer__consume(s->rb);

	if (n >= 0) {
		devjoin_flush(&s->join);
		reqjoin_flush(&s->reqjoin);
	}
	if (s->cb_error)
		return s->cb_error;
	return n;
}

/* Another engine's requests still open end now (engines.bpf.h). */
static void flush_engine_requests(struct session *s)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts);

	if (bpf_prog_test_run_opts(bpf_program__fd(s->skel->progs.engine_flush), &opts) || opts.retval)
		st_err("cannot end the open llama.cpp requests: %s", strerror(errno));
}

void session_detach(struct session *s)
{
	/* A classic uprobe link's removal waits for a grace period (~100 ms
	 * here) and the kernel serializes them: ~0.1 s per probe site. The
	 * uprobe_multi links close in parallel, in about one grace period.
	 * Reverse attach order: begins go before ends, so open spans can close. */
	if (s->skel && s->skel->bss) {
		s->skel->bss->armed = 0;
		s->skel->bss->detaching = 1;   /* see span_begin() */
	}
	if (s->engine && !s->detached)   /* only set once the engine programs attached */
		flush_engine_requests(s);
	s->detached = 1;
	umulti_detach(s->um);
	for (size_t i = s->nlinks; i-- > 0;)
		bpf_link__destroy(s->links[i]);
	free(s->links);
	s->links = NULL;
	s->nlinks = 0;
}

void session_close(struct session *s)
{
	session_detach(s);
	umulti_free(s->um);
	s->um = NULL;
	follow_free(s->follow);
	fleet_free(s->http_fleet);
	s->http_fleet = NULL;
	s->follow = NULL;
	ring_buffer__free(s->rb);
	s->rb = NULL;
	devjoin_free(&s->join);
	reqjoin_free(&s->reqjoin);
	spantrace_bpf__destroy(s->skel);
	s->skel = NULL;
}

uint64_t session_delivered_total(const struct session *s)
{
	return event_types_sum(s->delivered);
}

uint64_t session_invalid_total(const struct session *s)
{
	uint64_t n = 0;

	for (int v = 0; v < EVENT_VERDICT_COUNT; v++)
		n += s->invalid[v];
	return n;
}
