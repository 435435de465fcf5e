/* session.c - the libbpf lifecycle the commands share (see session.h). */
#include "core/session.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "core/engines.h"
#include "core/log.h"
#include "core/opencl_attach.h"
#include "core/target.h"
#include "core/userspans.h"
#include "core/fleet.h"
#include "core/follow.h"
#include "core/listen_ports.h"
#include "core/maps.h"
#include "core/proctree.h"
#include "core/features.h"
#include "core/stapsdt.h"
#include "core/uprobe_entry.h"
#include "core/uprobe_multi.h"
#include "spantrace.skel.h"

static int prepare_engine_links(struct session *s);
static int prepare_func_links(struct session *s);
static int attach_user_spans(struct session *s, pid_t pid, char *err, size_t errlen);

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

/* When a request's bytes reached the socket: sk_data_ready where the
 * kernel has it (once per read), else tcp_probe (once per segment, ACKs
 * too). used = 0: the one left out. */
static struct bpf_program *http_arrival_prog(struct session *s, int used)
{
	int ready = feature_present(FEAT_SK_DATA_READY) > 0;

	return ready == !!used ? s->skel->progs.http_data_ready : s->skel->progs.http_tcp_probe;
}

/* --http's programs (bpf/http.bpf.c: http_*) are verified and loaded only
 * when asked for; without them their maps shrink to one entry. */
static int http_set_autoload(struct session *s, int on)
{
	struct bpf_map *maps[] = { s->skel->maps.http_conns, s->skel->maps.http_arrivals,
				   s->skel->maps.http_pending, s->skel->maps.http_pids,
				   s->skel->maps.http_reading, s->skel->maps.http_engine_reqs };
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, s->skel->obj)
		if (!strncmp(bpf_program__name(prog), "http_", 5))
			bpf_program__set_autoload(prog, on);
	if (on)   /* one clock for a request's arrival, not both */
		bpf_program__set_autoload(http_arrival_prog(s, 0), false);
	for (size_t i = 0; !on && i < sizeof(maps) / sizeof(maps[0]); i++)
		if (bpf_map__set_max_entries(maps[i], 1))
			return -1;
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

static struct bpf_program *probe_program(const struct spantrace_bpf *sk, unsigned id);

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
		bpf_program__set_autoload(probe_program(sk, id), false);
	for (unsigned id = 0; id < PROBE_ID_COUNT && !o->no_probes; id++)
		if (probe_rows[id].level != PROBE_LEVEL_DETAIL || o->level == LEVEL_DETAIL)
			bpf_program__set_autoload(probe_program(sk, id), true);
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
	if (http_set_autoload(s, o->http)) {
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

int session_add_link(struct session *s, struct bpf_link *link)
{
	struct bpf_link **nl = realloc(s->links, (s->nlinks + 1) * sizeof(*nl));

	if (!nl) {
		bpf_link__destroy(link);
		return -1;
	}
	s->links = nl;
	s->links[s->nlinks++] = link;
	return 0;
}


/* One row's probe; a probe a binary lacks is fine unless it is span_begin,
 * which every build of our engine has. The USDT cookie is the row's id
 * (probe_generic names its record by it). */
static int attach_probe(struct session *s, struct bpf_program *prog, unsigned id, const char *elf,
			pid_t pid, char *err, size_t errlen)
{
	const char *probe = probe_name(id);
	int required = id == PROBE_ID_span_begin;
	struct bpf_link *link;

	if (umulti_enabled(s->um)) {
		int rc = umulti_attach(s->um, bpf_program__fd(prog), elf, pid, INFER_PROVIDER, probe, id,
				       err, errlen);
		if (rc == -ENOENT && !required) {
			st_debug("%s has no infer:%s probe", elf, probe);
			return 0;
		}
		if (rc == -ENOENT)
			snprintf(err, errlen, "cannot attach infer:%s in %s: %s", probe, elf, strerror(ENOENT));
		return rc ? -1 : 0;
	}
	LIBBPF_OPTS(bpf_usdt_opts, opts, .usdt_cookie = id);
	link = bpf_program__attach_usdt(prog, pid, elf, INFER_PROVIDER, probe, &opts);

	if (!link) {
		int e = errno;
		if (e == ENOENT && !required) {
			st_debug("%s has no infer:%s probe", elf, probe);
			return 0;
		}
		snprintf(err, errlen, "cannot attach infer:%s in %s%s: %s", probe, elf,
			 pid > 0 ? "" : " (all processes)", strerror(e));
		return -1;
	}
	if (session_add_link(s, link)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

struct engine_probe {
	struct bpf_program *prog;
	unsigned id;         /* enum probe_id: the row of spantrace/probes.def */
};

/* The program of each row of probes.def. */
static struct bpf_program *probe_program(const struct spantrace_bpf *sk, unsigned id)
{
	switch (id) {
#define PROBE(nm, ro, lv, ms, pg, doc, n, params, args, names, types) \
	case PROBE_ID_##nm: return sk->progs.pg;
#include "spantrace/probes.def"
#undef PROBE
	default: return NULL;
	}
}

/* Every row, in the order they are attached: every END, then every MARK,
 * then every BEGIN (probes.def says why). */
static size_t engine_probes(const struct spantrace_bpf *sk, struct engine_probe out[PROBE_ID_COUNT])
{
	static const enum probe_role order[] = { PROBE_ROLE_END, PROBE_ROLE_MARK, PROBE_ROLE_BEGIN };
	size_t n = 0;

	for (size_t r = 0; r < sizeof(order) / sizeof(order[0]); r++)
		for (unsigned id = 0; id < PROBE_ID_COUNT; id++)
			if (probe_rows[id].role == order[r])
				out[n++] = (struct engine_probe){ probe_program(sk, id), id };
	return n;
}

/* Every engine probe program goes through uprobe_multi links (when the
 * kernel has them), as the function probes do (prepare_func_links). */
static int prepare_engine_links(struct session *s)
{
	struct engine_probe table[PROBE_ID_COUNT];
	struct bpf_program *progs[PROBE_ID_COUNT];
	size_t n = engine_probes(s->skel, table), nprogs = 0;

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

/* A function probe at file offset off of path (its return when ret), the
 * cookie what bpf_get_attach_cookie() reads: a uprobe_multi link when the
 * programs were prepared so, else libbpf's. 0, or -1 with errno set. */
static int attach_func(struct session *s, struct bpf_program *prog, const char *path, pid_t pid, uint64_t off,
		       int ret, uint64_t cookie)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .retprobe = ret != 0, .bpf_cookie = cookie);
	struct bpf_link *link;
	int rc;

	if (s->func_multi) {
		rc = umulti_attach_func(s->um, bpf_program__fd(prog), path, pid, off, ret, cookie);
		errno = -rc;
		return rc ? -1 : 0;
	}
	if (!(link = bpf_program__attach_uprobe_opts(prog, pid, path, (size_t)off, &uo)))
		return -1;
	if (session_add_link(s, link)) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* The engine's probes of elf, in the order the table gives. */
static int attach_engine_probes(struct session *s, const char *elf, pid_t pid, char *err, size_t errlen)
{
	struct engine_probe table[PROBE_ID_COUNT];
	size_t n = engine_probes(s->skel, table);

	for (size_t i = 0; i < n; i++)
		/* unattached sites stay nops */
		if ((probe_rows[table[i].id].level != PROBE_LEVEL_DETAIL || s->level == LEVEL_DETAIL) &&
		    attach_probe(s, table[i].prog, table[i].id, elf, pid, err, errlen))
			return -1;
	return 0;
}

/* --http's raw tracepoints, once per session. */
static int attach_http(struct session *s, char *err, size_t errlen)
{
	struct bpf_program *progs[] = { s->skel->progs.http_recv, s->skel->progs.http_send_length,
					http_arrival_prog(s, 1), s->skel->progs.http_sock_state,
					s->skel->progs.http_fork };

	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		struct bpf_link *link = bpf_program__attach(progs[i]);

		if (!link || session_add_link(s, link)) {
			snprintf(err, errlen, "--http: cannot attach %s: %s", bpf_program__name(progs[i]),
				 strerror(errno));
			return -1;
		}
	}
	s->http_attached = 1;
	return 0;
}

/* Bit i of the programs' bit array (http.bpf.h's http_pid_bits and
 * http_port_bits, shared memory), of nbits, set or cleared. */
static void watch_bit(__u64 *bits, uint32_t nbits, uint32_t i, int on)
{
	if (i >= nbits)
		return;
	if (on)
		__atomic_fetch_or(&bits[i / 64], 1ull << (i % 64), __ATOMIC_SEQ_CST);
	else
		__atomic_fetch_and(&bits[i / 64], ~(1ull << (i % 64)), __ATOMIC_SEQ_CST);
}

/* One process's sockets, in root's tree, and the ports it listens on, so
 * that the first request on each new connection is timed from its
 * arrival too. */
static int watch_one(struct session *s, pid_t pid, pid_t root, char *err, size_t errlen)
{
	struct http_watch w = { .root = (uint32_t)root, .flags = s->http_alone ? 0 : HTTP_W_TREE };
	uint32_t ports[64], key = (uint32_t)pid;
	int n;

	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.http_pids), &key, &w, BPF_ANY)) {
		if (err)
			snprintf(err, errlen, "--http: cannot watch pid %d: %s", (int)pid, strerror(errno));
		return -1;
	}
	watch_bit(s->skel->bss->http_pid_bits, HTTP_PID_BITS, key, 1);
	n = http_listening_ports(pid, ports, 64);
	for (int i = 0; i < n; i++)
		watch_bit(s->skel->bss->http_port_bits, HTTP_PORT_BITS, ports[i], 1);
	st_debug("--http: %d listening port(s) of pid %d (tree %d)", n < 0 ? 0 : n, (int)pid, (int)root);
	return 0;
}

int session_http_watch(struct session *s, pid_t pid, char *err, size_t errlen)
{
	pid_t kids[HTTP_TREE_MAX];
	int n;

	if (!s->http || pid <= 0)
		return 0;
	if (!s->http_attached && attach_http(s, err, errlen))
		return -1;
	if (watch_one(s, pid, pid, err, errlen))
		return -1;
	if (s->http_alone)
		return 0;
	/* the children it has now (a pre-fork server's workers); those it
	 * forks from here on the kernel adds itself (http_fork). One gone
	 * meanwhile is no error. */
	n = proctree_descendants(pid, kids, HTTP_TREE_MAX);
	for (int i = 0; i < n; i++)
		watch_one(s, kids[i], pid, NULL, 0);
	return 0;
}

struct binary_watch {
	struct session *s;
	struct stat st;     /* the binary's inode */
	int failed;
	char *err;
	size_t errlen;
};

static void watch_pid(struct binary_watch *w, pid_t pid)
{
	/* one failure is told; the pass goes on for the others */
	if (session_http_watch(w->s, pid, w->failed ? NULL : w->err, w->failed ? 0 : w->errlen))
		w->failed = 1;
}

/* A process that maps the binary (a library with our probes) */
static void watch_if_binary(void *ctx, const struct fleet_proc *p)
{
	struct binary_watch *w = ctx;

	if (p->dev == w->st.st_dev && p->ino == w->st.st_ino)
		watch_pid(w, p->pid);
}

/* A process whose executable it is (any server: nginx, a Python) */
static void watch_exe(void *ctx, pid_t pid)
{
	watch_pid(ctx, pid);
}

int session_http_watch_binary(struct session *s, const char *elf, char *err, size_t errlen)
{
	static const struct fleet_callbacks cb = { NULL, watch_if_binary };
	struct binary_watch w = { .s = s, .err = err, .errlen = errlen };

	if (!s->http || !elf || !elf[0])
		return 0;
	if (stat(elf, &w.st)) {
		snprintf(err, errlen, "--http: %s: %s", elf, strerror(errno));
		return -1;
	}
	/* new processes only: each is watched once, as the fleet first sees it */
	if (!s->http_fleet && !(s->http_fleet = fleet_new(INFER_PROVIDER))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* every 30th pass looks at every process again: one that maps the
	 * binary late (dlopen) is found then */
	if (fleet_scan(s->http_fleet, &cb, &w, 30) || proctree_each_exe(&w.st, watch_exe, &w)) {
		snprintf(err, errlen, "--http: scanning /proc: %s", strerror(errno));
		return -1;
	}
	return w.failed ? -1 : 0;
}

int session_http_watch_more(struct session *s, const pid_t *pids, unsigned n, char *err, size_t errlen)
{
	for (unsigned i = 0; i < n; i++)
		if (session_http_watch(s, pids[i], err, errlen))
			return -1;
	return 0;
}

/* Why pid's tree has shown no HTTP request yet: one line, or 0 when it
 * has (or when nothing can be said). */
int session_http_silence(struct session *s, pid_t pid, char *why, size_t len)
{
	pid_t kids[HTTP_TREE_MAX];
	uint32_t ports[8];
	struct counters c;
	int n, nkids;

	if (!s->http_attached || s->delivered[EV_HTTP])
		return 0;
	maps_read_counters(s, &c);
	n = http_listening_ports(pid, ports, 8);
	nkids = s->http_alone ? 0 : proctree_descendants(pid, kids, HTTP_TREE_MAX);
	if (c.http_tls || c.http_h2)
		snprintf(why, len, "--http: pid %d's connections were %s (%llu), and nothing else: their requests "
			 "are not HTTP/1.x in the clear", (int)pid, c.http_tls ? "TLS" : "HTTP/2",
			 (unsigned long long)(c.http_tls ? c.http_tls : c.http_h2));
	else if (n <= 0 && nkids <= 0)
		snprintf(why, len, "--http: pid %d listens on no TCP port and has no children: no request of "
			 "its can be seen (is it the server?)", (int)pid);
	else if (n > 0 && s->http_alone)
		snprintf(why, len, "--http: pid %d listens on port %u but read no request (a pre-fork master "
			 "whose workers accept? --no-children leaves them out)", (int)pid, ports[0]);
	else if (n > 0)
		snprintf(why, len, "--http: no HTTP request yet in pid %d's tree (%d child process%s), which "
			 "listens on port %u: idle, or another process accepts its connections", (int)pid,
			 nkids < 0 ? 0 : nkids, nkids == 1 ? "" : "es", ports[0]);
	else
		snprintf(why, len, "--http: no HTTP request yet in pid %d's tree (%d child process%s, none of "
			 "the tree's listening sockets its own): idle, or not the server", (int)pid,
			 nkids < 0 ? 0 : nkids, nkids == 1 ? "" : "es");
	return 1;
}

/* A watched process is gone: its pid may come back as another program. */
void session_http_unwatch(struct session *s, pid_t pid)
{
	uint32_t key = (uint32_t)pid;

	if (s->http_attached) {
		bpf_map_delete_elem(bpf_map__fd(s->skel->maps.http_pids), &key);
		watch_bit(s->skel->bss->http_pid_bits, HTTP_PID_BITS, key, 0);
	}
}

int session_attach(struct session *s, const char *elf, pid_t pid, char *err, size_t errlen)
{
	uint64_t t0 = mono_now_ns();
	struct bpf_link *link;

	/* The exit cleanup once per session. */
	if (s->nlinks == 0 && umulti_nlinks(s->um) == 0) {
		link = bpf_program__attach(s->skel->progs.handle_exit);
		if (!link || session_add_link(s, link)) {
			snprintf(err, errlen, "cannot attach sched_process_exit: %s", strerror(errno));
			return -1;
		}
	}
	if (session_http_watch(s, pid, err, errlen))
		return -1;
	/* elf is empty when only --opencl or --span programs are traced */
	if (elf[0] && attach_engine_probes(s, elf, pid, err, errlen))
		return -1;
	if (user_span_count() && attach_user_spans(s, pid, err, errlen))
		return -1;
	s->attach_ns = mono_now_ns() - t0;
	s->skel->bss->armed = 1; /* see span_orphan() in the BPF program */
	return 0;
}

/* ---- another engine's profile (core/engines.h) ---- */

/* The programs of bpf/engines.bpf.h for a role: at the entry, and at the
 * return (NULL: none). */
static struct bpf_program *engine_prog(struct spantrace_bpf *sk, unsigned role, int ret)
{
	switch (role) {
	case FN_SPAN: return ret ? sk->progs.engine_span_return : sk->progs.engine_span_entry;
	case FN_DECODE: return ret ? sk->progs.engine_decode_return : sk->progs.engine_decode_entry;
	case FN_SEQ_REMOVE: return ret ? NULL : sk->progs.engine_seq_remove;
	case FN_MEMORY_CLEAR: return ret ? NULL : sk->progs.engine_memory_clear;
	case FN_BUF_ALLOC:
	case FN_BUF_FROM_HOST: return ret ? sk->progs.engine_buf_made : sk->progs.engine_buf_size;
	case FN_BUF_USAGE: return ret ? NULL : sk->progs.engine_buf_usage;
	case FN_BUF_FREE: return ret ? NULL : sk->progs.engine_buf_free;
	case FN_TENSOR_SCOPE: return ret ? sk->progs.engine_scope_return : sk->progs.engine_scope_entry;
	case FN_TOKENIZE: return ret ? sk->progs.engine_tokenize_return : sk->progs.engine_tokenize_entry;
	case FN_LOGITS: return ret ? NULL : sk->progs.engine_logits;
	case FN_ACCEPT: return ret ? NULL : sk->progs.engine_accept;
	default: return NULL;
	}
}

/* By offset: libbpf would read the file's symbols again for every name. */
static int attach_hook(struct session *s, const struct engine_hook *h, struct bpf_program *prog, int ret,
		       pid_t pid, char *err, size_t errlen)
{
	/* past an endbr64 the kernel would single-step (core/uprobe_entry.h) */
	uint64_t off = uprobe_entry_offset(h->path, h->off);

	if (attach_func(s, prog, h->path, pid, off, ret, ENGINE_COOKIE(h->role, h->kind))) {
		snprintf(err, errlen, "cannot attach %s%s in %s: %s", h->func, ret ? " (return)" : "", h->path,
			 strerror(errno));
		return -1;
	}
	st_debug("%s: %s%s in %s at +%#llx", engine_name(ENGINE_LLAMACPP), h->func, ret ? " (return)" : "",
		 h->path, (unsigned long long)off);
	return 0;
}

/* The hooks that fire per sampled token, and in llama-server per sampler
 * of its chain (llama_sampler_accept, ~13 a token): the always-on daemon,
 * which streams no token, leaves them out, so a step costs it its decode's
 * two hooks. A token then counts as out at the end of the decode that
 * computed it, not when it was sampled (bpf/engines.bpf.h). */
static int per_sampler_call(const struct session *s, unsigned role)
{
	return s->stream_mode == STREAM_TAIL && (role == FN_LOGITS || role == FN_ACCEPT);
}

int session_attach_engine(struct session *s, const struct target *t, pid_t pid, char *err, size_t errlen)
{
	struct engine_plan plan;
	char found[sizeof(s->engine_found)] = "";
	unsigned fns = 0;

	if (engine_plan(t, &plan, err, errlen))
		return -1;
	/* Returns before entries: a return whose entry is not armed yet is
	 * an orphan end (counted), an entry without its return a stuck frame. */
	for (int ret = 1; ret >= 0; ret--)
		for (size_t i = 0; i < plan.n; i++) {
			struct bpf_program *prog = engine_prog(s->skel, plan.hooks[i].role, ret);

			if (!prog || per_sampler_call(s, plan.hooks[i].role))
				continue;
			if (attach_hook(s, &plan.hooks[i], prog, ret, pid, err, errlen))
				return -1;
			if (!ret) {
				size_t used = strlen(found);

				snprintf(found + used, sizeof(found) - used, "%s%s", used ? "," : "",
					 plan.hooks[i].func);
				fns++;
			}
		}
	s->engine = t->engine;
	s->engine_fns = fns;
	snprintf(s->engine_missing, sizeof(s->engine_missing), "%s", plan.missing);
	snprintf(s->engine_found, sizeof(s->engine_found), "%s", found);
	snprintf(s->engine_lib, sizeof(s->engine_lib), "%s", t->shown);
	snprintf(s->engine_build_id, sizeof(s->engine_build_id), "%s", t->build_id);
	return 0;
}

/* ---- --span (core/userspans.h) ---- */

/* One end (end != 0) or begin of span i, its kind in the cookie. 0, or -1
 * with errno set. */
static int attach_user_span(struct session *s, size_t i, int end, pid_t pid)
{
	const struct user_span *u = user_span_get(i);
	struct spantrace_bpf *sk = s->skel;
	__u64 cookie = user_span_kind(i);
	struct bpf_link *link;

	if (u->type == US_UPROBE) {
		uint64_t func = uprobe_func_offset(u->path, u->func);
		/* past an endbr64 the kernel would single-step (core/uprobe_entry.h) */
		uint64_t off = uprobe_entry_offset(u->path, func);

		if (!func) {
			errno = ENOENT;   /* no such function (or an ifunc, or several) */
			return -1;
		}
		if (off != func)
			st_debug("--span %s: %s%s at +%llu", u->name, u->func, end ? " (return)" : "",
				 (unsigned long long)(off - func));
		return attach_func(s, end ? sk->progs.user_fn_return : sk->progs.user_fn_entry, u->path, pid, off,
				   end, cookie);
	}
	LIBBPF_OPTS(bpf_usdt_opts, so, .usdt_cookie = cookie);
	link = bpf_program__attach_usdt(end ? sk->progs.user_usdt_end : sk->progs.user_usdt_begin, pid, u->path,
					u->func, end ? u->end : u->begin, &so);
	if (!link)
		return -1;
	if (session_add_link(s, link)) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* Every spec, for pid (-1: every process); ends before begins, like the
 * engine's probes. */
static int attach_user_spans(struct session *s, pid_t pid, char *err, size_t errlen)
{
	for (int end = 1; end >= 0; end--) {
		for (size_t i = 0; i < user_span_count(); i++) {
			if (attach_user_span(s, i, end, pid)) {
				const struct user_span *u = user_span_get(i);
				int unfound = u->type == US_UPROBE && !uprobe_func_offset(u->path, u->func);

				snprintf(err, errlen, "--span %s: cannot attach %s in %s: %s", u->name,
					 u->type == US_UPROBE ? u->func : (end ? u->end : u->begin), u->path,
					 unfound ? "no such function defined there (or an ifunc, or several addresses)"
						 : strerror(errno));
				return -1;
			}
		}
	}
	return 0;
}

/* ---- --opencl (core/opencl_attach.h) ---- */

static int attach_opencl_lib(struct session *s, const char *lib, pid_t pid, char *err, size_t errlen)
{
	size_t n;
	const struct cl_probe *p = opencl_probes(&n);

	for (size_t i = 0; i < n; i++) {
		struct bpf_program *prog = bpf_object__find_program_by_name(s->skel->obj, p[i].prog);
		uint64_t func = uprobe_func_offset(lib, p[i].func);
		size_t into = opencl_probe_offset(lib, p[i].func);
		/* a loader built with -fcf-protection: past its endbr64 (core/uprobe_entry.h) */
		uint64_t off = into ? func + into : uprobe_entry_offset(lib, func);

		st_debug("--opencl: %s%s at +%llu", p[i].func, p[i].ret ? " (return)" : "",
			 (unsigned long long)(off - func));
		if (!prog || !func || attach_func(s, prog, lib, pid, off, p[i].ret, 0)) {
			snprintf(err, errlen, "--opencl: cannot attach %s%s in %s: %s", p[i].func,
				 p[i].ret ? " (return)" : "", lib,
				 !prog ? "no program" : !func ? "no such function" : strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* A command not exec'd yet (running 0) gets the loader ld.so would give. */
static int attach_opencl(struct session *s, pid_t pid, int running, char *err, size_t errlen)
{
	char lib[PATH_MAX];

	if (opencl_find_loader(running ? pid : -1, lib, sizeof(lib), err, errlen))
		return -1;
	return attach_opencl_lib(s, lib, pid > 0 ? pid : -1, err, errlen);
}

/* A command that may load llama.cpp later: its dynamic linker's
 * notifications stop it until dl_changed has looked. */
static int watch_dl(struct session *s, const struct target *t, pid_t pid, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = "_dl_debug_state");
	struct bpf_link *link;

	link = bpf_program__attach_uprobe_opts(s->skel->progs.dl_change, pid, t->base, 0, &uo);
	if (!link || session_add_link(s, link)) {
		snprintf(err, errlen, "cannot watch %s for libraries the command loads: %s", t->base,
			 strerror(errno));
		return -1;
	}
	s->dl_pid = pid;
	s->skel->bss->dl_watch = 1;
	return 0;
}

int session_attach_target(struct session *s, const struct target *t, pid_t pid, int running, char *err,
			  size_t errlen)
{
	if (session_attach(s, t->engine == ENGINE_INFER ? t->elf : "", pid, err, errlen))
		return -1;
	if (t->engine == ENGINE_LLAMACPP && session_attach_engine(s, t, pid, err, errlen))
		return -1;
	if (t->pending && pid > 0 && watch_dl(s, t, pid, err, errlen))
		return -1;
	return s->opencl ? attach_opencl(s, pid, running, err, errlen) : 0;
}

int session_engine_check(const struct session *s, const struct target *t, int optional, char *err,
			 size_t errlen)
{
	if (!t->pending || s->engine || optional)
		return 0;
	snprintf(err, errlen, "%s: no 'infer' USDT probes, and it loaded no llama.cpp library (libllama); "
		 "to trace it anyway, name its functions with --span or its OpenCL calls with --opencl",
		 t->shown);
	return -1;
}

int session_follow(struct session *s, const char *elf, char *err, size_t errlen)
{
	if (!elf[0])   /* no engine file (--opencl or --span alone): nothing to follow */
		return 0;
	s->follow = follow_new(elf, err, errlen);
	return s->follow ? 0 : -1;
}

void session_follow_poll(struct session *s)
{
	char path[64], err[512];
	struct sdt_list l;
	int fd;

	while (s->follow && (fd = follow_next(s->follow, INFER_PROVIDER)) >= 0) {
		int rc;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		rc = session_attach(s, path, -1, err, sizeof(err));
		if (rc)
			st_err("%s was replaced; cannot attach to the new file: %s", follow_path(s->follow), err);
		else if (!sdt_read(path, &l, err, sizeof(err))) {
			st_info("%s was replaced: re-attached to the new file (build id %s); processes running the old one stay traced",
				follow_path(s->follow), l.build_id[0] ? l.build_id : "none");
			sdt_free(&l);
		}
		follow_done(s->follow, fd, rc == 0);
	}
}

int session_attach_sampler(struct session *s, const int *fds, unsigned nfds,
			   char *err, size_t errlen)
{
	for (unsigned cpu = 0; cpu < nfds; cpu++) {
		struct bpf_link *link;
		if (fds[cpu] < 0)
			continue;
		link = bpf_program__attach_perf_event(s->skel->progs.profile_sample, fds[cpu]);
		if (!link) {
			snprintf(err, errlen, "cannot attach the sampler on CPU %u: %s", cpu, strerror(errno));
			return -1;
		}
		if (session_add_link(s, link)) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	return 0;
}

int session_epoll_fd(const struct session *s)
{
	return ring_buffer__epoll_fd(s->rb);
}

int session_consume(struct session *s)
{
	int n = ring_buffer__consume(s->rb);

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
