/* sampler.h - picks the next token from logits exactly as llama2.c run.c,
 * with llama.cpp's top-k, min-p and repetition penalties where asked. */
#ifndef INFER_SAMPLER_H
#define INFER_SAMPLER_H

#include <stdint.h>
#include "base/error.h"

typedef struct {
	float prob;
	int index;
} ProbIndex;

typedef struct {
	int vocab_size;
	float temperature;  /* 0: greedy argmax */
	float topp;         /* nucleus threshold; <= 0 or >= 1 samples the full distribution */
	uint64_t rng_state;
	ProbIndex *probindex; /* vocab_size scratch entries for top-p */
	int top_k;            /* keep the k highest logits; 0: all */
	float min_p;          /* keep p >= min_p * p_max; 0: all */
	float *kscratch;      /* vocab_size floats for top-k's selection */
} Sampler;

/* llama.cpp's penalties (llama_sampler_penalties) over a window of the
 * tokens so far, the prompt's included, as llama-server counts them: a
 * token seen c > 0 times there has its logit divided by repeat (multiplied
 * where it is <= 0), then lowered by c * frequency + presence. */
typedef struct {
	float repeat;     /* 1: off */
	float frequency;  /* OpenAI's frequency_penalty; 0: off */
	float presence;   /* OpenAI's presence_penalty; 0: off */
} Penalties;

int sampler_init(Sampler *s, int vocab_size, float temperature, float topp,
		 uint64_t seed, InferError *err);
/* top_k and min_p act at temperature > 0, on the logits before it is
 * applied, as in llama.cpp's chain; top-k keeps every token tied with the
 * k-th. */
int sampler_set_filters(Sampler *s, int top_k, float min_p, InferError *err);
void sampler_free(Sampler *s);
int penalties_active(const Penalties *p);
/* log(sum exp(x[i])), stable: what a logprob subtracts. */
float log_sum_exp(const float *x, int n);
/* The k largest of x[0..n) into ids, largest first, a tie to the lower
 * index; returns how many (k, or n when smaller). */
int top_ids(const float *x, int n, int k, int *ids);
/* Applies p to logits for the window[0..n) of token ids; scratch holds n
 * ints. Ids outside 0..vocab-1 are skipped. */
void penalties_apply(const Penalties *p, const int *window, int n, int *scratch,
		     float *logits, int vocab);
/* Samples from logits (modified in place, as run.c does). */
int sampler_sample(Sampler *s, float *logits);

/* run.c's xorshift generator, exposed for tests. */
uint32_t sampler_random_u32(uint64_t *state);
float sampler_random_f32(uint64_t *state);

/* In place: x[i] = exp(x[i] - max) / sum, as run.c. */
void softmax(float *x, int size);

#endif
