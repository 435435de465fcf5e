/* probes.h - the probe vocabulary of the `infer` USDT provider.
 *
 * One header shared by the engine (which fires the probes), the BPF programs
 * (which attach to them) and the userspace tracer (which names what it sees).
 * Ids are part of the on-wire format: append, never renumber.
 *
 * Probe                 arguments
 * request_begin         u64 req, u32 prompt_tokens
 * request_end           u64 req, u32 generated_tokens
 * token_begin           u64 req, u32 pos, u32 token_in
 * token_end             u64 req, u32 pos, u32 token_out
 * span_begin            u32 kind, s32 layer      (structural kinds: forward, layer)
 * span_end              u32 kind, s32 layer, u32 launch (enum span_launch; forward only, else 0)
 * op_begin/op_end       u32 kind, s32 layer      (detail kinds: every other span)
 * alloc                 u32 pool, u64 ptr, u64 bytes, u64 reserved
 * free                  u32 pool, u64 ptr, u64 bytes
 * kv_usage              u64 used_bytes, u64 capacity_bytes
 * cl_batch              u64 records, u32 count   (struct cl_kernel_record[count])
 *
 * The serving engine (infer --http) adds, keyed by (pid, req) alone, with no
 * per-thread context (a step's forward is shared by many requests):
 * req_queued            u64 req, u32 prompt_tokens, u32 max_tokens, u32 running, u32 waiting
 * req_admitted          u64 req, u32 prefill_tokens, u32 generated_tokens, u32 running, u32 waiting
 * req_preempted         u64 req, u32 generated_tokens, u32 blocks_freed, u32 running, u32 waiting
 * req_finished          u64 req, u32 reason, u32 prompt_tokens, u32 generated_tokens,
 *                       u32 running, u32 waiting
 * step_begin            u64 step, u32 nseqs, u32 prefill_tokens, u32 decode_tokens
 * step_end              u64 step, u64 begin_ns, u32 nseqs, u32 prefill_tokens,
 *                       u32 decode_tokens, u32 kv_used_blocks
 * token_emit            u64 req, u32 pos, u32 token_id
 * kv_blocks             u32 used, u32 total, u32 block_size, u64 block_bytes
 *
 * State at attach (inference/state.c): when a tracer asks (the signal
 * INFER_STATE_SIGNAL), the engine re-fires what exists, under the pools' lock,
 * so the dump is consistent with the alloc/free stream around it:
 * state_pool            u32 pool, u64 peak_bytes, u64 peak_reserved_bytes
 * state_alloc           u32 pool, u64 ptr, u64 bytes, u64 reserved   (each live allocation)
 * state_kv              u64 used_bytes, u64 capacity_bytes           (as kv_usage, last values)
 * state_kv_blocks       u32 used, u32 total, u32 block_size, u64 block_bytes (as kv_blocks)
 * state_tensor          u64 name (char *), u64 shape01, u64 shape23, u64 bytes, u32 pool, u32 device,
 *                       u32 dtype (ggml's type number: 0 F32, 1 F16, 8 Q8_0, ...)
 *                       (shapeAB = dimA << 32 | dimB; unused dims 0; device 0 host, 1 OpenCL)
 * state_requests        u32 running, u32 waiting   (the serving engine's gauges, last values)
 * state_end             u32 allocs, u32 tensors   (what this dump re-fired)
 *
 * running/waiting are the engine's gauges just after the event, so a tracer's
 * gauges equal the engine's at every probe (they change only at these four).
 * No probe has more than 6 arguments: bpftrace reads only arg0..arg5. req_queued fires when a request
 * enters the FIFO queue, req_admitted when it gets KV blocks and joins the
 * running set (again after a preemption: prefill_tokens then counts the
 * generated tokens it recomputes), req_preempted when it loses its blocks
 * and goes back to the head of the queue, req_finished once, from either
 * state, with an enum finish_reason. token_emit fires once per sampled
 * token (a final BOS included), pos = prompt_tokens + index. So: queue time
 * = first req_admitted - req_queued; TTFT = first token_emit - req_queued;
 * inter-token gaps between token_emits; prefill = first token_emit - last
 * req_admitted before it; decode = req_finished - first token_emit.
 * step_end carries the step's begin time (CLOCK_MONOTONIC, bpf_ktime_get_ns's
 * clock), so a tracer gets each step as a span from one hit; step_begin is
 * there for in-kernel matching. kv_blocks fires when the pool is made and at
 * the end of any step (or cancel) that changed the blocks in use. Per step at
 * most step_begin + step_end + kv_blocks fire; per emitted token one
 * token_emit; the req_* probes fire a fixed number of times per request
 * (plus two per preemption).
 *
 * `reserved` is what the allocation holds from the system, >= bytes: the
 * allocator's usable size for heap blocks, whole pages for the weights
 * mapping, the size asked for device buffers (OpenCL reports no more). A
 * free carries no reserved size: the tracer keeps it from the alloc.
 *
 * Structural and detail spans use different probe names so that a coarse
 * tracer attaches to far fewer sites: an unattached probe costs a nop.
 * OpenCL kernel timings arrive as one batch per forward, not one hit per
 * kernel, because each attached hit costs ~1 us: a forward runs 1 kernel
 * (launch forward) or 5 per layer + 2 (launch phases, which the engine picks
 * for every forward while op_begin is attached).
 */
#ifndef INFER_PROBES_H
#define INFER_PROBES_H

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

enum span_kind {
	SPAN_FORWARD = 0,
	SPAN_EMBED,
	SPAN_LAYER,
	SPAN_ATTN_NORM,
	SPAN_QKV,
	SPAN_ROPE,
	SPAN_ATTENTION,
	SPAN_ATTN_OUT,
	SPAN_FFN_NORM,
	SPAN_FFN,
	SPAN_FINAL_NORM,
	SPAN_LOGITS,
	SPAN_SAMPLE,
	SPAN_SYNC,      /* the host waiting for the device (a device backend's readback) */
	/* Kinds only other engines have (their profiles, user/core/engines.c): */
	SPAN_GRAPH,     /* a compute graph run by the backend scheduler */
	SPAN_TOKENIZE,
	SPAN_MODEL_LOAD,
	SPAN_CTX_INIT,  /* a context made from a loaded model (its KV cache, buffers) */
	SPAN_KIND_COUNT
};

/* How a forward ran, on its span_end: a forward on the CPU backend runs on
 * the host; on a device, as one kernel or as a kernel per phase. */
enum span_launch {
	LAUNCH_UNKNOWN = 0, /* not told (an older engine) */
	LAUNCH_HOST,
	LAUNCH_FORWARD,
	LAUNCH_PHASES,
	LAUNCH_COUNT
};

/* Structural kinds fire span_begin/span_end; all others op_begin/op_end. */
static inline int span_kind_is_structural(unsigned kind)
{
	return kind == SPAN_FORWARD || kind == SPAN_LAYER;
}

enum pool_id {
	POOL_WEIGHTS = 0,
	POOL_KV_CACHE,
	POOL_ACTIVATIONS,
	POOL_DEVICE,
	POOL_COMPUTE,   /* another engine's compute buffers (llama.cpp: graph, outputs) */
	POOL_COUNT
};

enum cl_kernel_id {
	KERNEL_EMBED = 0,
	KERNEL_RMSNORM,
	KERNEL_MATVEC,
	KERNEL_MATMUL,
	KERNEL_ROPE,
	KERNEL_ATTENTION,
	KERNEL_SWIGLU,
	KERNEL_RESIDUAL,
	KERNEL_QKV,       /* fused q/k/v projection */
	KERNEL_FFN_UP,    /* fused w1/w3 projection + swiglu */
	KERNEL_ATTN_OUT,  /* wo projection + residual add */
	KERNEL_FFN_DOWN,  /* w2 projection + residual add */
	KERNEL_LOGITS,    /* final rmsnorm + classifier */
	KERNEL_FORWARD,   /* the whole forward in one launch (CPU devices) */
	KERNEL_COUNT
};

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

/* The span each kernel's device time belongs to: the one the engine
 * enqueues it in (ffn holds ffn_up and ffn_down). Kernels of the old
 * per-op set belong to none (SPAN_KIND_COUNT). */
static inline unsigned cl_kernel_span_kind(unsigned id)
{
	switch (id) {
	case KERNEL_EMBED: return SPAN_EMBED;
	case KERNEL_QKV: return SPAN_QKV;
	case KERNEL_ATTENTION: return SPAN_ATTENTION;
	case KERNEL_ATTN_OUT: return SPAN_ATTN_OUT;
	case KERNEL_FFN_UP: case KERNEL_FFN_DOWN: return SPAN_FFN;
	case KERNEL_LOGITS: return SPAN_LOGITS;
	case KERNEL_FORWARD: return SPAN_FORWARD;
	default: return SPAN_KIND_COUNT;
	}
}

/* Most records one cl_batch hit carries; the engine splits bigger batches. */
#define CL_BATCH_MAX 128

/* Why a request finished: OpenAI's finish_reason strings where they exist
 * ("stop": a stop string or the end-of-text token, "length": max_tokens or
 * the context), "abort" as vLLM says for a client that went away, "error"
 * for an engine failure. */
enum finish_reason {
	FINISH_STOP = 0,
	FINISH_LENGTH,
	FINISH_ABORT,
	FINISH_ERROR,
	FINISH_REASON_COUNT
};

#if !defined(__bpf__) && !defined(__BPF__)
static const char *const finish_reason_names[FINISH_REASON_COUNT] = {
	"stop", "length", "abort", "error",
};

static inline const char *finish_reason_name(unsigned r)
{
	return r < FINISH_REASON_COUNT ? finish_reason_names[r] : "unknown";
}

static const char *const span_kind_names[SPAN_KIND_COUNT] = {
	"forward", "embed", "layer", "attn_norm", "qkv", "rope", "attention",
	"attn_out", "ffn_norm", "ffn", "final_norm", "logits", "sample", "sync",
	"graph_compute", "tokenize", "model_load", "context_init",
};

static const char *const span_launch_names[LAUNCH_COUNT] = {
	"unknown", "host", "forward", "phases",
};

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

static const char *const pool_names[POOL_COUNT] = {
	"weights", "kv_cache", "activations", "device", "compute",
};

static const char *const cl_kernel_names[KERNEL_COUNT] = {
	"embed", "rmsnorm", "matvec", "matmul", "rope", "attention",
	"swiglu", "residual", "qkv", "ffn_up", "attn_out", "ffn_down", "logits",
	"forward",
};

#ifdef INFER_PROBE_NAMES_ONLY
/* The tracer's names of user-defined spans (--span), NULL for none. */
const char *user_span_name(unsigned kind);
#endif

static inline const char *span_kind_name(unsigned kind)
{
	if (kind < SPAN_KIND_COUNT)
		return span_kind_names[kind];
#ifdef INFER_PROBE_NAMES_ONLY
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
#endif

/* ---- the probe macros, engine side only ---- */
#if !defined(__bpf__) && !defined(__BPF__) && !defined(INFER_PROBE_NAMES_ONLY)

#if defined(INFER_NO_PROBES)
#define INFER_PROBE_ENABLED(name) 0
#define INFER_PROBE2(name, a, b) do { } while (0)
#define INFER_PROBE3(name, a, b, c) do { } while (0)
#define INFER_PROBE4(name, a, b, c, d) do { } while (0)
#define INFER_PROBE5(name, a, b, c, d, e) do { } while (0)
#define INFER_PROBE6(name, a, b, c, d, e, f) do { } while (0)
#define INFER_PROBE7(name, a, b, c, d, e, f, g) do { } while (0)
#else
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
/* A 5-byte nop (0f 1f 44 00 00) instead of sdt.h's 1-byte one lets kernels
 * with optimized uprobes replace it with a call into a trampoline instead of
 * an int3 trap. That call pushes a return address below %rsp, so the engine
 * is built with -mno-red-zone: no live data may sit in the red zone. */
#if defined(__x86_64__)
#undef _SDT_NOP
#define _SDT_NOP .nops 5
#endif

/* Semaphores: the kernel increments them on attach, so argument work is
 * skipped when no tracer is attached. Defined once in trace.c. */
#define INFER_SEMAPHORE(name) infer_##name##_semaphore
#define INFER_DECLARE_SEMAPHORE(name) \
	extern volatile unsigned short INFER_SEMAPHORE(name)
INFER_DECLARE_SEMAPHORE(request_begin);
INFER_DECLARE_SEMAPHORE(request_end);
INFER_DECLARE_SEMAPHORE(token_begin);
INFER_DECLARE_SEMAPHORE(token_end);
INFER_DECLARE_SEMAPHORE(span_begin);
INFER_DECLARE_SEMAPHORE(span_end);
INFER_DECLARE_SEMAPHORE(op_begin);
INFER_DECLARE_SEMAPHORE(op_end);
INFER_DECLARE_SEMAPHORE(alloc);
INFER_DECLARE_SEMAPHORE(free);
INFER_DECLARE_SEMAPHORE(kv_usage);
INFER_DECLARE_SEMAPHORE(cl_batch);
INFER_DECLARE_SEMAPHORE(req_queued);
INFER_DECLARE_SEMAPHORE(req_admitted);
INFER_DECLARE_SEMAPHORE(req_preempted);
INFER_DECLARE_SEMAPHORE(req_finished);
INFER_DECLARE_SEMAPHORE(step_begin);
INFER_DECLARE_SEMAPHORE(step_end);
INFER_DECLARE_SEMAPHORE(token_emit);
INFER_DECLARE_SEMAPHORE(kv_blocks);
INFER_DECLARE_SEMAPHORE(state_pool);
INFER_DECLARE_SEMAPHORE(state_alloc);
INFER_DECLARE_SEMAPHORE(state_kv);
INFER_DECLARE_SEMAPHORE(state_kv_blocks);
INFER_DECLARE_SEMAPHORE(state_tensor);
INFER_DECLARE_SEMAPHORE(state_end);
INFER_DECLARE_SEMAPHORE(state_requests);

#define INFER_PROBE_ENABLED(name) __builtin_expect(INFER_SEMAPHORE(name) != 0, 0)
#define INFER_PROBE2(name, a, b) \
	do { if (INFER_PROBE_ENABLED(name)) STAP_PROBE2(infer, name, a, b); } while (0)
#define INFER_PROBE3(name, a, b, c) \
	do { if (INFER_PROBE_ENABLED(name)) STAP_PROBE3(infer, name, a, b, c); } while (0)
#define INFER_PROBE4(name, a, b, c, d) \
	do { if (INFER_PROBE_ENABLED(name)) STAP_PROBE4(infer, name, a, b, c, d); } while (0)
#define INFER_PROBE5(name, a, b, c, d, e) \
	do { if (INFER_PROBE_ENABLED(name)) STAP_PROBE5(infer, name, a, b, c, d, e); } while (0)
#define INFER_PROBE6(name, a, b, c, d, e, f) \
	do { if (INFER_PROBE_ENABLED(name)) STAP_PROBE6(infer, name, a, b, c, d, e, f); } while (0)
#define INFER_PROBE7(name, a, b, c, d, e, f, g) \
	do { if (INFER_PROBE_ENABLED(name)) STAP_PROBE7(infer, name, a, b, c, d, e, f, g); } while (0)
#endif /* INFER_NO_PROBES */

#endif /* engine side */

#endif /* INFER_PROBES_H */
