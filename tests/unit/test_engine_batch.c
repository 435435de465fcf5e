/* test_engine_batch.c - a batched (prefill) forward must give bit-identical
 * logits to feeding the same tokens one at a time, and the sampler must
 * follow run.c's rules. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "engine/sampler.h"

static int failures;

#define CHECK(cond, ...) do { if (!(cond)) { failures++; \
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* Logits after tokens[0..n) fed as one batch, or one per call. */
static int run(const Model *m, const int *tokens, int n, int batched, float *logits)
{
	void *st;
	InferError err;
	int rc = 0;

	if (backend_cpu.create(m, &(BackendOptions){ .cl_platform = -1, .cl_device = -1 }, &st, &err) < 0) {
		fprintf(stderr, "create: %s\n", err.msg);
		return -1;
	}
	if (batched)
		rc = backend_cpu.forward(st, tokens, n, 0, logits, &err);
	for (int i = 0; !batched && rc == 0 && i < n; i++)
		rc = backend_cpu.forward(st, tokens + i, 1, i, logits, &err);
	if (rc < 0)
		fprintf(stderr, "forward: %s\n", err.msg);
	backend_cpu.destroy(st);
	return rc;
}

static void test_batch(const Model *m)
{
	int tokens[] = { 1, 461, 461, 401, 401, 401, 461, 378, 455, 473, 456 };
	int n = sizeof(tokens) / sizeof(tokens[0]);
	int vocab = m->config.vocab_size;
	float *a = calloc((size_t)vocab, sizeof(float)), *b = calloc((size_t)vocab, sizeof(float));
	void *st;
	InferError err;

	CHECK(a && b, "oom");
	if (!a || !b)
		goto out;
	CHECK(run(m, tokens, n, 1, a) == 0 && run(m, tokens, n, 0, b) == 0, "forward failed");
	CHECK(memcmp(a, b, (size_t)vocab * sizeof(float)) == 0,
	      "batched logits differ from one-at-a-time logits");
	/* out-of-range positions and ids are refused, not read */
	CHECK(backend_cpu.create(m, &(BackendOptions){ .cl_platform = -1, .cl_device = -1 }, &st, &err) == 0, "create");
	CHECK(backend_cpu.forward(st, tokens, 1, m->config.seq_len, a, &err) < 0, "pos past seq_len");
	CHECK(backend_cpu.forward(st, (int[]){ vocab }, 1, 0, a, &err) < 0, "id >= vocab accepted");
	CHECK(backend_cpu.forward(st, tokens, backend_cpu.max_batch + 1, 0, a, &err) < 0,
	      "batch over max_batch accepted");
	backend_cpu.destroy(st);
out:
	free(a);
	free(b);
}

static void test_sampler(void)
{
	Sampler s;
	InferError err;
	uint64_t state = 42;
	float greedy[] = { 0.5f, 2.0f, 2.0f, -1.0f };
	/* one dominant token: top-p 0.5 must always pick it */
	float peaked[4];
	int counts[4] = { 0 };

	/* run.c's xorshift: the first draw from seed 42 (computed independently in Python) */
	CHECK(sampler_random_u32(&state) == 1456360119u, "xorshift drifted");
	CHECK(sampler_init(&s, 4, 0.0f, 0.9f, 1, &err) == 0, "init");
	CHECK(sampler_sample(&s, greedy) == 1, "argmax must take the first maximum");
	sampler_free(&s);

	CHECK(sampler_init(&s, 4, 1.0f, 0.5f, 7, &err) == 0, "init");
	for (int i = 0; i < 200; i++) {
		memcpy(peaked, (float[]){ 0.0f, 5.0f, 0.0f, 0.0f }, sizeof(peaked));
		counts[sampler_sample(&s, peaked)]++;
	}
	CHECK(counts[1] == 200, "top-p 0.5 left the nucleus: %d %d %d %d",
	      counts[0], counts[1], counts[2], counts[3]);
	sampler_free(&s);

	/* full distribution: uniform logits spread over all tokens */
	memset(counts, 0, sizeof(counts));
	CHECK(sampler_init(&s, 4, 1.0f, 1.0f, 7, &err) == 0, "init");
	for (int i = 0; i < 4000; i++) {
		float flat[4] = { 0 };

		counts[sampler_sample(&s, flat)]++;
	}
	for (int i = 0; i < 4; i++)
		CHECK(counts[i] > 800 && counts[i] < 1200, "token %d drawn %d/4000", i, counts[i]);
	sampler_free(&s);
}

int main(void)
{
	const char *models = getenv("MODELS");
	char path[4096];
	Model m;
	InferError err;

	test_sampler();
	if (models)
		snprintf(path, sizeof(path), "%s/stories260K.bin", models);
	else
		snprintf(path, sizeof(path), "%s/../shared/models/stories260K.bin",
			 getenv("ROOT") ? getenv("ROOT") : ".");
	if (model_load(&m, path, &err) < 0) {
		printf("%s\n", err.msg);
		printf("skip: no stories260K.bin beside the project\n");
		return failures ? 1 : 77;
	}
	test_batch(&m);
	model_free(&m);
	printf("%s\n", failures ? "batch: FAILED" : "batch: ok");
	return failures ? 1 : 0;
}
