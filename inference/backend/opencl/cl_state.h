/* cl_state.h - the OpenCL backend's state, ClState, which every file of
 * backend/opencl/ reads: the device's context, queue and kernels, the
 * buffers, the per-forward launch and kernel records; and what they share.
 * Internal to backend/opencl/ (CL_INTERNAL: no symbol of libinfer's). */
#ifndef INFER_CL_STATE_H
#define INFER_CL_STATE_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include "backend/backend.h"
#include "backend/panels.h"
#include "base/pool.h"
#include "base/trace.h"

/* A function one file of the backend gives another, hidden from libinfer's
 * exports. */
#define CL_INTERNAL __attribute__((visibility("hidden")))

/* The prefill batch limit: staged token blocks live in local memory, so a
 * wide model on a device with little of it gets fewer (s->max_batch). */
#define CL_MAX_BATCH 64

enum cl_fn { FN_EMBED, FN_QKV, FN_ATTENTION, FN_MATMUL_ADD, FN_FFN_UP,
	     FN_LOGITS, FN_FORWARD, FN_COUNT };
/* The kernels' names in the program, by enum cl_fn. */
extern const char *const cl_fn_names[FN_COUNT] CL_INTERNAL;

/* A layer's parts of the weights and KV buffers, for the phase kernels. */
typedef struct {
	cl_mem rms_att, wqkv, wo, rms_ffn, w13, w2, kcache, vcache;
} ClLayer;

typedef struct {
	cl_mem mem;
	size_t bytes;
	enum pool_id pool;
} ClBuffer;

/* Offsets (in ints) of the per-token metadata in the meta buffer. */
enum { META_TOKENS = 0, META_POS = CL_MAX_BATCH, META_SLOT = 2 * CL_MAX_BATCH,
       META_TAB = 3 * CL_MAX_BATCH, META_OUT = 4 * CL_MAX_BATCH };

typedef struct {
	const Config *c;
	int n_blocks, block_size;
	int max_out;    /* sequences wanting logits per call */
	int max_batch;  /* tokens per call: CL_MAX_BATCH, or what local memory holds */
	int tab_cap;    /* block table entries one call can carry */
	int *host_meta; /* (META_OUT + max_out + tab_cap) ints, the staging copy of meta */
	int meta_ints;
	cl_context ctx;
	cl_command_queue queue;
	cl_program prog, prog_emb, prog_cls; /* built for wtype, emb_type, cls_type; one if equal */
	cl_kernel fn[FN_COUNT];
	ClBuffer *bufs; /* every buffer allocated, for pool_note_free */
	int nbufs, cap_bufs;
	cl_mem *subs;   /* sub-buffers of those, released first */
	int nsubs, cap_subs;
	size_t align;   /* floats: sub-buffers start at multiples of it */
	/* All weights in one buffer, each at woff (floats; cl_layout.h), and
	 * the KV cache in one buffer per side, layer l at l * kv_stride
	 * (elements of kv_elem bytes). */
	cl_mem weights, woff_mem, kcache, vcache;
	cl_ulong *woff;
	size_t weight_floats, kv_stride;
	ClLayer *layers; /* phases mode only */
	cl_mem emb, rms_final, wcls; /* phases and layers launches only */
	cl_mem rope;
	cl_mem meta, x, q, att_out, hb, logits;
	/* How this forward launches: the forward kernel on `groups` work-groups
	 * for the whole pass (LAUNCH_FORWARD) or for its layers (LAUNCH_LAYERS),
	 * or a kernel a phase. Chosen per forward from `want` (forward_launch). */
	enum span_launch launch;
	int cpu_device;
	enum cl_launch want;
	cl_uint groups;
	cl_mem sync;
	/* Per-forward kernel records, used when kernel timings are wanted. */
	int profiling, nevents, max_events;
	cl_event *events;
	struct cl_kernel_record *recs;
	/* The layers' matrices' type (model_layer_type), the embedding's and
	 * the classifier's: each is the WTYPE of the program whose kernels
	 * read it. one_type: all three are one, so the forward kernel, built
	 * for one, may run the whole pass; else it runs the layers. */
	WeightType wtype, emb_type, cls_type;
	int one_type;
	enum kv_type kv_type; /* the cache's element (KV_HALF in the kernels) */
	size_t kv_elem;       /* its bytes */
} ClState;

static inline int cl_fail(InferError *err, const char *what, cl_int code)
{
	return infer_fail(err, "opencl: %s failed (CL error %d)", what, (int)code);
}

static inline size_t round_up(size_t v, size_t m)
{
	return (v + m - 1) / m * m;
}

#endif
