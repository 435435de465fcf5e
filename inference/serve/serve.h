/* serve.h - the serving engine: many requests, one batched forward per step.
 *
 * An engine thread loops: plan a step (scheduler.h), run one forward_batch
 * over it, sample each sequence that reached its last token, turn tokens
 * into text, apply stop strings and limits, and wake whoever waits for that
 * request's output. The front end (http.c) submits requests and reads their
 * output under the server's lock; it never touches the model.
 *
 * A request is shared by the front end and the engine thread and freed
 * when both have let go (server_release and the engine's finish). */
#ifndef INFER_SERVE_H
#define INFER_SERVE_H

#include <pthread.h>
#include <stdint.h>
#include "engine/engine.h"
#include "serve/constrain.h"
#include "serve/params.h"
#include "serve/scheduler.h"
#include "base/workers.h"

typedef struct {
	int max_seqs;          /* sequences running at once */
	int max_batch_tokens;  /* tokens per step; 0: the backend's limit */
	int kv_blocks;         /* KV pool blocks; 0: max_seqs full-length sequences */
	int block_size;        /* positions per block */
	int prefix_entries;    /* finished sequences the prefix cache keeps; 0: off,
				* -1: max_seqs */
	int ctx_size;          /* positions a request may use, at most the model's, and
				* the pool's size when kv_blocks is 0; 0: the model's */
} ServeOptions;

/* Called under the server lock when a request has new output or is done. */
typedef void (*ServeWakeFn)(void *ctx);

typedef struct ServeRequest {
	Seq seq;
	Sampler sampler;
	int lp_top;             /* -1: no logprobs; else alternatives per token */
	float *lp_raw;          /* (vocab) the step's logits before any change */
	float *lp;              /* (max_tokens * (1 + lp_top)) per generated token: its
				 * logprob, then its alternatives' */
	int *lp_ids;            /* (max_tokens * lp_top) the alternatives, likeliest first */
	Constraint *constraint; /* structured output, or NULL */
	float *unmasked;        /* (vocab) the logits a constrained draw started from */
	Penalties pen;          /* over the last pen_window tokens of seq */
	int pen_window;         /* 0: no penalties */
	int *pen_scratch;       /* (pen_window) in mem */
	int max_tokens;
	int chat;               /* ServeParams' */
	int *bias_ids;          /* (n_bias) ServeParams', in mem */
	float *bias;            /* (n_bias) */
	int n_bias;
	char *stop[SERVE_MAX_STOP];
	int n_stop;
	char *text;             /* (text_cap) completion text so far, NUL-terminated */
	size_t text_len, text_cap;
	size_t visible;         /* bytes of text that may be sent: no partial stop string
				 * or UTF-8 character at the end */
	int done;
	int cancel;             /* cancelled while in a step: finished after it */
	int refs;
	int client_fd;          /* polled for a vanished client; -1: none */
	ServeWakeFn wake;
	void *wake_ctx;
	void *mem;              /* one pool block for the strings and biases above */
	size_t mem_bytes;
	struct ServeRequest *live_prev, *live_next;
} ServeRequest;

/* A row of logits to sample for a request, and the token drawn. */
typedef struct {
	ServeRequest *r;
	float *logits;
	int token;
} SampleJob;

typedef struct {
	Engine engine;
	Sched sched;
	ServeOptions opt;
	int ctx;                   /* positions a request may use: the model's, or ctx_size */
	VocabIndex vocab_index;    /* built at the first structured request */
	pthread_mutex_t lock;
	pthread_cond_t work;       /* a request arrived, or stop */
	pthread_t thread;
	int thread_started, stop;
	int failed;                /* the engine thread hit a backend error */
	InferError thread_err;
	float *logits;             /* (max_seqs, vocab_size) */
	BatchSeq *batch;           /* (max_seqs) */
	SampleJob *samples;        /* (max_seqs) the step's rows of logits, in plan order */
	int n_samples;
	Workers workers;           /* share a step's sampling with the engine thread */
	uint64_t next_id, steps;
	ServeRequest *live;        /* requests the engine still holds */
	int kv_announced;          /* blocks in use at the last kv_blocks probe */
	int prefix_announced[2];   /* the prefix cache's blocks and entries at its last probe */
	size_t block_bytes;
} Server;

/* Opens the model and backend with a paged KV pool; starts nothing. */
int server_open(Server *s, const EngineOptions *eo, const ServeOptions *so, InferError *err);
int server_start(Server *s, InferError *err);
/* Stops the engine thread, finishing every request as "abort" (and waking
 * its reader). The front end may still release requests after. */
void server_stop(Server *s);
/* Stops (if needed) and frees everything; nothing may use s after. */
void server_close(Server *s);

/* Validates p against the model and the pool and queues the request.
 * On failure *status is the HTTP status to answer (400 for the client's
 * mistakes) and err says why. */
int server_submit(Server *s, const ServeParams *p, ServeWakeFn wake, void *ctx,
		  int client_fd, ServeRequest **out, int *status, InferError *err);
/* The client is gone: abort the request (its blocks are freed now, or at
 * the end of the step that is using them). */
void server_cancel(Server *s, ServeRequest *r);
/* The front end lets go of r (after cancel or after reading it all). */
void server_release(Server *s, ServeRequest *r);

void server_lock(Server *s);
void server_unlock(Server *s);

/* The engine's own gauges, under the lock. */
typedef struct {
	int running, waiting;
	int kv_used, kv_total, block_size;
	int kv_cached;  /* the prefix cache's blocks (not in kv_used) */
	uint64_t steps, requests;
} ServerGauges;
void server_gauges(Server *s, ServerGauges *g);

#endif
