/* engine.c - the generation loop: prefill, decode, sample, and the request
 * and token probes around them. */
#include <stdio.h>
#include <string.h>
#include "engine/engine.h"
#include "format/gguf.h"
#include "base/pool.h"
#include "base/trace.h"

/* -z TOKENIZER, else the one a GGUF model carries, else none (--ids). */
static int open_tokenizer(Engine *e, const char *path, const char *model_path, InferError *err)
{
	const struct gguf *g = e->model.gguf;
	int own = 0;

	if (path) {
		if (tokenizer_load(&e->tokenizer, path, err) < 0)
			return -1;
	} else if (g && gguf_find(g, "tokenizer.ggml.tokens")) {
		if (tokenizer_from_gguf(&e->tokenizer, g, err) < 0)
			return infer_prefix(err, "%s", model_path);
		path = "the model's GGUF tokenizer";
		own = 1;
	} else {
		return 0;
	}
	e->have_tokenizer = 1;
	e->gguf_vocab = own;
	/* a file's own tokens are its embedding's rows (llama.cpp refuses
	 * others too); -z may bring a larger vocabulary, checked per prompt */
	if (own && e->tokenizer.vocab_size != e->model.config.vocab_size)
		return infer_fail(err, "%s: its tokenizer has %d tokens but token_embd.weight has %d rows",
				  model_path, e->tokenizer.vocab_size, e->model.config.vocab_size);
	if (e->tokenizer.vocab_size < e->model.config.vocab_size)
		return infer_fail(err, "%s: tokenizer has %d tokens but the model's vocabulary "
				  "is %d", path, e->tokenizer.vocab_size, e->model.config.vocab_size);
	return 0;
}

/* --kv-type auto: the cache in the layers' precision, at most 16 bits, as
 * vLLM's "auto" (the model's dtype) and llama.cpp's f16 cache do. So f16
 * when the layers' matrices are F16 or quantized, whatever the embedding's
 * type: attention reads the whole cache from memory every step (13 GB/s
 * for a lone 110M-shape token at position 450), and such a model's ids are
 * llama.cpp's, which keeps its cache in f16. Layers with an F32 matrix
 * (llama2.c checkpoints) keep the reference's f32 cache, with run.c's
 * golden ids. */
static enum kv_type resolve_kv_type(const Model *m, enum kv_type asked)
{
	if (asked != KV_AUTO)
		return asked;
	return model_layers_have(m, WEIGHT_F32) ? KV_F32 : KV_F16;
}

/* --chat-template NAME, else the family of the file's tokenizer.chat_template.
 * No usable template is no error: only a chat request needs one, and it
 * gets chat_missing as the reason. */
static int resolve_chat(Engine *e, const char *name, InferError *err)
{
	const struct gguf *g = e->model.gguf;
	const char *tmpl;
	uint32_t len;

	e->chat = (ChatFormat){ CHAT_NONE, 0 };
	if (name) {
		e->chat.family = chat_family_by_name(name);
		if (e->chat.family == CHAT_NONE)
			return infer_fail(err, "--chat-template '%s': not a template this engine "
					  "knows (%s)", name, chat_family_list());
		return 0;
	}
	if (!g || !gguf_find(g, "tokenizer.chat_template")) {
		snprintf(e->chat_missing, sizeof(e->chat_missing), "the model has no chat template");
		return 0;
	}
	if (gguf_get_str(g, "tokenizer.chat_template", &tmpl, &len, err) < 0)
		return -1;
	e->chat = chat_detect(tmpl, len);
	if (e->chat.family == CHAT_NONE)
		snprintf(e->chat_missing, sizeof(e->chat_missing),
			 "the model's chat template is not one of the families this engine knows");
	return 0;
}

/* -b auto: the backend that is faster for the file. A GGUF file runs on
 * the cpu backend unless OpenCL has a GPU (or an accelerator), or a device
 * was asked for: where OpenCL's device is this same CPU (PoCL), the cpu
 * backend decodes every weight type faster, and prefills within 7% either
 * way (make bench's llamabench section, docs/benchmarks.md). A llama2.c
 * checkpoint keeps OpenCL, the engine's reference path with device op
 * times, as before. */
static const char *auto_backend(const Engine *e, const EngineOptions *opt)
{
	const BackendOptions *b = &opt->backend_opt;

	if (!e->model.gguf || b->cl_platform >= 0 || b->cl_device >= 0)
		return "opencl";
	return backend_opencl_has_gpu() ? "opencl" : "cpu";
}

static int open_backend(Engine *e, const EngineOptions *opt, InferError *err)
{
	BackendOptions bopt = opt->backend_opt;
	const char *name = opt->backend && strcmp(opt->backend, "auto") ? opt->backend
									 : auto_backend(e, opt);

	e->ops = backend_find(name);
	if (!e->ops)
		return infer_fail(err, "unknown backend '%s' (cpu, opencl or auto)",
				  opt->backend ? opt->backend : "");
	bopt.kv_type = e->kv_type = resolve_kv_type(&e->model, bopt.kv_type);
	e->kv_bytes_per_pos = backend_kv_pos_bytes(&e->model.config, e->kv_type);
	return e->ops->create(&e->model, &bopt, &e->backend, err);
}

static void note_run(const Engine *e, enum kv_type kv)
{
	const Config *c = &e->model.config;
	int shape[7] = { c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads,
			 c->vocab_size, c->seq_len };

	trace_stats_set_run(e->ops->name, shape, backend_kv_type_name(kv));
}

static int open_parts(Engine *e, const EngineOptions *opt, InferError *err)
{
	const Config *c;

	memset(e, 0, sizeof(*e));
	if (model_load(&e->model, opt->model_path, err) < 0)
		return -1;
	c = &e->model.config;
	e->steps = opt->steps <= 0 || opt->steps > c->seq_len ? c->seq_len : opt->steps;
	if (open_tokenizer(e, opt->tokenizer_path, opt->model_path, err) < 0 ||
	    resolve_chat(e, opt->chat_template, err) < 0 ||
	    sampler_init(&e->sampler, c->vocab_size, opt->temperature, opt->topp,
			 opt->seed, err) < 0)
		goto fail;
	e->logits = pool_alloc(POOL_ACTIVATIONS, (size_t)c->vocab_size * sizeof(float));
	if (!e->logits) {
		infer_fail(err, "out of memory for logits");
		goto fail;
	}
	if (open_backend(e, opt, err) < 0)
		goto fail;
	note_run(e, e->kv_type);
	return 0;
fail:
	engine_close(e);
	return -1;
}

/* The whole of it is one model_load span (the backend's pack inside), so
 * that a profile charges the load's work, OpenMP's included, to it. */
int engine_open(Engine *e, const EngineOptions *opt, InferError *err)
{
	int rc;

	trace_span_begin(SPAN_MODEL_LOAD, LAYER_NONE);
	rc = open_parts(e, opt, err);
	trace_span_end(SPAN_MODEL_LOAD, LAYER_NONE);
	return rc;
}

void engine_close(Engine *e)
{
	trace_span_begin(SPAN_UNLOAD, LAYER_NONE);
	if (e->backend)
		e->ops->destroy(e->backend);
	pool_free(POOL_ACTIVATIONS, e->logits,
		  (size_t)e->model.config.vocab_size * sizeof(float));
	if (e->sampler.probindex)
		sampler_free(&e->sampler);
	if (e->have_tokenizer)
		tokenizer_free(&e->tokenizer);
	model_free(&e->model);
	memset(e, 0, sizeof(*e));
	trace_span_end(SPAN_UNLOAD, LAYER_NONE);
}

static int prompt_alloc(EnginePrompt *p, size_t capacity, InferError *err)
{
	p->n = 0;
	p->bytes = capacity * sizeof(int);
	p->ids = pool_alloc(POOL_ACTIVATIONS, p->bytes);
	if (!p->ids)
		return infer_fail(err, "out of memory for a %zu-token prompt", capacity);
	return 0;
}

int engine_prompt_bos(EnginePrompt *p, InferError *err)
{
	if (prompt_alloc(p, 1, err) < 0)
		return -1;
	p->ids[p->n++] = TOKEN_BOS;
	return 0;
}

int engine_encode(Engine *e, const char *text, EnginePrompt *p, InferError *err)
{
	int vocab = e->model.config.vocab_size;

	memset(p, 0, sizeof(*p));
	if (!e->have_tokenizer)
		return infer_fail(err, "a text prompt needs a tokenizer (-z)");
	/* BOS, and per piece between special tokens a dummy prefix and at most
	 * one id per byte */
	if (prompt_alloc(p, 2 * strlen(text) + 3, err) < 0)
		return -1;
	if (tokenizer_encode_special(&e->tokenizer, text, 1, p->ids, &p->n, err) < 0)
		goto fail;
	for (int i = 0; i < p->n; i++)
		if (p->ids[i] >= vocab) {
			infer_fail(err, "prompt token %d (id %d) is outside the model's vocabulary "
				   "of %d: the tokenizer does not fit this model", i, p->ids[i], vocab);
			goto fail;
		}
	return 0;
fail:
	engine_prompt_free(p);
	return -1;
}

void engine_prompt_free(EnginePrompt *p)
{
	pool_free(POOL_ACTIVATIONS, p->ids, p->bytes);
	memset(p, 0, sizeof(*p));
}

/* One backend call inside the forward span, then the kv occupancy. */
static int forward(Engine *e, const int *tokens, int n, int pos, InferError *err)
{
	int rc;

	trace_span_begin(SPAN_FORWARD, LAYER_NONE);
	rc = e->ops->forward(e->backend, tokens, n, pos, e->logits, err);
	trace_span_end(SPAN_FORWARD, LAYER_NONE);
	if (rc == 0)
		trace_kv_usage((uint64_t)(pos + n) * e->kv_bytes_per_pos,
			       (uint64_t)e->model.config.seq_len * e->kv_bytes_per_pos);
	return rc;
}

static int sample(Engine *e)
{
	int next;

	trace_span_begin(SPAN_SAMPLE, LAYER_NONE);
	next = sampler_sample(&e->sampler, e->logits);
	trace_span_end(SPAN_SAMPLE, LAYER_NONE);
	return next;
}

/* The whole prompt in as few forward calls as the backend's batch allows. */
static int prefill(Engine *e, const EnginePrompt *p, InferError *err)
{
	int max_batch = backend_max_batch(e->ops, e->backend);

	for (int pos = 0; pos < p->n; pos += max_batch) {
		int n = p->n - pos < max_batch ? p->n - pos : max_batch;

		if (forward(e, p->ids + pos, n, pos, err) < 0)
			return -1;
	}
	return 0;
}

/* Produces the token for position pos+1 from the logits of position pos:
 * the first comes from the prefill, the rest from one-token forwards. */
static int next_token(Engine *e, const EnginePrompt *p, int pos, int token_in,
		      int *next, InferError *err)
{
	int rc = pos == p->n - 1 ? prefill(e, p, err) : forward(e, &token_in, 1, pos, err);

	if (rc == 0)
		*next = sample(e);
	return rc;
}

int engine_generate(Engine *e, uint64_t req, const EnginePrompt *p,
		    EngineTokenFn fn, void *ctx, int *generated, InferError *err)
{
	int token, rc = 0, count = 0;

	*generated = 0;
	if (p->n < 1)
		return infer_fail(err, "empty prompt (it needs at least BOS)");
	if (p->n > e->steps)
		return infer_fail(err, "prompt has %d tokens but only %d positions are allowed "
				  "(steps %d, seq_len %d)", p->n, e->steps, e->steps,
				  e->model.config.seq_len);
	trace_request_begin(req, (uint32_t)p->n);
	token = p->ids[p->n - 1];
	for (int pos = p->n - 1; pos < e->steps; pos++) {
		int next = -1;

		trace_token_begin(req, (uint32_t)pos, (uint32_t)token);
		rc = next_token(e, p, pos, token, &next, err);
		trace_token_end(req, (uint32_t)pos, (uint32_t)next);
		if (rc < 0)
			break;
		count++;
		if (next == TOKEN_BOS || (fn && fn(ctx, token, next)))
			break;
		token = next;
	}
	trace_request_end(req, (uint32_t)count);
	*generated = count;
	return rc;
}
