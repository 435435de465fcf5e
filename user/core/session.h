/* session.h - the libbpf lifecycle every spantrace command shares:
 * check privileges -> open -> set knobs -> load -> attach -> poll -> detach.
 * Plus signal handling and logging.
 *
 * Typical use (record, top, daemon, profile):
 *   struct session s;
 *   session_check_caps(err, sizeof err);
 *   session_open(&s, &opts, on_event, ctx, err, sizeof err);
 *   session_attach(&s, elf_path, pid, err, sizeof err);   // pid -1 = all
 *   while (!session_stop_requested) session_poll(&s, 50);
 *   session_detach(&s); session_drain(&s);               // nothing in flight
 *   maps_read_counters(&s, &c);                           // loss accounting
 *   session_close(&s);
 * The maps (agg, pools, kv, slow_ns, counters) are read and written through
 * core/maps.h, for readers that aggregate instead of streaming. */
#ifndef SPANTRACE_SESSION_H
#define SPANTRACE_SESSION_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "spantrace.h"

struct session_opts {
	uint32_t pid_filter;          /* BPF-side tgid filter, 0 = all */
	enum trace_level level;       /* coarse does not attach op_*, cl_batch */
	uint64_t min_dur_ns;          /* shorter spans aggregated, not streamed */
	enum stream_mode stream_mode;
	int perf_mode;                /* 1: CPU sampling (profile_sample, stacks, proc_span) */
	unsigned ringbuf_kb;          /* 0 = default 2048; rounded up to 2^n pages */
	unsigned perf_ncounters;      /* span perf counters per CPU, 0 = off */
	unsigned perf_ncpus;          /* possible CPUs the counter map spans */
};

/* Called for every ring buffer record; a non-zero return stops the poll
 * and is passed back by session_poll (e.g. an output write error). */
typedef int (*session_event_fn)(void *ctx, const void *data, size_t size);

struct spantrace_bpf;
struct ring_buffer;
struct bpf_link;

struct session {
	struct spantrace_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **links;
	size_t nlinks;
	enum trace_level level;
	unsigned ringbuf_bytes;
	session_event_fn fn;
	void *ctx;
	int cb_error;                       /* first non-zero callback return */
	uint64_t delivered[EV_TYPE_COUNT];  /* records handed to fn, per type */
	uint64_t attach_ns;                 /* how long the last attach took */
};

/* Fails with a message naming CAP_BPF and CAP_PERFMON unless both are in
 * the effective set (CAP_SYS_ADMIN stands in for both). */
int session_check_caps(char *err, size_t errlen);

int session_open(struct session *s, const struct session_opts *o, session_event_fn fn,
		 void *ctx, char *err, size_t errlen);
/* Attaches every program the level wants to the `infer` probes of `elf`;
 * pid -1 attaches to every process mapping it, now and later. */
int session_attach(struct session *s, const char *elf, pid_t pid, char *err, size_t errlen);
/* Waits up to timeout_ms and consumes what is there. Returns the number of
 * records, or a negative errno, or the callback's non-zero return. */
int session_poll(struct session *s, int timeout_ms);
/* Consumes whatever is left without waiting. */
int session_drain(struct session *s);
/* Removes every probe; the ring buffer stays readable. */
void session_detach(struct session *s);
void session_close(struct session *s);

/* Profile mode (session_open with perf_mode set; after session_attach):
 * attaches the sampling program to every per-CPU sampling fd (fds[i] < 0
 * are skipped). The counter fds go in with perfev_counters_install() into
 * maps_perf_counters_fd(s). */
int session_attach_sampler(struct session *s, const int *fds, unsigned nfds,
			   char *err, size_t errlen);
uint64_t session_delivered_total(const struct session *s);
/* ---- signals: SIGINT/SIGTERM set the flag; SIGPIPE is ignored ---- */
extern volatile sig_atomic_t session_stop_requested;
int session_install_signals(void);

/* ---- logging to stderr ---- */
extern int st_verbose;
void st_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void st_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void st_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

uint64_t mono_now_ns(void);   /* CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns */

#endif
