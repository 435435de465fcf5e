/* prom.h - the daemon's metrics snapshot and its Prometheus text exposition
 * (format 0.0.4). The snapshot is plain data copied out of the BPF maps, so
 * the formatter is testable without libbpf or a kernel. */
#ifndef SPANTRACE_PROM_H
#define SPANTRACE_PROM_H

#include <stddef.h>
#include <stdint.h>
#include "spantrace.h"

/* One row of the `agg` map. kind is an enum span_kind, AGG_KIND_TOKEN,
 * AGG_KIND_REQUEST or AGG_KIND_KERNEL_BASE + kernel id; buckets are
 * hist.h's. */
struct prom_agg {
	uint32_t pid;
	uint32_t kind;
	int32_t layer;
	uint64_t count, sum_ns, max_ns, errors;
	__u64 buckets[HIST_BUCKETS];
};

struct prom_pool {
	uint32_t pid, pool;   /* enum pool_id */
	uint64_t live_bytes, peak_bytes, allocs, frees, reserved_bytes;
};

/* --opencl: device memory of one context of one process. */
struct prom_clmem {
	uint32_t pid;
	uint64_t context;
	uint64_t live_bytes, peak_bytes, creates, frees;
};

struct prom_kv {
	uint32_t pid;
	uint64_t used_bytes, capacity_bytes;
};

/* A serving engine's gauges and request counters. */
struct prom_serving {
	uint32_t pid;
	struct serving_val v;
};

/* Per traced process: decode throughput over the last interval. */
struct prom_proc {
	uint32_t pid;
	double tokens_per_second;
	int rss_ok;                   /* rss_pools/other read at the tick */
	uint64_t rss_pools, rss_other;  /* analysis/rssattr.h */
};

/* Host mode (daemon --all-engines): a process's labels beyond its pid. */
struct prom_proc_meta {
	uint32_t pid;         /* on the host */
	uint32_t ns_pid;      /* in its own pid namespace */
	char cgroup[256];
	char binary[512];     /* the probe file as the process names it */
	char engine[16];      /* core/engines.h engine_name() */
};

struct prom_map_mem {
	const char *name;     /* static or owned by the caller */
	uint64_t bytes;
};

/* The tail-capture writer's own accounting (user/rotate.c). */
struct prom_tail {
	uint64_t spans_written, spans_dropped, bytes_written;
	uint64_t files_deleted, disk_bytes;
	uint64_t slow_ns[SPAN_KIND_COUNT]; /* threshold in force; UINT64_MAX = off */
};

struct prom_snapshot {
	const char *binary;   /* `binary` label on per-process series */
	const char *engine;   /* `engine` label on them ("infer", "llamacpp"); NULL: none */
	struct prom_agg *aggs;   size_t naggs;
	struct prom_pool *pools; size_t npools;
	struct prom_kv *kvs;     size_t nkvs;
	struct prom_clmem *clmems; size_t nclmems;
	struct prom_serving *servings; size_t nservings;
	struct prom_proc *procs; size_t nprocs;
	struct prom_map_mem *maps; size_t nmaps;
	struct prom_proc_meta *metas; size_t nmetas; /* host mode; else none */
	struct counters counters;  /* summed over CPUs */
	__u64 ringbuf_delivered[EV_TYPE_COUNT];   /* events userspace consumed */
	struct prom_tail tail;
	int has_tail;             /* tail capture configured */
};

/* The histogram families: rows of agg kinds [lo, hi]; a count family's
 * values are not nanoseconds, so they are not scaled to seconds. The OTLP
 * exporter (otlp_metrics.c) exports the same families. */
struct histogram_family {
	const char *name, *help;
	uint32_t lo, hi;
	int count;
};
const struct histogram_family *prom_histogram_families(size_t *n);

/* The bucket edges one kind exposes: every bucket from the one just below
 * its fastest non-empty bucket to its slowest, over all processes and
 * layers, so every series of a kind has the same edges. */
struct edges {
	unsigned lo, hi;     /* bucket range; lo > hi: none yet */
};
#define KIND_SLOTS (AGG_KIND_DEVICE_BASE + SPAN_KIND_COUNT)
void prom_kind_edges(const struct prom_snapshot *s, struct edges e[KIND_SLOTS]);

/* Renders the snapshot as exposition text into a malloc'd, NUL-terminated
 * buffer (*out, *len). Sorts the snapshot's arrays in place so the output
 * is stable. Returns 0, or -1 (errno ENOMEM) with *out untouched. */
int prom_render(struct prom_snapshot *snap, char **out, size_t *len);

/* Escapes a label value per the exposition format (\\, \", \n) into dst.
 * Returns the length it needed (like snprintf). */
size_t prom_escape_label(char *dst, size_t dstlen, const char *value);

/* The `le` of hist.h bucket b in seconds: its largest value, in ns, / 1e9. */
double prom_bucket_le_seconds(unsigned b);

/* Frees the arrays (not the snapshot struct, not binary/map names). */
void prom_snapshot_free(struct prom_snapshot *snap);

#endif
