/* sampler.h - picks the next token from logits exactly as llama2.c run.c. */
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
} Sampler;

int sampler_init(Sampler *s, int vocab_size, float temperature, float topp,
		 uint64_t seed, InferError *err);
void sampler_free(Sampler *s);
/* Samples from logits (modified in place, as run.c does). */
int sampler_sample(Sampler *s, float *logits);

/* run.c's xorshift generator, exposed for tests. */
uint32_t sampler_random_u32(uint64_t *state);
float sampler_random_f32(uint64_t *state);

/* In place: x[i] = exp(x[i] - max) / sum, as run.c. */
void softmax(float *x, int size);

#endif
