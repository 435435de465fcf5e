/* fwdbench.c - times a backend's forward calls, and PoCL's launch cost.
 *
 * usage: fwdbench MODEL BACKEND [PREFILL_TOKENS [DECODE_TOKENS]]
 *        fwdbench --launch
 * The first form warms up (kernels compile on first use), then prints
 *   prefill_tok_s X decode_tok_s Y
 * where prefill runs PREFILL_TOKENS (default 64) at position 0 in batches of
 * the backend's max_batch (median of 9 runs) and decode runs DECODE_TOKENS
 * (default 128) one-token forwards at positions PREFILL_TOKENS.. (total time),
 * with the KV cache type the engine would pick for the model.
 * The second enqueues an empty kernel 1000 times and prints the per-launch
 * cost with one sync at the end, and with a sync after every launch.
 * Used by bench_engine.sh; timings are CLOCK_MONOTONIC. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "model/model.h"
#include "base/trace.h"

#define PREFILL_RUNS 9
#define LAUNCHES 1000

static int parse_count(const char *s, int max, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (end == s || *end || v < 1 || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* count tokens from pos in batches of at most max_batch */
static int run_tokens(const BackendOps *ops, void *st, const int *tok, int count,
		      int pos, float *logits, InferError *err)
{
	int max_batch = backend_max_batch(ops, st);

	for (int done = 0; done < count;) {
		int n = count - done < max_batch ? count - done : max_batch;
		if (ops->forward(st, tok + done, n, pos + done, logits, err))
			return -1;
		done += n;
	}
	return 0;
}

static int bench_model(const char *path, const char *backend, int prefill, int decode)
{
	Model m;
	InferError err = { "" };
	BackendOptions opt = { .cl_platform = -1, .cl_device = -1 };
	const BackendOps *ops = backend_find(backend);
	void *st = NULL;
	float *logits = NULL;
	int *tok = NULL, rc = 1;
	uint64_t runs[PREFILL_RUNS], t0;

	if (!ops) {
		fprintf(stderr, "fwdbench: unknown backend %s\n", backend);
		return 2;
	}
	if (model_load(&m, path, &err)) {
		fprintf(stderr, "fwdbench: %s\n", err.msg);
		return 1;
	}
	if (prefill + decode > m.config.seq_len) {
		fprintf(stderr, "fwdbench: %d + %d tokens exceed seq_len %d\n", prefill, decode,
			m.config.seq_len);
		goto out;
	}
	/* the cache the engine picks (engine.c): f32 beside F32 layers, else
	 * f16, as llama.cpp keeps it */
	opt.kv_type = model_layers_have(&m, WEIGHT_F32) ? KV_F32 : KV_F16;
	if (ops->create(&m, &opt, &st, &err)) {
		fprintf(stderr, "fwdbench: %s\n", err.msg);
		goto out;
	}
	logits = malloc(m.config.vocab_size * sizeof(float));
	tok = malloc((prefill + decode) * sizeof(int));
	if (!logits || !tok) {
		fprintf(stderr, "fwdbench: out of memory\n");
		goto out;
	}
	for (int i = 0; i < prefill + decode; i++)
		tok[i] = (int)((i * 7919u + 13) % (unsigned)m.config.vocab_size);
	/* warm-up: every kernel and local size once */
	if (run_tokens(ops, st, tok, prefill, 0, logits, &err) ||
	    run_tokens(ops, st, tok, 1, prefill, logits, &err))
		goto fail;
	for (int r = 0; r < PREFILL_RUNS; r++) {
		t0 = trace_now_ns();
		if (run_tokens(ops, st, tok, prefill, 0, logits, &err))
			goto fail;
		runs[r] = trace_now_ns() - t0;
	}
	qsort(runs, PREFILL_RUNS, sizeof(runs[0]), cmp_u64);
	t0 = trace_now_ns();
	for (int i = 0; i < decode; i++)
		if (ops->forward(st, tok + prefill + i, 1, prefill + i, logits, &err))
			goto fail;
	uint64_t decode_ns = trace_now_ns() - t0;
	printf("prefill_tok_s %.1f decode_tok_s %.1f\n",
	       prefill * 1e9 / (double)runs[PREFILL_RUNS / 2], decode * 1e9 / (double)decode_ns);
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "fwdbench: %s\n", err.msg);
out:
	free(logits);
	free(tok);
	if (st)
		ops->destroy(st);
	model_free(&m);
	return rc;
}

static int bench_launch(void)
{
	const char *src = "__kernel void empty(__global float *x) { }";
	cl_platform_id plat;
	cl_device_id dev;
	cl_int rc;
	size_t global = 1, local = 1;

	if (clGetPlatformIDs(1, &plat, NULL) != CL_SUCCESS ||
	    clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) {
		fprintf(stderr, "fwdbench: no OpenCL platform found\n");
		return 1;
	}
	cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &rc);
	cl_command_queue q = ctx ? clCreateCommandQueue(ctx, dev, 0, &rc) : NULL;
	cl_program prog = q ? clCreateProgramWithSource(ctx, 1, &src, NULL, &rc) : NULL;
	if (!prog || clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS) {
		fprintf(stderr, "fwdbench: cannot build the empty kernel (CL error %d)\n", (int)rc);
		return 1;
	}
	cl_kernel k = clCreateKernel(prog, "empty", &rc);
	cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &rc);
	if (!k || !buf || clSetKernelArg(k, 0, sizeof(buf), &buf) != CL_SUCCESS) {
		fprintf(stderr, "fwdbench: kernel setup failed (CL error %d)\n", (int)rc);
		return 1;
	}
	double per[2];
	for (int sync_each = 0; sync_each < 2; sync_each++) {
		for (int warm = 0; warm < 2; warm++) {
			uint64_t t0 = trace_now_ns();
			for (int i = 0; i < LAUNCHES; i++) {
				clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL);
				if (sync_each)
					clFinish(q);
			}
			clFinish(q);
			per[sync_each] = (trace_now_ns() - t0) / 1e3 / LAUNCHES;
		}
	}
	printf("launch_us %.2f launch_sync_us %.2f\n", per[0], per[1]);
	clReleaseMemObject(buf);
	clReleaseKernel(k);
	clReleaseProgram(prog);
	clReleaseCommandQueue(q);
	clReleaseContext(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	int prefill = 64, decode = 128;

	if (argc == 2 && !strcmp(argv[1], "--launch"))
		return bench_launch();
	if (argc < 3 || argc > 5 || (argc > 3 && parse_count(argv[3], 1 << 20, &prefill)) ||
	    (argc > 4 && parse_count(argv[4], 1 << 20, &decode))) {
		fprintf(stderr, "usage: fwdbench MODEL BACKEND [PREFILL_TOKENS [DECODE_TOKENS]]\n"
				"       fwdbench --launch\n");
		return 2;
	}
	return bench_model(argv[1], argv[2], prefill, decode);
}
