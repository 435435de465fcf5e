/* features.h - what of the kernel and of its own privileges spantrace
 * uses, probed on this machine: `spantrace check` prints it all, and every
 * tracing command refuses early, in one line, when a feature it cannot do
 * without is missing (features_require).
 *
 * SPANTRACE_FEATURES_OFF=name,name... makes the named features read as
 * missing (tests show the refusals with it; a user can try a degraded
 * mode before meeting an older kernel). */
#ifndef SPANTRACE_FEATURES_H
#define SPANTRACE_FEATURES_H

#include <stddef.h>
#include <linux/capability.h>

/* Older headers lack the two capabilities of Linux 5.8. */
#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

enum feature {
	FEAT_BTF,           /* /sys/kernel/btf/vmlinux: CO-RE */
	FEAT_RINGBUF,       /* BPF ring buffer maps */
	FEAT_BPF_LOOP,      /* the bpf_loop helper */
	FEAT_UPROBE_PMU,    /* uprobes through perf_event_open */
	FEAT_UPROBE_MULTI,  /* uprobe_multi links */
	FEAT_SEND_SIGNAL,   /* the bpf_send_signal helper */
	FEAT_RAW_TP,        /* raw tracepoint programs */
	FEAT_PERF_SW,       /* software perf events (cpu-clock) */
	FEAT_PERF_HW,       /* hardware perf counters */
	FEAT_TRACEFS,       /* tracefs mounted */
	FEAT_SOCK_TP,       /* sock:sock_recv_length and sock_send_length */
	FEAT_SK_DATA_READY, /* sock:sk_data_ready */
	FEAT_COUNT
};

struct feature_row {
	const char *name;      /* as SPANTRACE_FEATURES_OFF and `check` name it */
	const char *what;
	int required;          /* every tracing command needs it */
	const char *used_by;   /* which commands or options use it */
	const char *without;   /* what happens without it */
};

extern const struct feature_row feature_rows[FEAT_COUNT];

/* 1 present, 0 missing (or turned off by SPANTRACE_FEATURES_OFF); probed
 * once per process. */
int feature_present(enum feature f);

/* The effective capability set (bit n: capability n); -1 if unreadable. */
int caps_effective(unsigned long long *eff);

/* 0, or -1 with one line in err naming the first required feature this
 * kernel lacks and `spantrace check`. */
int features_require(char *err, size_t errlen);

#endif
