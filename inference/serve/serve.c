/* serve.c - the serving engine's step loop (see serve.h). */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include "base/pool.h"
#include "serve/serve.h"
#include "base/trace.h"

/* ---- requests ---- */

static void live_add(Server *s, ServeRequest *r)
{
	r->live_prev = NULL;
	r->live_next = s->live;
	if (s->live)
		s->live->live_prev = r;
	s->live = r;
}

static void live_remove(Server *s, ServeRequest *r)
{
	if (r->live_prev)
		r->live_prev->live_next = r->live_next;
	else
		s->live = r->live_next;
	if (r->live_next)
		r->live_next->live_prev = r->live_prev;
	r->live_prev = r->live_next = NULL;
}

static size_t lp_bytes(const ServeRequest *r)
{
	return r->lp_top < 0 ? 0 : (size_t)r->max_tokens * (size_t)(1 + r->lp_top) * sizeof(float);
}

static size_t lp_ids_bytes(const ServeRequest *r)
{
	return r->lp_top <= 0 ? 0 : (size_t)r->max_tokens * (size_t)r->lp_top * sizeof(int);
}

static void request_free(ServeRequest *r)
{
	seq_free(&r->seq);
	if (r->lp_raw)
		pool_free(POOL_ACTIVATIONS, r->lp_raw, (size_t)r->sampler.vocab_size * sizeof(float));
	pool_free(POOL_ACTIVATIONS, r->lp, lp_bytes(r));
	pool_free(POOL_ACTIVATIONS, r->lp_ids, lp_ids_bytes(r));
	sampler_free(&r->sampler);
	if (r->constraint) {
		constraint_free(r->constraint);
		pool_free(POOL_ACTIVATIONS, r->constraint, sizeof(*r->constraint));
		pool_free(POOL_ACTIVATIONS, r->unmasked, (size_t)r->sampler.vocab_size * sizeof(float));
	}
	pool_free(POOL_ACTIVATIONS, r->mem, r->mem_bytes);
	pool_free(POOL_ACTIVATIONS, r, sizeof(*r));
}

/* Under the lock. */
static void request_unref(ServeRequest *r)
{
	if (--r->refs == 0)
		request_free(r);
}

/* The penalties' window: repeat_last_n tokens (-1: the whole sequence),
 * none when no penalty acts. */
static void request_penalties(ServeRequest *r, const ServeParams *p)
{
	r->pen = (Penalties){ .repeat = p->repeat_penalty > 0 ? p->repeat_penalty : 1.0f,
			      .frequency = p->frequency_penalty,
			      .presence = p->presence_penalty };
	r->pen_window = 0;
	if (penalties_active(&r->pen) && p->repeat_last_n != 0)
		r->pen_window = p->repeat_last_n < 0 || p->repeat_last_n > r->seq.cap
				? r->seq.cap : p->repeat_last_n;
}

/* The penalties' scratch, the logit biases, the text buffer (every
 * token's longest piece) and the stop strings, in one pool block. */
static int request_strings(ServeRequest *r, const ServeParams *p, int max_piece,
			   InferError *err)
{
	size_t stop_bytes = 0, bias_bytes = (size_t)p->n_bias * (sizeof(int) + sizeof(float));
	size_t pen_bytes = (size_t)r->pen_window * sizeof(int);
	char *m;

	for (int i = 0; i < p->n_stop; i++)
		stop_bytes += strlen(p->stop[i]) + 1;
	r->text_cap = (size_t)p->max_tokens * ((size_t)max_piece + 1) + 1;
	r->mem_bytes = pen_bytes + bias_bytes + r->text_cap + stop_bytes;
	r->mem = pool_alloc(POOL_ACTIVATIONS, r->mem_bytes);
	if (!r->mem)
		return infer_fail(err, "out of memory for a request's text");
	m = r->mem;
	r->pen_scratch = pen_bytes ? (int *)m : NULL;
	m += pen_bytes;
	r->bias_ids = (int *)m;
	m += (size_t)p->n_bias * sizeof(int);
	r->bias = (float *)m;
	m += (size_t)p->n_bias * sizeof(float);
	r->n_bias = p->n_bias;
	if (p->n_bias) { /* NULL arrays when there are none */
		memcpy(r->bias_ids, p->bias_ids, (size_t)p->n_bias * sizeof(int));
		memcpy(r->bias, p->bias, (size_t)p->n_bias * sizeof(float));
	}
	r->text = m;
	m += r->text_cap;
	for (int i = 0; i < p->n_stop; i++) {
		size_t n = strlen(p->stop[i]) + 1;

		memcpy(m, p->stop[i], n);
		r->stop[r->n_stop++] = m;
		m += n;
	}
	return 0;
}

/* Greedy and full-distribution sampling need no scratch; top-p does. */
static int request_sampler(ServeRequest *r, const ServeParams *p, int vocab, uint64_t id,
			   InferError *err)
{
	/* xorshift stays at 0 from 0: a state of 0 gets a fixed constant (an
	 * "| 1" instead once made seeds 2 and 3 the same) */
	uint64_t seed = p->has_seed ? p->seed : ((uint64_t)time(NULL) << 20) ^ (id * 0x9e3779b97f4a7c15ull);

	if (!seed)
		seed = 0x9e3779b97f4a7c15ull;
	if (p->temperature > 0 && p->top_p > 0 && p->top_p < 1) {
		if (sampler_init(&r->sampler, vocab, p->temperature, p->top_p, seed, err))
			return -1;
	} else {
		r->sampler = (Sampler){ .vocab_size = vocab, .temperature = p->temperature,
					.topp = p->top_p, .rng_state = seed };
	}
	return sampler_set_filters(&r->sampler, p->top_k, p->min_p, err);
}

/* ---- output: text, stop strings, what may be sent ---- */

/* Bytes at the end of text that start a UTF-8 character not yet complete. */
static size_t partial_utf8(const char *text, size_t len)
{
	for (size_t back = 1; back <= 3 && back <= len; back++) {
		unsigned char c = (unsigned char)text[len - back];
		size_t need;

		if ((c & 0xc0) == 0x80)
			continue; /* a continuation byte: look further back */
		need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
		return need > back ? back : 0;
	}
	return 0;
}

/* Longest end of text that is a proper prefix of a stop string: it may yet
 * become one, so it is held back. */
static size_t partial_stop(const ServeRequest *r)
{
	size_t hold = 0;

	for (int i = 0; i < r->n_stop; i++) {
		size_t sl = strlen(r->stop[i]);

		for (size_t k = sl - 1; k > hold && k >= 1; k--)
			if (k <= r->text_len && !memcmp(r->text + r->text_len - k, r->stop[i], k)) {
				hold = k;
				break;
			}
	}
	return hold;
}

/* Cuts text at the first stop string that ends inside the new piece;
 * returns 1 when one did. */
static int cut_at_stop(ServeRequest *r, size_t piece_start)
{
	size_t best = r->text_len + 1;

	for (int i = 0; i < r->n_stop; i++) {
		size_t sl = strlen(r->stop[i]);
		size_t from = piece_start + 1 > sl ? piece_start + 1 - sl : 0;
		const char *hit = memmem(r->text + from, r->text_len - from, r->stop[i], sl);

		if (hit && (size_t)(hit - r->text) < best)
			best = (size_t)(hit - r->text);
	}
	if (best > r->text_len)
		return 0;
	r->text_len = best;
	r->text[best] = '\0';
	return 1;
}

static void append_piece(ServeRequest *r, const char *piece)
{
	size_t n = strlen(piece);

	if (!piece_is_printable(piece) || r->text_len + n >= r->text_cap)
		return;
	memcpy(r->text + r->text_len, piece, n + 1);
	r->text_len += n;
}

/* ---- the step ---- */

static void finish(Server *s, ServeRequest *r, enum finish_reason reason)
{
	sched_finish(&s->sched, &r->seq, reason);
	r->done = 1;
	r->visible = r->text_len;
	if (r->wake)
		r->wake(r->wake_ctx);
	live_remove(s, r);
	request_unref(r);
}

/* Whether token ends the request. With a GGUF file's vocabulary, as
 * llama.cpp's requests end: EOS, or a chat turn's end token ("<|im_end|>"...).
 * Else as llama2.c's stories: BOS, and a chat's EOS too. */
static int ends_turn(const Server *s, const ServeRequest *r, int token)
{
	const Tokenizer *t = &s->engine.tokenizer;

	if (token == TOKEN_EOS && (r->chat || s->engine.gguf_vocab))
		return 1;
	if (token == TOKEN_BOS && !s->engine.gguf_vocab)
		return 1;
	if (!s->engine.have_tokenizer)
		return 0;
	for (int i = 0; i < t->n_turn_end; i++)
		if (token == t->turn_end[i])
			return 1;
	return 0;
}

/* A sampled token: text, then the stop rules in OpenAI's order. */
static void take_token(Server *s, ServeRequest *r, int token)
{
	Seq *q = &r->seq;
	int prev = q->tokens[q->n_tokens - 1];
	size_t start = r->text_len;
	const Tokenizer *t = &s->engine.tokenizer;

	trace_token_emit(q->id, (uint32_t)q->n_tokens, (uint32_t)token);
	sched_append(q, token);
	if (ends_turn(s, r, token)) {
		finish(s, r, FINISH_STOP);
		return;
	}
	/* llama-server's replies have no control token's text; run.c prints them */
	if (s->engine.have_tokenizer &&
	    !((r->chat || s->engine.gguf_vocab) && t->control && t->control[token]))
		append_piece(r, tokenizer_decode(t, prev, token));
	if (r->n_stop && cut_at_stop(r, start)) {
		finish(s, r, FINISH_STOP);
		return;
	}
	/* a structured reply ends with its value, as llama-server's grammar
	 * then allows only the end of generation */
	if (r->constraint && (constraint_take(r->constraint, tokenizer_decode(t, prev, token)) < 0 ||
			      json_match_done(&r->constraint->m))) {
		finish(s, r, json_match_done(&r->constraint->m) ? FINISH_STOP : FINISH_ERROR);
		return;
	}
	if (q->n_tokens - q->n_prompt >= r->max_tokens || q->n_tokens >= q->cap) {
		finish(s, r, FINISH_LENGTH);
		return;
	}
	r->visible = r->text_len - partial_stop(r);
	r->visible -= partial_utf8(r->text, r->visible);
	if (r->wake)
		r->wake(r->wake_ctx);
}

static ServeRequest *owner(Seq *q)
{
	return (ServeRequest *)((char *)q - offsetof(ServeRequest, seq));
}

/* A draw the request's schema allows (constrain.h): the usual draw if it
 * is allowed, else one from the allowed tokens; -1 when none is. */
static void sample_constrained(Server *s, SampleJob *j)
{
	ServeRequest *r = j->r;
	const Tokenizer *t = &s->engine.tokenizer;
	int vocab = r->sampler.vocab_size, prev = r->seq.tokens[r->seq.n_tokens - 1];

	memcpy(r->unmasked, j->logits, (size_t)vocab * sizeof(float));
	j->token = sampler_sample(&r->sampler, j->logits);
	if (constraint_allows(r->constraint, t, prev, j->token))
		return;
	constraint_mask(r->constraint, t, &s->vocab_index, prev, r->unmasked, j->logits);
	j->token = sampler_sample(&r->sampler, j->logits);
	if (!constraint_allows(r->constraint, t, prev, j->token))
		j->token = -1;
}

/* logprobs, as llama-server reports them: of the model's own logits,
 * before biases, penalties and temperature. The alternatives now; the
 * drawn token's once it is drawn (logprob_taken). */
static float logprob_begin(ServeRequest *r, const float *logits)
{
	int vocab = r->sampler.vocab_size, g = r->seq.n_tokens - r->seq.n_prompt;
	float lse = log_sum_exp(logits, vocab), *lp = r->lp + (size_t)g * (size_t)(1 + r->lp_top);
	int *ids = r->lp_ids + (size_t)g * (size_t)r->lp_top;

	memcpy(r->lp_raw, logits, (size_t)vocab * sizeof(float));
	if (r->lp_top)
		top_ids(logits, vocab, r->lp_top, ids);
	for (int k = 0; k < r->lp_top; k++)
		lp[1 + k] = logits[ids[k]] - lse;
	return lse;
}

static void logprob_taken(ServeRequest *r, int token, float lse)
{
	int g = r->seq.n_tokens - r->seq.n_prompt;

	if (token >= 0)
		r->lp[(size_t)g * (size_t)(1 + r->lp_top)] = r->lp_raw[token] - lse;
}

static void sample_one(void *ctx, int i)
{
	SampleJob *j = &((Server *)ctx)->samples[i];
	ServeRequest *r = j->r;
	const Seq *q = &r->seq;
	int w = r->pen_window < q->n_tokens ? r->pen_window : q->n_tokens;
	float lse = r->lp_top >= 0 ? logprob_begin(r, j->logits) : 0.0f;

	for (int k = 0; k < r->n_bias; k++)
		j->logits[r->bias_ids[k]] += r->bias[k];
	/* after the biases, as llama.cpp's chain runs them */
	penalties_apply(&r->pen, q->tokens + q->n_tokens - w, w, r->pen_scratch, j->logits,
			r->sampler.vocab_size);
	if (r->constraint)
		sample_constrained((Server *)ctx, j);
	else
		j->token = sampler_sample(&j->r->sampler, j->logits);
	if (r->lp_top >= 0)
		logprob_taken(r, j->token, lse);
}

/* Draws the step's tokens, with the server unlocked: a request in the
 * step stays alive, and only the thread that takes its row touches its
 * sampler. Greedy rows take microseconds; a row at temperature > 0 takes
 * 0.2-0.3 ms on a 32000-token vocabulary (softmax through glibc's expf),
 * while the backend's threads wait for the next forward (PoCL's sleep;
 * OpenMP's spin a while unless OMP_WAIT_POLICY=passive), so two or more
 * of those are shared with the workers. */
static void sample_all(Server *s)
{
	int slow = 0;

	for (int i = 0; i < s->n_samples; i++)
		slow += s->samples[i].r->sampler.temperature != 0.0f;
	if (slow >= 2) {
		workers_run(&s->workers, sample_one, s, s->n_samples);
		return;
	}
	for (int i = 0; i < s->n_samples; i++)
		sample_one(s, i);
}

/* Takes every sampled token, in plan order (the order of the logits
 * rows), and finishes those cancelled during the step. A finished request
 * may be freed at once: nothing touches it after. */
static void take_outputs(Server *s)
{
	StepPlan *p = &s->sched.plan;
	int k = 0;

	for (int i = 0; i < p->n_items; i++) {
		StepItem *it = &p->items[i];
		ServeRequest *r = owner(it->seq);
		const SampleJob *j = it->want_logits ? &s->samples[k++] : NULL;

		if (r->done)
			continue;
		if (r->cancel)
			finish(s, r, FINISH_ABORT);
		else if (j && j->token < 0)
			finish(s, r, FINISH_ERROR); /* no token the schema allows */
		else if (j)
			take_token(s, r, j->token);
	}
}

static int run_forward(Server *s, int n, InferError *err)
{
	const Engine *e = &s->engine;
	int rc;

	trace_span_begin(SPAN_FORWARD, LAYER_NONE);
	rc = e->ops->forward_batch(e->backend, s->batch, n, s->logits, err);
	trace_span_end(SPAN_FORWARD, LAYER_NONE);
	return rc;
}

static void announce_prefix_cache(Server *s)
{
	const PrefixCache *c = &s->sched.prefix;

	if (!c->n_entries || (c->blocks == s->prefix_announced[0] &&
				c->used_entries == s->prefix_announced[1]))
		return;
	s->prefix_announced[0] = c->blocks;
	s->prefix_announced[1] = c->used_entries;
	trace_prefix_cache((uint32_t)c->used_entries, (uint32_t)c->blocks, (uint32_t)c->n_entries);
}

/* Blocks held by sequences; the prefix cache's are announced on their own. */
static void announce_kv(Server *s)
{
	int used = sched_kv_used(&s->sched);

	announce_prefix_cache(s);
	if (used == s->kv_announced)
		return;
	s->kv_announced = used;
	/* the same fact twice: in blocks for the serving tools, in bytes as
	 * the CLI's kv_usage says it */
	trace_kv_blocks((uint32_t)used, (uint32_t)s->sched.kv.n_blocks,
			(uint32_t)s->sched.kv.block_size, s->block_bytes);
	trace_kv_usage((uint64_t)used * s->block_bytes, (uint64_t)s->sched.kv.n_blocks * s->block_bytes);
}

/* A client that closed its socket reads as end-of-file. */
static int client_gone(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void server_cancel_locked(Server *s, ServeRequest *r);

static void reap_vanished(Server *s)
{
	ServeRequest *r = s->live, *next;

	for (; r; r = next) {
		next = r->live_next;
		if (r->client_fd >= 0 && !r->done && client_gone(r->client_fd)) {
			r->client_fd = -1;
			server_cancel_locked(s, r);
		}
	}
}

static void wait_for_work(Server *s)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 20 * 1000000L; /* wake anyway to notice vanished clients */
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&s->work, &s->lock, &ts);
}

/* Under the lock: one step, the lock dropped while the forward runs. */
static int step(Server *s)
{
	StepPlan *p = &s->sched.plan;
	int n = sched_plan(&s->sched), rc, vocab = s->engine.model.config.vocab_size;
	uint64_t id, t0;
	InferError err;

	if (n == 0) { /* nothing can run yet (only possible transiently) */
		wait_for_work(s);
		return 0;
	}
	id = ++s->steps;
	t0 = trace_step_begin(id, (uint32_t)n, (uint32_t)p->prefill_tokens,
			      (uint32_t)p->decode_tokens);
	s->n_samples = 0;
	for (int i = 0; i < n; i++) {
		StepItem *it = &p->items[i];

		s->batch[i] = (BatchSeq){ it->seq->tokens + it->start, it->n, it->start,
					  it->seq->blocks, it->want_logits };
		if (it->want_logits) {
			int k = s->n_samples++;

			s->samples[k] = (SampleJob){ owner(it->seq), s->logits + (size_t)k * vocab, -1 };
		}
	}
	pthread_mutex_unlock(&s->lock);
	rc = run_forward(s, n, &err);
	if (rc == 0 && s->n_samples > 0) {
		trace_span_begin(SPAN_SAMPLE, LAYER_NONE);
		sample_all(s);
		trace_span_end(SPAN_SAMPLE, LAYER_NONE);
	}
	pthread_mutex_lock(&s->lock);
	sched_step_done(&s->sched);
	if (rc == 0)
		take_outputs(s);
	trace_step_end(id, t0, (uint32_t)n, (uint32_t)p->prefill_tokens,
		       (uint32_t)p->decode_tokens, (uint32_t)sched_kv_used(&s->sched));
	announce_kv(s);
	if (rc < 0) {
		s->thread_err = err;
		return -1;
	}
	return 0;
}

/* Every request still held ends as "error" after a backend failure. */
static void fail_all(Server *s)
{
	while (s->live)
		finish(s, s->live, FINISH_ERROR);
}

static void *engine_thread(void *arg)
{
	Server *s = arg;

	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		reap_vanished(s);
		if (s->sched.running.n == 0 && s->sched.waiting.n == 0) {
			wait_for_work(s);
			continue;
		}
		if (step(s) < 0) {
			s->failed = 1;
			fail_all(s);
		}
	}
	while (s->live)
		finish(s, s->live, FINISH_ABORT);
	announce_kv(s);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---- the front end's side ---- */

static int serve_defaults(Server *s, const EngineOptions *eo, const ServeOptions *so,
			  BackendOptions *bo, InferError *err)
{
	s->opt = *so;
	if (s->opt.max_seqs < 1 || s->opt.max_seqs > 64)
		return infer_fail(err, "--max-seqs %d: 1..64 allowed", s->opt.max_seqs);
	if (s->opt.block_size < 1 || s->opt.block_size > 4096)
		return infer_fail(err, "--block-size %d: 1..4096 allowed", s->opt.block_size);
	if (s->opt.prefix_entries < 0)
		s->opt.prefix_entries = s->opt.max_seqs;
	*bo = eo->backend_opt;
	bo->max_seqs = s->opt.max_seqs;
	bo->kv_block_size = s->opt.block_size;
	return 0;
}

/* Sizes that need the model: the pool and the batch limit. */
static int serve_sizes(Server *s, InferError *err)
{
	int max_batch = backend_max_batch(s->engine.ops, s->engine.backend);

	if (s->opt.max_batch_tokens <= 0 || s->opt.max_batch_tokens > max_batch)
		s->opt.max_batch_tokens = max_batch;
	s->block_bytes = (size_t)s->engine.kv_bytes_per_pos * s->opt.block_size;
	if (sched_init(&s->sched, s->opt.kv_blocks, s->opt.block_size, s->opt.max_seqs,
		       s->opt.max_batch_tokens, err) < 0)
		return -1;
	return sched_prefix_init(&s->sched, s->opt.prefix_entries, s->ctx, err);
}

/* Threads besides the engine's that share a step's sampling: one per CPU
 * this process may run on, but no more than a step has rows. */
static int sampling_threads(int max_seqs)
{
	cpu_set_t set;
	int cpus = 1;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		cpus = CPU_COUNT(&set);
	return (cpus < max_seqs ? cpus : max_seqs) - 1;
}

int server_open(Server *s, const EngineOptions *eo, const ServeOptions *so, InferError *err)
{
	EngineOptions e = *eo;
	Model probe;
	int blocks;

	memset(s, 0, sizeof(*s));
	s->kv_announced = s->prefix_announced[0] = s->prefix_announced[1] = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->work, NULL);
	if (serve_defaults(s, eo, so, &e.backend_opt, err) < 0)
		return -1;
	/* the pool size depends on seq_len: peek at the header first */
	if (model_load(&probe, eo->model_path, err) < 0)
		return -1;
	s->ctx = probe.config.seq_len;
	model_free(&probe);
	if (s->opt.ctx_size > 0 && s->opt.ctx_size < s->ctx)
		s->ctx = s->opt.ctx_size;
	blocks = kv_blocks_for(s->ctx, s->opt.block_size);
	/* --ctx-size alone is llama-server's -c: the pool's positions in all */
	if (s->opt.kv_blocks <= 0 && s->opt.ctx_size > 0)
		s->opt.kv_blocks = kv_blocks_for(s->opt.ctx_size, s->opt.block_size);
	if (s->opt.kv_blocks <= 0)
		s->opt.kv_blocks = s->opt.max_seqs * blocks;
	e.backend_opt.kv_blocks = s->opt.kv_blocks;
	if (engine_open(&s->engine, &e, err) < 0)
		return -1;
	if (serve_sizes(s, err) < 0)
		goto fail;
	s->logits = pool_alloc(POOL_ACTIVATIONS, (size_t)s->opt.max_seqs *
			       s->engine.model.config.vocab_size * sizeof(float));
	s->batch = pool_alloc(POOL_ACTIVATIONS, (size_t)s->opt.max_seqs * sizeof(BatchSeq));
	s->samples = pool_alloc(POOL_ACTIVATIONS, (size_t)s->opt.max_seqs * sizeof(SampleJob));
	if (!s->logits || !s->batch || !s->samples) {
		infer_fail(err, "out of memory for the batch's logits");
		goto fail;
	}
	if (workers_init(&s->workers, sampling_threads(s->opt.max_seqs), err) < 0)
		goto fail;
	announce_kv(s);
	return 0;
fail:
	server_close(s);
	return -1;
}

int server_start(Server *s, InferError *err)
{
	int rc = pthread_create(&s->thread, NULL, engine_thread, s);

	if (rc != 0)
		return infer_fail(err, "cannot start the engine thread: %s", strerror(rc));
	s->thread_started = 1;
	return 0;
}

void server_stop(Server *s)
{
	if (!s->thread_started)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_signal(&s->work);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	s->thread_started = 0;
}

void server_close(Server *s)
{
	server_stop(s);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->work);
	workers_free(&s->workers);
	if (s->samples)
		pool_free(POOL_ACTIVATIONS, s->samples, (size_t)s->opt.max_seqs * sizeof(SampleJob));
	if (s->batch)
		pool_free(POOL_ACTIVATIONS, s->batch, (size_t)s->opt.max_seqs * sizeof(BatchSeq));
	if (s->logits)
		pool_free(POOL_ACTIVATIONS, s->logits, (size_t)s->opt.max_seqs *
			  s->engine.model.config.vocab_size * sizeof(float));
	if (s->sched.plan.items)
		sched_destroy(&s->sched);
	if (s->engine.ops)
		engine_close(&s->engine);
	vocab_index_free(&s->vocab_index);
	s->logits = NULL;
	s->batch = NULL;
	s->samples = NULL;
}

void server_lock(Server *s)
{
	pthread_mutex_lock(&s->lock);
}

void server_unlock(Server *s)
{
	pthread_mutex_unlock(&s->lock);
}

/* The prompt as ids (BOS + text, or the ids given), checked against the
 * model and the pool. */
static int prompt_ids(Server *s, const ServeParams *p, EnginePrompt *ep, int *status,
		      InferError *err)
{
	const Config *c = &s->engine.model.config;
	int vocab = c->vocab_size;

	*status = 400;
	memset(ep, 0, sizeof(*ep));
	if (p->prompt_text && s->engine.have_tokenizer) {
		/* no token covers more bytes than the longest piece: a text that
		 * cannot fit is refused before the merges, whose time grows with
		 * the square of its length, and which hold the server's lock */
		size_t least = strlen(p->prompt_text) / (size_t)(s->engine.tokenizer.max_token_length + 1);

		if (least + 1 > (size_t)s->ctx)
			return infer_fail(err, "This model's maximum context length is %d tokens, but "
					  "the prompt has at least %zu", s->ctx, least + 1);
	}
	if (p->prompt_text)
		return engine_encode(&s->engine, p->prompt_text, ep, err);
	if (p->n_prompt_ids < 1)
		return infer_fail(err, "prompt: an empty list of token ids");
	if (p->n_prompt_ids > s->ctx)
		return infer_fail(err, "This model's maximum context length is %d tokens, "
				  "but the prompt has %d", s->ctx, p->n_prompt_ids);
	for (int i = 0; i < p->n_prompt_ids; i++)
		if (p->prompt_ids[i] < 0 || p->prompt_ids[i] >= vocab)
			return infer_fail(err, "prompt: token id %d is outside the vocabulary "
					  "(0..%d)", p->prompt_ids[i], vocab - 1);
	ep->bytes = (size_t)p->n_prompt_ids * sizeof(int);
	ep->ids = pool_alloc(POOL_ACTIVATIONS, ep->bytes);
	if (!ep->ids) {
		*status = 503;
		return infer_fail(err, "out of memory for the prompt");
	}
	memcpy(ep->ids, p->prompt_ids, ep->bytes);
	ep->n = p->n_prompt_ids;
	return 0;
}

static int check_bias(Server *s, const ServeParams *p, InferError *err)
{
	int vocab = s->engine.model.config.vocab_size;

	for (int i = 0; i < p->n_bias; i++)
		if (p->bias_ids[i] >= vocab)
			return infer_fail(err, "logit_bias: token id %d is outside the vocabulary "
					  "(0..%d)", p->bias_ids[i], vocab - 1);
	return 0;
}

static int check_fits(Server *s, int n_prompt, int max_tokens, InferError *err)
{
	int seq_len = s->ctx;

	if ((long)n_prompt + max_tokens > seq_len)
		return infer_fail(err, "This model's maximum context length is %d tokens. However, "
				  "you requested %ld tokens (%d in your prompt; %d for the "
				  "completion).", seq_len, (long)n_prompt + max_tokens, n_prompt,
				  max_tokens);
	if (!sched_fits(&s->sched, n_prompt + max_tokens))
		return infer_fail(err, "the request needs %d KV blocks of %d positions but the "
				  "pool has %d: it can never run",
				  kv_blocks_for(n_prompt + max_tokens, s->sched.kv.block_size),
				  s->sched.kv.block_size, s->sched.kv.n_blocks);
	return 0;
}

/* logprobs: the raw logits' copy and each generated token's figures. */
static int request_logprobs(ServeRequest *r, const ServeParams *p, InferError *err)
{
	r->lp_top = p->logprobs - 1;
	if (r->lp_top < 0)
		return 0;
	r->lp_raw = pool_alloc(POOL_ACTIVATIONS, (size_t)r->sampler.vocab_size * sizeof(float));
	r->lp = pool_alloc(POOL_ACTIVATIONS, lp_bytes(r));
	r->lp_ids = r->lp_top ? pool_alloc(POOL_ACTIVATIONS, lp_ids_bytes(r)) : NULL;
	if (!r->lp_raw || !r->lp || (r->lp_top && !r->lp_ids))
		return infer_fail(err, "out of memory for a request's logprobs");
	return 0;
}

/* Structured output: the schema compiled, the logits' copy, and the
 * vocabulary index the first time. */
static int request_constraint(Server *s, ServeRequest *r, const ServeParams *p, InferError *err)
{
	int vocab = s->engine.model.config.vocab_size;

	if (!p->structured)
		return 0;
	if (!s->engine.have_tokenizer)
		return infer_fail(err, "response_format: this model has no tokenizer, so no token's "
				  "text is known");
	if (!s->vocab_index.ids && vocab_index_build(&s->vocab_index, &s->engine.tokenizer, err) < 0)
		return -1;
	r->constraint = pool_alloc(POOL_ACTIVATIONS, sizeof(*r->constraint));
	r->unmasked = pool_alloc(POOL_ACTIVATIONS, (size_t)vocab * sizeof(float));
	if (!r->constraint || !r->unmasked) {
		pool_free(POOL_ACTIVATIONS, r->constraint, sizeof(*r->constraint));
		pool_free(POOL_ACTIVATIONS, r->unmasked, (size_t)vocab * sizeof(float));
		r->constraint = NULL;
		return infer_fail(err, "out of memory for a structured request");
	}
	if (constraint_init(r->constraint, p->json_schema, err) < 0) {
		pool_free(POOL_ACTIVATIONS, r->constraint, sizeof(*r->constraint));
		pool_free(POOL_ACTIVATIONS, r->unmasked, (size_t)vocab * sizeof(float));
		r->constraint = NULL;
		return -1;
	}
	return 0;
}

static int build_request(Server *s, const ServeParams *p, const EnginePrompt *ep,
			 ServeRequest *r, InferError *err)
{
	int vocab = s->engine.model.config.vocab_size;
	int piece = s->engine.have_tokenizer ? s->engine.tokenizer.max_token_length + 8 : 1;
	uint64_t id = ++s->next_id;

	r->client_fd = -1;
	r->max_tokens = p->max_tokens;
	r->chat = p->chat;
	if (seq_init(&r->seq, id, ep->ids, ep->n, p->max_tokens, s->sched.kv.block_size, err))
		return -1;
	request_penalties(r, p);
	r->lp_top = -1;
	if (request_strings(r, p, piece, err) ||
	    request_sampler(r, p, vocab, id, err) ||
	    /* after the sampler: its vocab_size sizes the copies */
	    request_constraint(s, r, p, err) || request_logprobs(r, p, err))
		return -1;
	r->seq.no_prefix_cache = p->no_prefix_cache;
	return 0;
}

/* max_tokens 0 (a chat's default, or -1 asked), or more than the context
 * leaves after the prompt: what it leaves, as llama-server stops there
 * (finish_reason length). */
static int resolve_max_tokens(Server *s, int n_prompt, int *max_tokens, InferError *err)
{
	int seq_len = s->ctx;

	if (n_prompt >= seq_len)
		return infer_fail(err, "This model's maximum context length is %d tokens, but the "
				  "prompt has %d: no room is left for the reply", seq_len, n_prompt);
	if (*max_tokens <= 0 || *max_tokens > seq_len - n_prompt)
		*max_tokens = seq_len - n_prompt;
	return 0;
}

static int submit_locked(Server *s, const ServeParams *asked, ServeRequest **out, int *status,
			 InferError *err)
{
	ServeParams params = *asked, *p = &params;
	EnginePrompt ep;
	ServeRequest *r;

	if (s->failed) {
		*status = 500;
		return infer_fail(err, "the engine failed: %s", s->thread_err.msg);
	}
	if (check_bias(s, p, err) < 0 || prompt_ids(s, p, &ep, status, err) < 0)
		return -1;
	if (resolve_max_tokens(s, ep.n, &p->max_tokens, err) < 0 ||
	    check_fits(s, ep.n, p->max_tokens, err) < 0) {
		engine_prompt_free(&ep);
		return -1;
	}
	*status = 503;
	r = pool_alloc(POOL_ACTIVATIONS, sizeof(*r));
	if (!r || build_request(s, p, &ep, r, err) < 0) {
		if (r)
			request_free(r);
		engine_prompt_free(&ep);
		return r ? -1 : infer_fail(err, "out of memory for a request");
	}
	engine_prompt_free(&ep);
	*out = r;
	return 0;
}

int server_submit(Server *s, const ServeParams *p, ServeWakeFn wake, void *ctx,
		  int client_fd, ServeRequest **out, int *status, InferError *err)
{
	ServeRequest *r = NULL;

	pthread_mutex_lock(&s->lock);
	if (submit_locked(s, p, &r, status, err) < 0) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	r->wake = wake;
	r->wake_ctx = ctx;
	r->client_fd = client_fd;
	r->refs = 2; /* the front end and the engine */
	live_add(s, r);
	sched_enqueue(&s->sched, &r->seq, r->max_tokens);
	pthread_cond_signal(&s->work);
	pthread_mutex_unlock(&s->lock);
	*out = r;
	return 0;
}

static void server_cancel_locked(Server *s, ServeRequest *r)
{
	if (r->done)
		return;
	if (r->seq.in_step)
		r->cancel = 1; /* the step still uses its blocks: finished right after */
	else {
		finish(s, r, FINISH_ABORT);
		announce_kv(s);
	}
}

void server_cancel(Server *s, ServeRequest *r)
{
	pthread_mutex_lock(&s->lock);
	r->client_fd = -1;
	server_cancel_locked(s, r);
	pthread_mutex_unlock(&s->lock);
}

void server_release(Server *s, ServeRequest *r)
{
	pthread_mutex_lock(&s->lock);
	r->wake = NULL;
	r->client_fd = -1;
	request_unref(r);
	pthread_mutex_unlock(&s->lock);
}

void server_gauges(Server *s, ServerGauges *g)
{
	g->running = s->sched.running.n;
	g->waiting = s->sched.waiting.n;
	g->kv_used = sched_kv_used(&s->sched);
	g->kv_total = s->sched.kv.n_blocks;
	g->kv_cached = s->sched.prefix.blocks;
	g->block_size = s->sched.kv.block_size;
	g->steps = s->steps;
	g->requests = s->next_id;
}
