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
 * span_begin/span_end   u32 kind, s32 layer      (structural kinds: forward, layer)
 * op_begin/op_end       u32 kind, s32 layer      (detail kinds: every other span)
 * alloc                 u32 pool, u64 ptr, u64 bytes, u64 reserved
 * free                  u32 pool, u64 ptr, u64 bytes
 * kv_usage              u64 used_bytes, u64 capacity_bytes
 * cl_batch              u64 records, u32 count   (struct cl_kernel_record[count])
 *
 * `reserved` is what the allocation holds from the system, >= bytes: the
 * allocator's usable size for heap blocks, whole pages for the weights
 * mapping, the size asked for device buffers (OpenCL reports no more). A
 * free carries no reserved size: the tracer keeps it from the alloc.
 *
 * Structural and detail spans use different probe names so that a coarse
 * tracer attaches to far fewer sites: an unattached probe costs a nop.
 * OpenCL kernel timings arrive as one batch per token, not one hit per kernel,
 * because each attached hit costs ~1 us and a token runs ~50 kernels.
 */
#ifndef INFER_PROBES_H
#define INFER_PROBES_H

#if defined(__bpf__) || defined(__BPF__)
/* BPF programs include vmlinux.h first, which defines __u32/__u64/__s32. */
#else
#include <linux/types.h>
#endif

#define INFER_PROVIDER "infer"
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
	SPAN_KIND_COUNT
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
	KERNEL_COUNT
};

/* One OpenCL kernel completion, times from clGetEventProfilingInfo (ns). */
struct cl_kernel_record {
	__u32 kernel_id;  /* enum cl_kernel_id */
	__u32 queue;      /* queue index within the process */
	__s32 layer;      /* LAYER_NONE when not per layer */
	__u32 pad;
	__u64 queued_ns;
	__u64 submit_ns;
	__u64 start_ns;
	__u64 end_ns;
};

/* Most records one cl_batch hit carries; the engine splits bigger batches. */
#define CL_BATCH_MAX 128

#if !defined(__bpf__) && !defined(__BPF__)
static const char *const span_kind_names[SPAN_KIND_COUNT] = {
	"forward", "embed", "layer", "attn_norm", "qkv", "rope", "attention",
	"attn_out", "ffn_norm", "ffn", "final_norm", "logits", "sample",
};

static const char *const pool_names[POOL_COUNT] = {
	"weights", "kv_cache", "activations", "device",
};

static const char *const cl_kernel_names[KERNEL_COUNT] = {
	"embed", "rmsnorm", "matvec", "matmul", "rope", "attention",
	"swiglu", "residual", "qkv", "ffn_up", "attn_out", "ffn_down", "logits",
};

static inline const char *span_kind_name(unsigned kind)
{
	return kind < SPAN_KIND_COUNT ? span_kind_names[kind] : "unknown";
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

#define INFER_PROBE_ENABLED(name) __builtin_expect(INFER_SEMAPHORE(name) != 0, 0)
#define INFER_PROBE2(name, a, b) \
	do { if (INFER_PROBE_ENABLED(name)) STAP_PROBE2(infer, name, a, b); } while (0)
#define INFER_PROBE3(name, a, b, c) \
	do { if (INFER_PROBE_ENABLED(name)) STAP_PROBE3(infer, name, a, b, c); } while (0)
#define INFER_PROBE4(name, a, b, c, d) \
	do { if (INFER_PROBE_ENABLED(name)) STAP_PROBE4(infer, name, a, b, c, d); } while (0)
#endif /* INFER_NO_PROBES */

#endif /* engine side */

#endif /* INFER_PROBES_H */
