/* params.h - what one completion asks of the server (ServeParams) and
 * its limits: all reqparse.c fills in, without the server's own types. */
#ifndef INFER_PARAMS_H
#define INFER_PARAMS_H

#include <stdint.h>

#define SERVE_MAX_STOP 4     /* stop strings per request, as OpenAI allows */
#define SERVE_MAX_BIAS 1024  /* logit_bias entries per request */

/* What a completion asks for, already type-checked (reqparse.h). */
typedef struct {
	const char *prompt_text;   /* or, when NULL: */
	const int *prompt_ids;
	int n_prompt_ids;
	int max_tokens;            /* 0: the rest of the context */
	float temperature, top_p;
	uint64_t seed;
	int has_seed;
	const char *stop[SERVE_MAX_STOP];
	int n_stop;
	int no_prefix_cache;       /* llama-server's cache_prompt false */
	const int *bias_ids;       /* OpenAI's logit_bias: bias[i] is added to the */
	const float *bias;         /* logit of token bias_ids[i] before sampling */
	int n_bias;
	int chat;                  /* a chat turn: EOS ends it too, and control
				    * tokens add no text */
	/* llama.cpp's sampling (sampler.h); every zero is off */
	float frequency_penalty, presence_penalty;
	float repeat_penalty;      /* 0 or 1: off */
	int repeat_last_n;         /* the penalties' window; -1: the context, 0: off */
	int top_k;                 /* 0: all */
	float min_p;               /* 0: all */
	int logprobs;              /* 0: none; else each token's logprob and
				    * logprobs - 1 alternatives' */
	int structured;            /* the reply is JSON that json_schema allows */
	const char *json_schema;   /* a schema's JSON text; NULL: any JSON object */
} ServeParams;

#endif
