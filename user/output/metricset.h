/* metricset.h - the daemon's metrics, as one model that every exporter
 * renders: Prometheus text (prom.h) and OTLP (otlp_metrics.h) give the same
 * families, help strings, labels and values.
 *
 *   struct metrics_snapshot   plain data copied out of the BPF maps (the
 *                             daemon fills it; testable without a kernel)
 *   metric_set_build()        the snapshot as families of points, each family
 *                             with its name, help, unit and type, points in a
 *                             stable order (the snapshot is not touched)
 *   prom_render(), otlp_metrics_body()   a set, written out */
#ifndef SPANTRACE_METRICSET_H
#define SPANTRACE_METRICSET_H

#include <stddef.h>
#include <stdint.h>
#include "spantrace.h"

/* ---- the snapshot ---- */

/* One row of the `agg` map. kind is an enum span_kind, AGG_KIND_TOKEN,
 * AGG_KIND_REQUEST or AGG_KIND_KERNEL_BASE + kernel id; buckets are
 * hist.h's. */
struct metrics_agg {
	uint32_t pid;
	uint32_t kind;
	int32_t layer;
	uint64_t count, sum_ns, max_ns, errors;
	__u64 buckets[HIST_BUCKETS];
};

struct metrics_pool {
	uint32_t pid, pool;   /* enum pool_id */
	uint64_t live_bytes, peak_bytes, allocs, frees, reserved_bytes;
};

/* --opencl: device memory of one context of one process. */
struct metrics_clmem {
	uint32_t pid;
	uint64_t context;
	uint64_t live_bytes, peak_bytes, creates, frees;
};

struct metrics_kv {
	uint32_t pid;
	uint64_t used_bytes, capacity_bytes;
};

/* A serving engine's gauges and request counters. */
struct metrics_serving {
	uint32_t pid;
	struct serving_val v;
};

/* Per traced process: decode throughput over the last interval. */
struct metrics_proc {
	uint32_t pid;
	double tokens_per_second;
	int rss_ok;                   /* rss_pools/other read at the tick */
	uint64_t rss_pools, rss_other;  /* analysis/rssattr.h */
};

/* Host mode (daemon --all-engines): a process's labels beyond its pid. */
struct metrics_proc_meta {
	uint32_t pid;         /* on the host */
	uint32_t ns_pid;      /* in its own pid namespace */
	char cgroup[256];
	char binary[512];     /* the probe file as the process names it */
	char engine[16];      /* core/engines.h engine_name() */
};

struct metrics_map_mem {
	const char *name;     /* static or owned by the caller */
	uint64_t bytes;
};

/* The tail-capture writer's own accounting (output/rotate.c). */
struct metrics_tail {
	uint64_t spans_written, spans_dropped, bytes_written;
	uint64_t files_deleted, disk_bytes;
	uint64_t slow_ns[SPAN_KIND_COUNT]; /* threshold in force; UINT64_MAX = off */
};

struct metrics_snapshot {
	const char *binary;   /* `binary` label on per-process series */
	const char *engine;   /* `engine` label on them ("infer", "llamacpp"); NULL: none */
	struct metrics_agg *aggs;   size_t naggs;
	struct metrics_pool *pools; size_t npools;
	struct metrics_kv *kvs;     size_t nkvs;
	struct metrics_clmem *clmems; size_t nclmems;
	struct metrics_serving *servings; size_t nservings;
	struct metrics_proc *procs; size_t nprocs;
	struct metrics_map_mem *maps; size_t nmaps;
	struct metrics_proc_meta *metas; size_t nmetas; /* host mode; else none */
	struct counters counters;  /* summed over CPUs */
	__u64 ringbuf_delivered[EV_TYPE_COUNT];   /* events userspace consumed */
	struct metrics_tail tail;
	int has_tail;             /* tail capture configured */
};

/* Frees the arrays (not the snapshot struct, not binary/map names). */
void metrics_snapshot_free(struct metrics_snapshot *snap);

/* The bucket edges one agg kind exposes: every bucket from the one just
 * below its fastest non-empty bucket to its slowest, over all processes
 * and layers, so every series of a kind has the same edges. */
struct edges {
	unsigned lo, hi;     /* bucket range; lo > hi: none yet */
};
#define KIND_SLOTS (AGG_KIND_DEVICE_BASE + SPAN_KIND_COUNT)
void metrics_kind_edges(const struct metrics_snapshot *s, struct edges e[KIND_SLOTS]);

/* ---- the model ---- */

enum metric_type { METRIC_GAUGE, METRIC_COUNTER, METRIC_HISTOGRAM };

enum metric_label_kind {
	LABEL_STR,     /* str */
	LABEL_INT,     /* num */
	LABEL_LAYER,   /* num; LAYER_NONE is "none" where labels are text */
	LABEL_HEX,     /* num, written 0x... (an address) */
};

struct metric_label {
	const char *name;
	enum metric_label_kind kind;
	const char *str;       /* static, or owned by the snapshot */
	int64_t num;
};

#define METRIC_LABELS_MAX 8

/* A histogram point: the kernel's buckets, exposed between the kind's
 * edges; values are ns divided by unit_div (1e9: seconds; 1: counts). */
struct metric_hist {
	const __u64 *buckets;   /* HIST_BUCKETS, the snapshot's */
	struct edges e;
	uint64_t count, sum, max;
	double unit_div;
};

struct metric_point {
	struct metric_label labels[METRIC_LABELS_MAX];
	unsigned nlabels;
	int is_double;          /* gauge/counter value: d, else u */
	uint64_t u;
	double d;
	struct metric_hist h;   /* METRIC_HISTOGRAM */
};

struct metric_family {
	const char *name, *help;
	const char *unit;       /* UCUM, for OTLP: "s", "By", "1", "{token}" */
	enum metric_type type;
	struct metric_point *points;
	size_t npoints, cap;
};

struct metric_set {
	struct metric_family *families;
	size_t n, cap;
	int failed;             /* an allocation failed: the set is incomplete */
};

/* The snapshot as a set; it refers to the snapshot's strings and buckets,
 * so it lives no longer than s. 0, or -1 (ENOMEM) with nothing held. */
int metric_set_build(const struct metrics_snapshot *s, struct metric_set *out);
void metric_set_free(struct metric_set *m);

/* A label's value as text (buf for numbers): a LABEL_LAYER of LAYER_NONE
 * is "none", a LABEL_HEX 0x... */
const char *metric_label_text(const struct metric_label *l, char *buf, size_t len);

#endif
