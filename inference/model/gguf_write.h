/* gguf_write.h - a Model written as a GGUF file (mkmodel --gguf, tests). */
#ifndef INFER_GGUF_WRITE_H
#define INFER_GGUF_WRITE_H

#include <stdio.h>
#include "model/model.h"
#include "text/tokenizer.h"

/* A chat template for the file, and the special tokens it names, which
 * follow tok's tokens as control tokens (the model's last n_added rows). */
typedef struct {
	const char *chat_template;
	const char *const *added;
	int n_added;
} GgufChat;

/* Writes m (all F32, as a llama2.c checkpoint is) to f from its start:
 * matrices as type (F32, F16, Q8_0, Q4_0, Q4_K or Q6_K), norms F32, and tok (may be NULL) as
 * the tokenizer.ggml.* metadata, with chat's template and tokens (may be NULL). */
int gguf_write_model(FILE *f, const Model *m, const Tokenizer *tok, const GgufChat *chat,
		     WeightType type, InferError *err);

#endif
