/* session_attach.c - the session's attaches (see session.h): the
 * engine's probe table and its USDT probes, another engine's functions
 * (core/engines.h), --span's specs, the OpenCL loader, the dynamic
 * linker's notifications, a replaced --binary's new file and the profile
 * sampler; each a link the session keeps (session_links.c) until
 * session_detach (session.c). */
#include "core/session_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "core/engines.h"
#include "core/log.h"
#include "core/opencl_attach.h"
#include "core/target.h"
#include "core/userspans.h"
#include "core/follow.h"
#include "core/stapsdt.h"
#include "core/uprobe_entry.h"
#include "core/uprobe_multi.h"

static int attach_user_spans(struct session *s, pid_t pid, char *err, size_t errlen);

/* ---- the engine's USDT probes ---- */

/* The program of each row of probes.def. */
struct bpf_program *session_probe_program(const struct spantrace_bpf *sk, unsigned id)
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
size_t session_engine_probes(const struct spantrace_bpf *sk, struct engine_probe out[PROBE_ID_COUNT])
{
	static const enum probe_role order[] = { PROBE_ROLE_END, PROBE_ROLE_MARK, PROBE_ROLE_BEGIN };
	size_t n = 0;

	for (size_t r = 0; r < sizeof(order) / sizeof(order[0]); r++)
		for (unsigned id = 0; id < PROBE_ID_COUNT; id++)
			if (probe_rows[id].role == order[r])
				out[n++] = (struct engine_probe){ session_probe_program(sk, id), id };
	return n;
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
	size_t n = session_engine_probes(s->skel, table);

	for (size_t i = 0; i < n; i++)
		/* unattached sites stay nops */
		if ((probe_rows[table[i].id].level != PROBE_LEVEL_DETAIL || s->level == LEVEL_DETAIL) &&
		    attach_probe(s, table[i].prog, table[i].id, elf, pid, err, errlen))
			return -1;
	return 0;
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

