/* model.h - llama2.c checkpoints: the config header and mmap'd weights. */
#ifndef INFER_MODEL_H
#define INFER_MODEL_H

#include <stddef.h>
#include "error.h"

typedef struct {
	int dim;        /* transformer width */
	int hidden_dim; /* ffn width */
	int n_layers;
	int n_heads;    /* query heads */
	int n_kv_heads; /* key/value heads; < n_heads means grouped-query attention */
	int vocab_size; /* always positive here; the file's sign is in shared_classifier */
	int seq_len;    /* max positions */
	int shared_classifier; /* 1 when the file's vocab_size was positive */
} Config;

/* Pointers into the mmap'd file, llama2.c order. head_size = dim / n_heads,
 * kv_dim = n_kv_heads * head_size. Matrices are row-major (out, in). */
typedef struct {
	const float *token_embedding_table; /* (vocab_size, dim) */
	const float *rms_att_weight;        /* (n_layers, dim) */
	const float *wq;                    /* (n_layers, dim, dim) */
	const float *wk;                    /* (n_layers, kv_dim, dim) */
	const float *wv;                    /* (n_layers, kv_dim, dim) */
	const float *wo;                    /* (n_layers, dim, dim) */
	const float *rms_ffn_weight;        /* (n_layers, dim) */
	const float *w1;                    /* (n_layers, hidden_dim, dim) */
	const float *w2;                    /* (n_layers, dim, hidden_dim) */
	const float *w3;                    /* (n_layers, hidden_dim, dim) */
	const float *rms_final_weight;      /* (dim) */
	const float *wcls;                  /* (vocab_size, dim); the embedding when shared */
} Weights;

typedef struct {
	Config config;
	Weights weights;
	void *map;       /* the whole file, read-only */
	size_t map_size;
} Model;

/* Maps and validates a checkpoint. On failure m is left empty. */
int model_load(Model *m, const char *path, InferError *err);
void model_free(Model *m);

/* Validates header values alone (dims positive, divisible, sizes bounded). */
int config_validate(const Config *c, InferError *err);

/* Bytes of fp32 weights the file must hold after the header for c. */
size_t config_weights_bytes(const Config *c);

#endif
