/* engine.h - one model, one backend, one sampler: the generation loop the
 * CLI (and anything else embedding the engine) drives. */
#ifndef INFER_ENGINE_H
#define INFER_ENGINE_H

#include <stdint.h>
#include "backend/backend.h"
#include "text/chat.h"
#include "base/error.h"
#include "model/model.h"
#include "engine/sampler.h"
#include "text/tokenizer.h"

typedef struct {
	const char *model_path;
	const char *tokenizer_path; /* NULL: no tokenizer (token ids only) */
	const char *backend;        /* "cpu" or "opencl" */
	BackendOptions backend_opt;
	float temperature;          /* 0: greedy */
	float topp;
	uint64_t seed;
	int steps;                  /* positions per request; 0 or > seq_len: seq_len */
	const char *chat_template;  /* a family name (chat.h): overrides the file's template */
} EngineOptions;

typedef struct {
	Model model;
	Tokenizer tokenizer;
	int have_tokenizer;
	const BackendOps *ops;
	void *backend;
	Sampler sampler;
	float *logits;              /* vocab_size floats */
	int steps;
	enum kv_type kv_type;       /* the cache's, --kv-type auto resolved */
	uint64_t kv_bytes_per_pos;  /* all layers, keys and values */
	int gguf_vocab;             /* the tokenizer is the GGUF file's: a served request
				     * ends as llama.cpp's do, at EOS (llama2.c's stories
				     * end at BOS), and control tokens add no text */
	ChatFormat chat;            /* the chat prompt's format; family CHAT_NONE: none */
	char chat_missing[160];     /* when none: why, for the API's 400 */
} Engine;

/* A prompt's token ids, allocated from the activations pool. */
typedef struct {
	int *ids;
	int n;
	size_t bytes;
} EnginePrompt;

/* Called with each generated token (prev is the token before it); a
 * nonzero return stops the request after this token. */
typedef int (*EngineTokenFn)(void *ctx, int prev, int token);

int engine_open(Engine *e, const EngineOptions *opt, InferError *err);
void engine_close(Engine *e);

/* BOS followed by the encoded text, its special tokens' texts as their ids
 * (tokenizer_encode_special); needs the tokenizer, and every id must be
 * inside the model's vocabulary. */
int engine_encode(Engine *e, const char *text, EnginePrompt *p, InferError *err);
/* Just BOS: generation from nothing, no tokenizer needed. */
int engine_prompt_bos(EnginePrompt *p, InferError *err);
void engine_prompt_free(EnginePrompt *p);

/* Runs request req as llama2.c's generate(): the prompt is prefilled in
 * batches, then one token per forward until steps positions, a sampled BOS,
 * or fn asks to stop. *generated counts sampled tokens (a final BOS
 * included, though fn never sees it). */
int engine_generate(Engine *e, uint64_t req, const EnginePrompt *p,
		    EngineTokenFn fn, void *ctx, int *generated, InferError *err);

#endif
