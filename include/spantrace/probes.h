/* spantrace/probes.h - the `infer` provider's vocabulary, made from the rows
 * of probes.def: ids and names of probes, span kinds, pools, OpenCL kernels,
 * launch modes and finish reasons, and the cl_kernel_record layout. The
 * engine (which fires the probes, through inference/base/usdt.h), the BPF
 * programs and the tracer include this; nothing else names them. */
#ifndef SPANTRACE_PROBES_H
#define SPANTRACE_PROBES_H

#if defined(__bpf__) || defined(__BPF__)
/* BPF programs include vmlinux.h first, which defines __u32/__u64/__s32. */
#else
#include <linux/types.h>
#endif

#define INFER_PROVIDER "infer"
/* A tracer sends SIGRTMIN + this to ask for a state dump. The engine blocks
 * it in every thread and one thread waits for it (sigwaitinfo), so a tracer
 * sends it only to a process whose /proc/PID/status SigBlk has it. */
#define INFER_STATE_SIGNAL_OFFSET 6
#define LAYER_NONE (-1)
/* Most records one cl_batch hit carries; the engine splits bigger batches. */
#define CL_BATCH_MAX 128
/* Most arguments of a probe row. */
#define PROBE_ARGS_MAX 7

/* The values of a row's role, level and measures fields (probes.def). */
enum probe_role { PROBE_ROLE_BEGIN, PROBE_ROLE_END, PROBE_ROLE_MARK };
enum probe_level { PROBE_LEVEL_STRUCTURAL, PROBE_LEVEL_DETAIL };
enum probe_measures {
	PROBE_MEASURES_HOST, PROBE_MEASURES_KIND, PROBE_MEASURES_DEVICE, PROBE_MEASURES_MARKER,
	/* span kinds only */
	PROBE_MEASURES_OP, PROBE_MEASURES_WAIT,
};

enum probe_id {
#define PROBE(nm, ro, lv, ms, pg, doc, n, params, args, names, types) PROBE_ID_##nm,
#include "spantrace/probes.def"
#undef PROBE
	PROBE_ID_COUNT
};

enum span_kind {
#define SPAN(nm, ID, lv, ms, doc) SPAN_##ID,
#include "spantrace/probes.def"
#undef SPAN
	SPAN_KIND_COUNT
};
#define SPAN_NONE SPAN_KIND_COUNT

enum span_launch {
#define LAUNCH(nm, ID, doc) LAUNCH_##ID,
#include "spantrace/probes.def"
#undef LAUNCH
	LAUNCH_COUNT
};

enum pool_id {
#define POOL(nm, ID, doc) POOL_##ID,
#include "spantrace/probes.def"
#undef POOL
	POOL_COUNT
};

enum cl_kernel_id {
#define KERNEL(nm, ID, SP, doc) KERNEL_##ID,
#include "spantrace/probes.def"
#undef KERNEL
	KERNEL_COUNT
};

enum finish_reason {
#define FINISH(nm, ID, doc) FINISH_##ID,
#include "spantrace/probes.def"
#undef FINISH
	FINISH_REASON_COUNT
};

/* STRUCTURAL kinds fire span_begin/span_end; all others op_begin/op_end. */
static inline int span_kind_is_structural(unsigned kind)
{
	return
#define SPAN(nm, ID, lv, ms, doc) (kind == SPAN_##ID && PROBE_LEVEL_##lv == PROBE_LEVEL_STRUCTURAL) ||
#include "spantrace/probes.def"
#undef SPAN
		0;
}

/* The span each kernel's device time belongs to: the one the engine
 * enqueues it in (ffn holds ffn_up and ffn_down); SPAN_NONE for the old
 * per-op set. */
static inline unsigned cl_kernel_span_kind(unsigned id)
{
	switch (id) {
#define KERNEL(nm, ID, SP, doc) case KERNEL_##ID: return SPAN_##SP;
#include "spantrace/probes.def"
#undef KERNEL
	default: return SPAN_NONE;
	}
}

/* One OpenCL kernel completion, times from clGetEventProfilingInfo (ns). */
struct cl_kernel_record {
	__u32 kernel_id;  /* enum cl_kernel_id */
	__u32 queue;      /* queue index within the process */
	__s32 layer;      /* LAYER_NONE when not per layer */
	__u32 forward_kernels; /* records of this record's forward, all batches */
	__u64 queued_ns;
	__u64 submit_ns;
	__u64 start_ns;
	__u64 end_ns;
};

#if !defined(__bpf__) && !defined(__BPF__)
/* ---- names, for the engine's --stats and the tracer's records ---- */

/* A probe row as data (the decoder's and the docs' view). */
struct probe_row {
	const char *name, *doc, *program;
	enum probe_role role;
	enum probe_level level;
	enum probe_measures measures;
	unsigned nargs;
	const char *arg_names[PROBE_ARGS_MAX];
	const char *arg_types[PROBE_ARGS_MAX];
};

static const struct probe_row probe_rows[PROBE_ID_COUNT] = {
#define PROBE(nm, ro, lv, ms, pg, d, n, params, args, names, types) \
	[PROBE_ID_##nm] = { .name = #nm, .doc = d, .program = #pg, .role = PROBE_ROLE_##ro, \
			    .level = PROBE_LEVEL_##lv, .measures = PROBE_MEASURES_##ms, .nargs = n, \
			    .arg_names = { SPANTRACE_UNPAREN names }, .arg_types = { SPANTRACE_UNPAREN types } },
#define SPANTRACE_UNPAREN(...) __VA_ARGS__
#include "spantrace/probes.def"
#undef SPANTRACE_UNPAREN
#undef PROBE
};

static inline const char *probe_name(unsigned id)
{
	return id < PROBE_ID_COUNT ? probe_rows[id].name : "unknown";
}

static const char *const span_kind_names[SPAN_KIND_COUNT] = {
#define SPAN(nm, ID, lv, ms, doc) [SPAN_##ID] = #nm,
#include "spantrace/probes.def"
#undef SPAN
};

static const char *const span_launch_names[LAUNCH_COUNT] = {
#define LAUNCH(nm, ID, doc) [LAUNCH_##ID] = #nm,
#include "spantrace/probes.def"
#undef LAUNCH
};

static const char *const pool_names[POOL_COUNT] = {
#define POOL(nm, ID, doc) [POOL_##ID] = #nm,
#include "spantrace/probes.def"
#undef POOL
};

static const char *const cl_kernel_names[KERNEL_COUNT] = {
#define KERNEL(nm, ID, SP, doc) [KERNEL_##ID] = #nm,
#include "spantrace/probes.def"
#undef KERNEL
};

/* OpenAI's finish_reason strings where they exist, vLLM's "abort". */
static const char *const finish_reason_names[FINISH_REASON_COUNT] = {
#define FINISH(nm, ID, doc) [FINISH_##ID] = #nm,
#include "spantrace/probes.def"
#undef FINISH
};

static inline const char *finish_reason_name(unsigned r)
{
	return r < FINISH_REASON_COUNT ? finish_reason_names[r] : "unknown";
}

static inline const char *span_launch_name(unsigned launch)
{
	return launch < LAUNCH_COUNT ? span_launch_names[launch] : "unknown";
}

/* A tensor's element type in the weight tree: ggml's numbering (GGUF's
 * own), so a GGUF tensor keeps its number; gaps are types ggml removed. */
#define TENSOR_DTYPE_COUNT 40
static const char *const tensor_dtype_names[TENSOR_DTYPE_COUNT] = {
	[0] = "F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1", [6] = "Q5_0", [7] = "Q5_1",
	[8] = "Q8_0", [9] = "Q8_1", [10] = "Q2_K", [11] = "Q3_K", [12] = "Q4_K", [13] = "Q5_K",
	[14] = "Q6_K", [15] = "Q8_K", [16] = "IQ2_XXS", [17] = "IQ2_XS", [18] = "IQ3_XXS",
	[19] = "IQ1_S", [20] = "IQ4_NL", [21] = "IQ3_S", [22] = "IQ2_S", [23] = "IQ4_XS",
	[24] = "I8", [25] = "I16", [26] = "I32", [27] = "I64", [28] = "F64", [29] = "IQ1_M",
	[30] = "BF16", [34] = "TQ1_0", [35] = "TQ2_0", [39] = "MXFP4",
};

static inline const char *tensor_dtype_name(unsigned dtype)
{
	return dtype < TENSOR_DTYPE_COUNT && tensor_dtype_names[dtype] ? tensor_dtype_names[dtype] : "unknown";
}

#ifdef SPANTRACE_USER_SPANS
/* The tracer's names of user-defined spans (--span), NULL for none; the
 * tracer defines it (user/core/userspans.c). */
const char *user_span_name(unsigned kind);
#endif

static inline const char *span_kind_name(unsigned kind)
{
	if (kind < SPAN_KIND_COUNT)
		return span_kind_names[kind];
#ifdef SPANTRACE_USER_SPANS
	if (user_span_name(kind))
		return user_span_name(kind);
#endif
	return "unknown";
}

static inline const char *pool_name(unsigned pool)
{
	return pool < POOL_COUNT ? pool_names[pool] : "unknown";
}

static inline const char *cl_kernel_name(unsigned id)
{
	return id < KERNEL_COUNT ? cl_kernel_names[id] : "unknown";
}
#endif /* !BPF */

#endif /* SPANTRACE_PROBES_H */
