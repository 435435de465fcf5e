/* reqparse.h - the bodies of POST /v1/completions and /v1/chat/completions,
 * parsed and type-checked.
 *
 * OpenAI's fields: prompt (a string, one string in a list, or a list of
 * token ids), max_tokens, temperature, top_p, seed, stop (a string or up to
 * 4), stream, logit_bias ({"token id": -100..100}); llama-server's cache_prompt (default true: a prefix of the
 * prompt may come from the prefix cache); model is accepted and ignored; n, best_of, echo, logprobs and
 * suffix are accepted only at their defaults. Unknown fields are ignored.
 * Anything malformed or of the wrong type fails with a message that names
 * the field: the HTTP layer answers 400 with it.
 *
 * A chat request has messages (system, developer as system, user and
 * assistant; content a string or text parts, joined with "\n" as
 * llama-server joins them) instead of prompt; max_completion_tokens or
 * max_tokens, default: the rest of the context; stream_options.include_usage.
 * What the engine cannot do is refused by name: n > 1, tools and tool
 * calls, images and audio, logprobs, response formats other than text. */
#ifndef INFER_REQPARSE_H
#define INFER_REQPARSE_H

#include <stddef.h>
#include <stdint.h>
#include "text/chat.h"
#include "serve/params.h"

#define REQ_DEFAULT_MAX_TOKENS 16     /* OpenAI's default */
#define REQ_MAX_MAX_TOKENS (1 << 20)  /* beyond any context this engine runs */
#define REQ_MAX_TOP_LOGPROBS 20      /* OpenAI's chat limit */
#define REQ_MAX_N 8                  /* choices per request */
#define REQ_MAX_PROMPT_IDS (1 << 20)
#define REQ_MAX_MESSAGES 4096

typedef struct {
	char *prompt_text;  /* owned; NULL when the prompt is token ids */
	int *prompt_ids;    /* owned, (n_prompt_ids) */
	int n_prompt_ids;
	int max_tokens;
	double temperature, top_p;
	uint64_t seed;
	int has_seed;
	char *stop[SERVE_MAX_STOP]; /* owned */
	int n_stop;
	int stream;
	int cache_prompt;
	int *bias_ids;      /* owned, (n_bias): logit_bias's token ids and */
	float *bias;        /* owned, (n_bias) their biases, -100..100 */
	int n_bias;
	ChatMessage *messages; /* owned, (n_messages) with their contents; NULL: not chat */
	int n_messages;
	int include_usage;  /* stream_options.include_usage: a last chunk with usage */
	double frequency_penalty, presence_penalty; /* OpenAI's, -2..2 */
	double repeat_penalty;  /* llama.cpp's, default 1 (off) */
	int repeat_last_n;      /* llama.cpp's, default 64; -1: the context */
	int top_k;              /* llama.cpp's, 0: off */
	double min_p;           /* llama.cpp's, 0: off */
	int n;                  /* choices, each its own sequence */
	int logprobs;           /* -1: none; else each token's logprob and this many
				 * alternatives' */
	int structured;         /* response_format json_object or json_schema */
	char *json_schema;      /* owned: the schema's JSON text; NULL: any object */
} CompletionRequest;

/* Parses len bytes of JSON; on failure writes one line to err (errlen
 * bytes) and returns -1 with nothing left to free. */
int completion_request_parse(const char *body, size_t len, CompletionRequest *out,
			     char *err, size_t errlen);
/* The same for a chat request's body. */
int chat_request_parse(const char *body, size_t len, CompletionRequest *out, char *err,
		       size_t errlen);
void completion_request_free(CompletionRequest *r);

/* llama-server's /tokenize body: content, add_special (default false),
 * parse_special (default true). */
typedef struct {
	char *content;  /* owned */
	int add_special, parse_special;
} TokenizeRequest;
int tokenize_request_parse(const char *body, size_t len, TokenizeRequest *out, char *err,
			   size_t errlen);

/* The parsed request as what the serving engine takes (pointers into r;
 * a chat request's prompt_text is its rendered prompt, set by the caller). */
void completion_request_params(const CompletionRequest *r, ServeParams *p);

#endif
