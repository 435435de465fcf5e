/* trace.h - the engine's probe sites and its own self-timing.
 *
 * Every probe but alloc/free fires from one function here, and those two
 * from pool.c's announce_alloc/free, so the engine has one site per probe
 * name (cheap to attach) and its --stats counts exactly what the probes
 * announce. Self-timing uses CLOCK_MONOTONIC, the clock
 * bpf_ktime_get_ns reads, taken just before each begin and end probe fires,
 * so the tracer's and the engine's durations cover the same work. */
#ifndef INFER_TRACE_H
#define INFER_TRACE_H

#include <stdint.h>
#include "error.h"
#include "probes.h"

/* Spans nest at most this deep on one thread (forward > layer > phase). */
#define TRACE_MAX_DEPTH 16

void trace_request_begin(uint64_t req, uint32_t prompt_tokens);
void trace_request_end(uint64_t req, uint32_t generated_tokens);
void trace_token_begin(uint64_t req, uint32_t pos, uint32_t token_in);
void trace_token_end(uint64_t req, uint32_t pos, uint32_t token_out);
void trace_span_begin(enum span_kind kind, int layer);
void trace_span_end(enum span_kind kind, int layer);
void trace_kv_usage(uint64_t used_bytes, uint64_t capacity_bytes);
/* True when someone wants kernel timings (stats on, or cl_batch attached):
 * only then does the OpenCL backend create profiling events. */
int trace_kernels_wanted(void);
/* Fires cl_batch (in chunks of CL_BATCH_MAX) and counts the kernels. */
void trace_kernels(const struct cl_kernel_record *recs, uint32_t n);

/* Self-stats are off until enabled (the CLI enables them for --stats). */
void trace_stats_enable(void);
/* Writes the --stats JSON; wall_ns is the run's duration for tok/s. */
int trace_stats_write(const char *path, uint64_t wall_ns, InferError *err);

uint64_t trace_now_ns(void); /* CLOCK_MONOTONIC */

/* What --stats names as the run's backend and model shape (copied):
 * shape = dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len. */
void trace_stats_set_run(const char *backend, const int shape[7]);

#endif
