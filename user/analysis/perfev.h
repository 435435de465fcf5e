/* perfev.h - perf events for profile mode: per-CPU counters that the BPF
 * program reads at span begin and end, and the per-CPU sampling event a
 * SEC("perf_event") program is attached to.
 *
 * Counters are CPU-wide (pid -1, one per CPU): bpf_perf_event_read_value can
 * only read an event of the CPU it runs on (or of the current task), and the
 * target's threads are not known in advance. A span's delta is therefore
 * what its CPU counted between begin and end; it is the span's own only if
 * the thread stayed on that CPU and was not preempted (the BPF side must
 * drop the delta when the CPU changed).
 *
 * Map layout (BPF_MAP_TYPE_PERF_EVENT_ARRAY `perf_counters`):
 *     index = cpu * ncounters + i      (i = position in the event list)
 * with max_entries >= ncpus * ncounters, ncpus = possible CPUs. Offline
 * CPUs' slots stay empty. The BPF side reads ncounters from a rodata knob.
 *
 * Hardware events (cycles, instructions, ...) need a PMU; where there is
 * none (this VM) they are dropped with one warning and the software events
 * carry on. */
#ifndef SPANTRACE_PERFEV_H
#define SPANTRACE_PERFEV_H

#include <stddef.h>
#include <linux/types.h>
#include "spantrace.h"

#define PERFEV_DEFAULT_EVENTS "task-clock,page-faults,context-switches,cpu-migrations"
#define PERFEV_DEFAULT_HZ 99

struct perf_event_desc {
	const char *name;
	__u32 type;        /* PERF_TYPE_* */
	__u64 config;
	int hardware;      /* needs a hardware PMU */
};

/* NULL for an unknown name. */
const struct perf_event_desc *perfev_lookup(const char *name);

/* Parses "a,b,c" (no empty names, no duplicates, at most max). -1 with a
 * one-line message naming the offending entry. */
int perfev_parse_list(const char *list, const struct perf_event_desc **out, unsigned max,
		      unsigned *n, char *err, size_t errlen);

struct perf_counters {
	unsigned ncpus;        /* possible CPUs */
	unsigned ncounters;    /* events opened (unsupported ones dropped) */
	const struct perf_event_desc *events[PERF_COUNTERS_MAX];
	const char *names[PERF_COUNTERS_MAX]; /* events[i]->name, for output */
	int *fds;              /* [cpu * ncounters + i]; -1 for offline CPUs */
	char dropped[128];     /* comma-separated unsupported events, or "" */
};

/* Opens list (NULL: PERFEV_DEFAULT_EVENTS) on every online CPU. Unsupported
 * hardware events are dropped with a warning on stderr; ncounters may then
 * be 0. -1 with err for bad lists, permissions, or other failures. */
int perfev_counters_open(struct perf_counters *pc, const char *list, char *err, size_t errlen);
/* Writes the fds into a PERF_EVENT_ARRAY map with the layout above. */
int perfev_counters_install(const struct perf_counters *pc, int map_fd, char *err, size_t errlen);
/* The scaled value (multiplexing: value * enabled / running) of counter i
 * summed over CPUs, read from userspace; -1 on error. */
int perfev_counters_read(const struct perf_counters *pc, unsigned i, __u64 *value);
void perfev_counters_close(struct perf_counters *pc);

struct perf_sampler {
	unsigned ncpus;        /* possible CPUs */
	unsigned hz;
	int *fds;              /* [cpu]; -1 for offline CPUs */
};

/* Opens a cpu-clock sampling event at hz (frequency mode) on every online
 * CPU, for bpf_program__attach_perf_event. hz must be 1..the kernel's
 * perf_event_max_sample_rate. */
int perfev_sampler_open(struct perf_sampler *ps, unsigned hz, char *err, size_t errlen);
void perfev_sampler_close(struct perf_sampler *ps);

/* Scales a raw count by enabled/running time (what BPF must do too). */
__u64 perfev_scale(__u64 counter, __u64 enabled, __u64 running);

#endif
