/* state.h - the CPU backend's state, CpuState, which every file of
 * backend/cpu/ reads: the model's shape, the activations, the KV cache,
 * the packed weights and the forward's phases; and the sizes they share.
 * Internal to backend/cpu/ (CPU_INTERNAL: no symbol of libinfer's). */
#ifndef INFER_CPU_STATE_H
#define INFER_CPU_STATE_H

#include <stddef.h>
#include "backend/backend.h"
#include "backend/cpu/matmul.h"

/* A function one file of the backend gives another, hidden from libinfer's
 * exports. */
#define CPU_INTERNAL __attribute__((visibility("hidden")))

/* Tokens a forward takes: a prompt's batch reads each weight once, so 64
 * halves what 32 read per token from L3 (a stories110M F32 layer is 28 MB). */
#define CPU_MAX_BATCH 64
#define CACHE_LINE 64
/* Queries an attention tile takes, of one sequence: a 64-token batch of
 * one prompt is 4 groups a head, so 2 threads share 48 tiles of 12 heads,
 * and an f16 cache's rows are converted 4 times, not 64. */
#define ATT_QUERY_GROUP 16
#define KV_ROW_MAX 256 /* the widest f16 row attention converts (cpu_create checks) */

/* n halves as floats (ops.c: halves_for_cpu). */
typedef void halves_fn(const _Float16 *h, int n, float *out);

/* The phases of a forward, in order; a layer runs PH_ATTN_NORM..PH_FFN_DOWN. */
enum phase_kind {
	PH_ATTN_NORM,  /* tile: a token */
	PH_QKV,        /* tile: tile_rows() rows of wq, wk or wv */
	PH_ROPE,       /* tile: a token, or some of its heads (rotate q and k, store k and v) */
	PH_ATTENTION,  /* tile: a (query group, head) pair */
	PH_ATTN_OUT,   /* tile: tile_rows() rows of wo, with the residual add */
	PH_FFN_NORM,   /* tile: a token */
	PH_FFN_UP,     /* tile: tile_rows() rows of w1 and of w3, with SwiGLU */
	PH_FFN_DOWN,   /* tile: tile_rows() rows of w2, with the residual add */
	PH_FINAL_NORM, /* tile: a token that wants logits */
	PH_LOGITS,     /* tile: logit_tile_rows() rows of the classifier */
	PH_LAYER_COUNT = PH_FFN_DOWN + 1
};

/* A phase's tile counters, one cache line each: every thread hits them. */
typedef struct {
	int next;  /* tiles handed out */
	int done;  /* tiles finished */
	char pad[CACHE_LINE - 2 * sizeof(int)];
} PhaseCounters;

typedef struct {
	enum phase_kind kind;
	int layer;
	int tiles;   /* in this forward */
} Phase;

typedef struct {
	const Model *model;
	Config c;
	int head_size, kv_dim, kv_mul;
	int max_out;        /* sequences wanting logits per call */
	int threads;        /* OpenMP threads a parallel forward runs on */
	QuantRows *quant;   /* (threads) each thread's copy of a product's input,
			     * quantized; NULL unless a matrix is quantized */
	void *quant_mem;    /* the QuantRows, then each thread's rows */
	size_t quant_bytes;
	int n_blocks, block_size;
	/* activations, (CPU_MAX_BATCH, width) each, carved from one block */
	float *x, *xb, *xb2, *q, *k, *v, *hb, *hb2;
	float *xo;          /* (max_out, dim) final-normed rows for the classifier */
	float *att;         /* (CPU_MAX_BATCH, n_heads, seq_len) scores per token and head */
	float *rope_cs;     /* (seq_len, head_size / 2, 2) cos and sin per position and pair */
	float *block;       /* the activations, from CACHE_LINE on */
	void *block_mem;    /* the allocation behind block */
	size_t block_bytes;
	/* the forward's phases and their counters */
	Phase *phases;      /* (n_phases) */
	PhaseCounters *ctr; /* (n_phases) */
	int n_phases;
	int n, n_out;       /* tokens and logits rows of the current call */
	float *logits;      /* (n_out, vocab_size) the caller's, during a call */
	/* per token of the current call */
	int *tpos;          /* (CPU_MAX_BATCH) its position */
	const int **tblocks; /* (CPU_MAX_BATCH) its sequence's block table */
	int *qgroup;        /* (CPU_MAX_BATCH + 1) attention's query groups: group g
			     * is tokens qgroup[g]..qgroup[g + 1]-1 */
	int n_qgroups;
	int *out_tok;       /* (max_out) tokens whose logits are wanted */
	void *meta;         /* the per-token arrays and the phases */
	size_t meta_bytes;
	/* the matrices packed for matmul_rows_typed (matmul.h), each in its
	 * stored type: layer l's kind k at [l * MAT_PER_LAYER + k], the
	 * classifier last */
	PackedMatrix *mats;
	void *packed_mem;   /* all of them, from CACHE_LINE on */
	size_t packed_bytes;
	/* (n_layers, n_blocks, n_kv_heads, block_size, head_size) elements:
	 * floats, or _Float16 when kv_half (--kv-type f16) */
	void *key_cache;
	void *value_cache;
	void *kv_block;
	size_t kv_bytes;
	int kv_half;
	halves_fn *halves_to_floats;
	/* (threads, scratch_floats) a query group's value chains
	 * (ATT_QUERY_GROUP, 2, head_size), then with an f16 cache its key and
	 * value rows as floats (2, scratch_rows, head_size) */
	float *att_scratch;
	size_t scratch_bytes, scratch_floats;
	int scratch_rows;
} CpuState;

/* A layer's matrices, in LayerWeights' order less the norms. */
enum { MAT_WQ, MAT_WK, MAT_WV, MAT_WO, MAT_W1, MAT_W2, MAT_W3, MAT_PER_LAYER };

static inline const Weights *weights(const CpuState *s)
{
	return &s->model->weights;
}

/* Where the first of kv head h's rows of a block of the pool in layer l
 * is, in elements of the cache. A block holds each head's block_size rows
 * contiguous (head-major), so attention streams a sequence's positions
 * instead of striding by kv_dim. */
static inline size_t head_rows(const CpuState *s, int l, int block, int h)
{
	return (((size_t)l * s->n_blocks + block) * s->c.n_kv_heads + h) * s->block_size *
	       s->head_size;
}

#endif
