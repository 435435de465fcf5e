/* model_gguf.h - a Model from a GGUF file of the llama architecture (used
 * by model.c; the tokenizer reads the same parsed header). */
#ifndef INFER_MODEL_GGUF_H
#define INFER_MODEL_GGUF_H

#include "model/model.h"

/* Parses m->map (m->map_size bytes, starting "GGUF") into m->config,
 * m->weights and m->gguf; -1 with err naming what is wrong. */
int gguf_model(Model *m, const char *path, InferError *err);
void model_gguf_free(Model *m);

#endif
