/* model.h - models: llama2.c checkpoints and GGUF files (the llama
 * architecture), mmapped; their config and per-layer weights. */
#ifndef INFER_MODEL_H
#define INFER_MODEL_H

#include <stddef.h>
#include "base/error.h"
#include "model/config.h"

struct gguf;

/* A tensor's element type: ggml's numbers, so a GGUF tensor's type is its
 * type here. llama2.c checkpoints are all F32. */
typedef enum { WEIGHT_F32 = 0, WEIGHT_F16 = 1, WEIGHT_Q4_0 = 2, WEIGHT_Q8_0 = 8, WEIGHT_Q4_K = 12, WEIGHT_Q6_K = 14 } WeightType;

/* One tensor in the mapped file, row-major (rows, cols) in its type's
 * layout (Q8_0 and Q4_0: per row, blocks of 32 values with one f16 scale;
 * Q4_K and Q6_K: blocks of 256, ggml's block_q4_K and block_q6_K). */
typedef struct {
	const void *data;
	WeightType type;
	const char *name;   /* as the file names it, for errors */
} Tensor;

/* head_size = dim / n_heads, kv_dim = n_kv_heads * head_size. */
typedef struct {
	Tensor rms_att;   /* (dim) F32 */
	Tensor wq;        /* (dim, dim) */
	Tensor wk;        /* (kv_dim, dim) */
	Tensor wv;        /* (kv_dim, dim) */
	Tensor wo;        /* (dim, dim) */
	Tensor rms_ffn;   /* (dim) F32 */
	Tensor w1;        /* (hidden_dim, dim) gate */
	Tensor w2;        /* (dim, hidden_dim) down */
	Tensor w3;        /* (hidden_dim, dim) up */
} LayerWeights;


typedef struct {
	Tensor token_embedding_table; /* (vocab_size, dim) */
	Tensor rms_final_weight;      /* (dim) F32 */
	Tensor wcls;                  /* (vocab_size, dim); the embedding when shared */
	LayerWeights *layers;         /* n_layers */
} Weights;

typedef struct {
	Config config;
	Weights weights;
	void *map;       /* the whole file, read-only */
	size_t map_size;
	struct gguf *gguf;  /* a GGUF file's parsed header (its tokenizer); NULL for llama2.c */
} Model;

/* Maps and validates a checkpoint or GGUF file (told apart by the magic).
 * On failure m is left empty. */
int model_load(Model *m, const char *path, InferError *err);
void model_free(Model *m);

/* The tensor as floats, or NULL when it is stored in another type. */
static inline const float *tensor_f32(Tensor t)
{
	return t.type == WEIGHT_F32 ? (const float *)t.data : NULL;
}

static inline const char *weight_type_name(WeightType t)
{
	switch (t) {
	case WEIGHT_F32: return "F32";
	case WEIGHT_F16: return "F16";
	case WEIGHT_Q4_0: return "Q4_0";
	case WEIGHT_Q8_0: return "Q8_0";
	case WEIGHT_Q4_K: return "Q4_K";
	case WEIGHT_Q6_K: return "Q6_K";
	}
	return "unknown";
}

/* The one type every matrix (embedding, classifier, layers) has; -1 with
 * err naming two that differ. Norms are always F32. */
int model_matrix_type(const Model *m, WeightType *type, InferError *err);
/* The one type the layers' matrices have (the embedding and the classifier
 * may differ); -1 with err naming two layer matrices that differ. */
int model_layer_type(const Model *m, WeightType *type, InferError *err);
/* Whether any of the layers' matrices has this type. */
int model_layers_have(const Model *m, WeightType type);
/* 0 when every matrix is F32; else -1, err saying which type it is (who:
 * the caller, for the message). */
int model_require_f32(const Model *m, const char *who, InferError *err);

#endif
