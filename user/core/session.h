/* session.h - the libbpf lifecycle every command shares:
 * check privileges -> open (knobs, map sizes) -> load -> attach -> consume
 * -> detach -> close.
 *
 *   struct session s;
 *   session_check_caps(err, sizeof err);
 *   session_open(&s, &opts, sinks, nsinks, err, sizeof err);  // records go
 *        // through the one decoder (core/events.h) to these consumers
 *   session_attach(&s, elf_path, pid, err, sizeof err);   // pid -1 = all
 *   runloop_run(&loop);                                   // core/runloop.h
 *   session_detach(&s); session_consume(&s);              // nothing in flight
 *   maps_read_counters(&s, &c);                           // loss accounting
 *   session_close(&s);
 * The maps (agg, pools, kv, slow_ns, counters, ...) are read and written
 * through core/maps.h, never from a command directly. */
#ifndef SPANTRACE_SESSION_H
#define SPANTRACE_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "core/clock.h"
#include "core/devjoin.h"
#include "core/reqjoin.h"
#include "core/events.h"
#include "core/log.h"
#include "spantrace.h"

#define SESSION_MAX_SINKS 8

struct session_opts {
	uint32_t pid_filter;          /* BPF-side tgid filter, 0 = all */
	enum trace_level level;       /* coarse does not attach op_*, cl_batch */
	uint64_t min_dur_ns;          /* shorter spans aggregated, not streamed */
	enum stream_mode stream_mode;
	int perf_mode;                /* 1: CPU sampling (profile_sample, stacks, proc_span) */
	unsigned ringbuf_kb;          /* 0 = default 2048; rounded up to 2^n pages */
	unsigned perf_ncounters;      /* span perf counters per CPU, 0 = off */
	unsigned perf_ncpus;          /* possible CPUs the counter map spans */
	int opencl;                   /* load the --opencl programs (core/opencl_attach.h) */
	const char *opencl_binary;    /* --opencl --binary: only this executable's processes */
	int no_probes;                /* the target has no `infer` probes: their programs are
				       * not loaded (seconds of verification saved) */
	int engines;                  /* load the engine profiles' programs (core/engines.h):
				       * the target is llama.cpp, may load it, or host mode */
	int http;                     /* --http: HTTP requests from the target's sockets
				       * (bpf/http.bpf.c): each session_http_watch()ed
				       * process's, and its children's */
	int http_alone;               /* --no-children: a watched process's children are not */
};

#define HTTP_TREE_MAX 4096            /* processes of one watched tree found at its watch */

struct spantrace_bpf;
struct ring_buffer;
struct bpf_link;
struct umulti;
struct follow;

struct session {
	struct spantrace_bpf *skel;   /* only core/session*.c and core/maps.c use it */
	struct ring_buffer *rb;
	struct bpf_link **links;
	size_t nlinks;
	int http;                     /* --http's programs are loaded */
	int http_attached;
	int http_alone;               /* session_opts.http_alone */
	struct umulti *um;            /* the USDT links, when uprobe_multi (core/uprobe_multi.h) */
	int func_multi;               /* function probes through um too (its prepare_func_links) */
	struct follow *follow;        /* binary mode: the path's new inodes (core/follow.h) */
	struct fleet *http_fleet;     /* binary mode with --http: its processes (core/fleet.h) */
	enum trace_level level;
	unsigned ringbuf_bytes;
	struct event_sink sinks[SESSION_MAX_SINKS];
	size_t nsinks;
	int cb_error;                       /* first non-zero sink return */
	__u64 delivered[EV_TYPE_COUNT];     /* records read, per type (0: unknown) */
	uint64_t invalid[EVENT_VERDICT_COUNT]; /* records the decoder rejected */
	uint64_t attach_ns;                 /* how long the last attach took */
	struct devjoin join;                /* spans wait here for their kernels */
	struct reqjoin reqjoin;             /* then requests for their HTTP requests */
	int detached;
	int opencl;                         /* session_opts.opencl: attach the loader's probes */
	enum stream_mode stream_mode;       /* session_opts.stream_mode */
	/* Another engine's profile (core/engines.h), once attached: */
	int engine;                         /* enum engine_id; 0: none */
	unsigned engine_fns;                /* its functions attached */
	char engine_missing[512];           /* those the build lacks, "a,b" */
	char engine_found[1024];            /* those attached, "a,b" */
	char engine_lib[4096];              /* where they are, as the target sees it */
	char engine_build_id[41];
	pid_t dl_pid;                       /* a command watched for its engine */
};

/* Fails with a message naming CAP_BPF and CAP_PERFMON unless both are in
 * the effective set (CAP_SYS_ADMIN stands in for both). */
int session_check_caps(char *err, size_t errlen);

/* Loads the BPF object with o's knobs; the sinks (copied, at most
 * SESSION_MAX_SINKS) receive every record that passes the decoder. */
int session_open(struct session *s, const struct session_opts *o, const struct event_sink *sinks,
		 size_t nsinks, char *err, size_t errlen);
/* Attaches every program the level wants to the `infer` probes of `elf`;
 * pid -1 attaches to every process mapping it, now and later. An empty elf
 * (an --opencl target without our probes) attaches only the exit cleanup.
 * The --span specs (core/userspans.h) are attached too, for pid. */
int session_attach(struct session *s, const char *elf, pid_t pid, char *err, size_t errlen);
/* --http: trace pid's sockets too (its listening ports, its requests),
 * and its children's, present and future, unless http_alone; the series
 * of all of them carry pid. Attaches the tracepoints the first time. A
 * no-op without --http. */
int session_http_watch(struct session *s, pid_t pid, char *err, size_t errlen);
void session_http_unwatch(struct session *s, pid_t pid);
/* session_http_watch() each of n pids (several -p). */
int session_http_watch_more(struct session *s, const pid_t *pids, unsigned n, char *err, size_t errlen);
/* 1 and a one-line reason in why when no HTTP request has been seen from
 * pid's tree (no listening socket, TLS only, a master alone), else 0. */
int session_http_silence(struct session *s, pid_t pid, char *why, size_t len);
/* --http in binary mode: session_http_watch() every process that maps
 * elf (the file its probes are on) or runs it, as each call finds them; call it once
 * attached, then every tick. A no-op without --http. 0 or -1. */
int session_http_watch_binary(struct session *s, const char *elf, char *err, size_t errlen);
struct target;
/* session_attach for a target (core/target.h): our probes, llama.cpp's
 * profile (core/engines.h), or, for a command whose engine may be loaded
 * later, a watch on its dynamic linker that attaches llama.cpp once it is
 * mapped (the command is stopped at each change until the session has
 * looked, so nothing of it runs untraced); and, when the session was opened
 * with opencl, the OpenCL loader's probes (core/opencl_attach.h): the one a
 * running target maps (running), else the one ld.so would give it. */
int session_attach_target(struct session *s, const struct target *t, pid_t pid, int running, char *err,
			  size_t errlen);
/* Attaches another engine's profile (core/engines.h engine_plan) to t's
 * files for pid (-1: every process mapping them); what the build lacks is
 * kept in s->engine_missing. */
int session_attach_engine(struct session *s, const struct target *t, pid_t pid, char *err, size_t errlen);
/* After a command ran: -1 with a reason if it was watched for an engine
 * (t->pending) and loaded none, and nothing else was traced (optional:
 * --opencl or --span given); else 0. */
int session_engine_check(const struct session *s, const struct target *t, int optional, char *err,
			 size_t errlen);
/* Keeps link for session_detach (0), or destroys it (-1: out of memory). */
int session_add_link(struct session *s, struct bpf_link *link);
/* Binary mode (after session_attach with pid -1): follows elf's path, so a
 * file renamed over it is attached too (the old inode's links stay). */
int session_follow(struct session *s, const char *elf, char *err, size_t errlen);
/* Attaches to a new inode behind the followed path, if any; logs each
 * re-attach and each failure. The run loop calls it on every pass. */
void session_follow_poll(struct session *s);
/* Profile mode (session_open with perf_mode set; after session_attach):
 * attaches the sampling program to every per-CPU sampling fd (fds[i] < 0
 * are skipped). The counter fds go in with perfev_counters_install() into
 * maps_perf_counters_fd(s). */
int session_attach_sampler(struct session *s, const int *fds, unsigned nfds,
			   char *err, size_t errlen);

/* Readable when the ring buffer wakes its reader (poll() it). */
int session_epoll_fd(const struct session *s);
/* Hands whatever the ring buffer holds to the sinks, without waiting
 * (after session_detach, also the spans still waiting for their forward).
 * Returns the number of records, a negative errno, or the first non-zero
 * sink return (which also stopped the consume). */
int session_consume(struct session *s);
/* The last consume, once nothing more can come (detached, or the target
 * has exited): the ring buffer's records, then the spans still waiting for
 * a forward whose record was lost. Returns as session_consume. */
int session_drain(struct session *s);
/* Removes every probe; the ring buffer stays readable. */
void session_detach(struct session *s);
void session_close(struct session *s);

uint64_t session_delivered_total(const struct session *s);
uint64_t session_invalid_total(const struct session *s);

#endif
