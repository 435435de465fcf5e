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
#include <stdio.h>
#include "base/error.h"
#include "base/usdt.h"

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
/* True when a tracer wants op detail (op_begin attached): a device backend
 * then launches a kernel per phase, so every op span has device time. */
int trace_op_detail_wanted(void);
/* How this thread's current forward runs; its span_end carries it, and
 * the next forward is host again unless told. */
void trace_forward_launch(enum span_launch launch);
/* Fires cl_batch (in chunks of CL_BATCH_MAX) and counts the kernels. */
void trace_kernels(const struct cl_kernel_record *recs, uint32_t n);

/* The serving engine's probes (see spantrace/probes.def for what each announces).
 * Lifecycle probes carry the running/waiting gauges just after the event. */
void trace_req_queued(uint64_t req, uint32_t prompt_tokens, uint32_t max_tokens,
		      uint32_t running, uint32_t waiting);
void trace_req_admitted(uint64_t req, uint32_t prefill_tokens, uint32_t generated,
			uint32_t running, uint32_t waiting);
void trace_req_preempted(uint64_t req, uint32_t generated, uint32_t blocks_freed,
			 uint32_t running, uint32_t waiting);
/* preemptions is for --stats only (the tracer counts req_preempted). */
void trace_req_finished(uint64_t req, enum finish_reason reason, uint32_t prompt_tokens,
			uint32_t generated, uint32_t preemptions, uint32_t running,
			uint32_t waiting);
/* Returns the step's begin time, which step_end carries. */
uint64_t trace_step_begin(uint64_t step, uint32_t nseqs, uint32_t prefill_tokens,
			  uint32_t decode_tokens);
void trace_step_end(uint64_t step, uint64_t begin_ns, uint32_t nseqs, uint32_t prefill_tokens,
		    uint32_t decode_tokens, uint32_t kv_used_blocks);
void trace_token_emit(uint64_t req, uint32_t pos, uint32_t token_id);
void trace_kv_blocks(uint32_t used, uint32_t total, uint32_t block_size, uint64_t block_bytes);
void trace_prefix_hit(uint64_t req, uint32_t cached_tokens, uint32_t tokens, uint32_t blocks);
void trace_prefix_cache(uint32_t entries, uint32_t blocks, uint32_t max_entries);

/* Self-stats are off until enabled (the CLI enables them for --stats). */
void trace_stats_enable(void);
/* Writes the --stats JSON; wall_ns is the run's duration for tok/s. */
int trace_stats_write(const char *path, uint64_t wall_ns, InferError *err);

/* The same JSON to an open stream (the HTTP engine's GET /stats). */
void trace_stats_print(FILE *f, uint64_t wall_ns);

uint64_t trace_now_ns(void); /* CLOCK_MONOTONIC */

/* What --stats names as the run's backend, model shape and KV cache element
 * ("f32" or "f16") (copied): shape = dim, hidden_dim, n_layers, n_heads,
 * n_kv_heads, vocab_size, seq_len. */
void trace_stats_set_run(const char *backend, const int shape[7], const char *kv_type);

#endif
