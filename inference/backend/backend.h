/* backend.h - the interface both forward-pass implementations provide.
 *
 * forward_batch runs one forward pass over the tokens of several sequences
 * at once (the serving engine's step): each sequence brings a run of
 * consecutive tokens and its KV block table (see kvcache.h), and asks for
 * the logits of its last token or not. Each phase processes the whole batch,
 * so one call fires one `layer` span per layer whatever it holds. The
 * engine wraps each call in the `forward` span; backends fire embed, layer,
 * the layer phases, final_norm and logits (see spantrace/probes.def and trace.h).
 *
 * Batch invariance: every output element is reduced in an order that does
 * not depend on the batch size or on a token's place in the batch (each
 * matrix row's dot product runs the same code for every token; attention
 * runs over its own sequence's positions in order), so a sequence's logits
 * are bit-identical whatever it is batched with.
 *
 * forward is the single-stream call: n consecutive tokens of the one
 * sequence at positions pos..pos+n-1, logits of the last. It needs the
 * single-stream layout (kv_blocks 0: one block of seq_len positions). */
#ifndef INFER_BACKEND_H
#define INFER_BACKEND_H

#include "base/error.h"
#include "model/model.h"

/* The KV cache's element type. */
enum kv_type {
	KV_F32 = 0, /* the reference's: run.c's golden ids hold for the full length */
	KV_F16,     /* half the bytes, as llama.cpp keeps its cache */
	KV_AUTO,    /* the engine picks (engine.c); never reaches a backend */
};

/* How the OpenCL backend launches a forward pass. */
enum cl_launch {
	CL_LAUNCH_AUTO = 0, /* forward on CPU devices, phases elsewhere */
	CL_LAUNCH_FORWARD,  /* one kernel for the whole pass */
	CL_LAUNCH_PHASES,   /* a kernel per phase: device times per phase */
};

typedef struct {
	int cl_platform; /* -1: the first platform with a device */
	int cl_device;   /* -1: the first device of that platform */
	enum cl_launch cl_launch;
	int threads;     /* cpu backend: 0 means OpenMP's default */
	int kv_blocks;   /* KV pool blocks; 0: one block of seq_len (single stream) */
	int kv_block_size; /* positions per block when kv_blocks > 0 */
	int max_seqs;    /* most sequences asking for logits in one call; 0: 1 */
	enum kv_type kv_type;
} BackendOptions;

/* One sequence's part of a batched forward. */
typedef struct {
	const int *tokens;  /* (n) ids for positions pos..pos+n-1 */
	int n;
	int pos;
	const int *blocks;  /* block table covering positions 0..pos+n-1 */
	int want_logits;    /* 1: logits of its last token, in sequence order */
} BatchSeq;

typedef struct {
	const char *name;
	/* Builds the backend state for m (which must outlive it). */
	int (*create)(const Model *m, const BackendOptions *opt, void **state,
		      InferError *err);
	/* logits: vocab_size floats, host memory, written before return. */
	int (*forward)(void *state, const int *tokens, int n, int pos,
		       float *logits, InferError *err);
	void (*destroy)(void *state);
	/* Most tokens one forward call accepts (the prefill batch limit); a
	 * backend whose limit depends on the model and device says it through
	 * batch_limit once created (backend_max_batch). */
	int max_batch;
	int (*batch_limit)(const void *state);
	/* logits: (sequences wanting logits, vocab_size) floats, host memory. */
	int (*forward_batch)(void *state, const BatchSeq *seqs, int nseqs,
			     float *logits, InferError *err);
} BackendOps;

/* The batch limit of a created backend. */
int backend_max_batch(const BackendOps *ops, const void *state);

extern const BackendOps backend_cpu;
extern const BackendOps backend_opencl;

/* "f32" or "f16", as --kv-type and --stats spell it. */
const char *backend_kv_type_name(enum kv_type t);
/* Bytes of one KV element of type t. */
size_t backend_kv_elem_bytes(enum kv_type t);
/* Bytes of one position of the KV cache of type t: all layers, keys and values. */
size_t backend_kv_pos_bytes(const Config *c, enum kv_type t);
/* The KV pool a backend builds for opt: blocks and positions per block. */
void backend_kv_shape(const Config *c, const BackendOptions *opt, int *n_blocks,
		      int *block_size);
/* Checks a batch against the model and the pool before any work. */
int backend_check_batch(const Config *c, const BatchSeq *seqs, int nseqs, int max_tokens,
			int max_out, int n_blocks, int block_size, InferError *err);

/* Returns the backend named name ("cpu", "opencl") or NULL. */
const BackendOps *backend_find(const char *name);
/* Whether an OpenCL platform has a GPU or accelerator device (0 when
 * there is no platform at all). */
int backend_opencl_has_gpu(void);

#endif
