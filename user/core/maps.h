/* maps.h - typed access to a session's BPF maps. Every read or write of the
 * kernel's aggregation, counters and tables goes through these functions;
 * nothing else touches the skeleton or looks a map up by name.
 *
 * The foreach readers call fn(ctx, key, value) for each entry, with the
 * value copied out (entries deleted meanwhile are skipped), and return fn's
 * first non-zero return, -1 if the map cannot be read, else 0. */
#ifndef SPANTRACE_MAPS_H
#define SPANTRACE_MAPS_H

#include <stdint.h>
#include "core/session.h"
#include "spantrace.h"

/* The loss and error counters (`counters`), summed over CPUs. */
int maps_read_counters(const struct session *s, struct counters *out);

/* `agg`: one histogram per (pid, kind, layer). */
typedef int (*maps_agg_fn)(void *ctx, const struct agg_key *k, const struct agg_val *v);
int maps_foreach_agg(const struct session *s, maps_agg_fn fn, void *ctx);

/* `pools`: live/peak/reserved bytes per (pid, pool). */
typedef int (*maps_pool_fn)(void *ctx, const struct pool_key *k, const struct pool_val *v);
int maps_foreach_pool(const struct session *s, maps_pool_fn fn, void *ctx);
/* --opencl: device memory per {pid, context} (map cl_ctxmem, bpf/opencl.bpf.h). */
typedef int (*maps_clmem_fn)(void *ctx, const struct cl_ctx_key *k, const struct cl_ctx_val *v);
int maps_foreach_clmem(const struct session *s, maps_clmem_fn fn, void *ctx);

/* `kv`: the last kv_usage of each pid. */
typedef int (*maps_kv_fn)(void *ctx, __u32 pid, const struct kv_val *v);
int maps_foreach_kv(const struct session *s, maps_kv_fn fn, void *ctx);

/* `serving`: a serving engine's gauges and request counters, per pid. */
typedef int (*maps_serving_fn)(void *ctx, __u32 pid, const struct serving_val *v);
int maps_foreach_serving(const struct session *s, maps_serving_fn fn, void *ctx);

/* Deletes every map entry of the processes pids[0..n), sorted ascending
 * (they exited): their histograms, pools, KV, serving state and OpenCL
 * contexts, in one walk of each keyed-by-more-than-pid map. */
void maps_forget_pids(const struct session *s, const __u32 *pids, size_t n);

/* `slow_ns`: the tail-mode streaming threshold of each span kind. */
int maps_set_slow_thresholds(const struct session *s, const uint64_t slow_ns[SPAN_KIND_COUNT]);

/* `stacks`: one stack of PROFILE_STACK_DEPTH ips, zero-padded; -1 if absent. */
int maps_read_stack(const struct session *s, int32_t id, __u64 *ips);

/* The fd of `perf_counters`, for perfev_counters_install(). */
int maps_perf_counters_fd(const struct session *s);

/* Every map of the session with the kernel's account of its memory. */
typedef void (*maps_memory_fn)(void *ctx, const char *name, uint64_t bytes);
void maps_foreach_memory(const struct session *s, maps_memory_fn fn, void *ctx);

#endif
