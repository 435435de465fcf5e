/* test_batch_invariance.c - a sequence's logits do not depend on what it is
 * batched with (backend.h): sequence A alone, then A in the middle of a
 * batch with other sequences (other positions, other blocks of the paged
 * cache), prefilled whole or in chunks, then decoded alone or beside others:
 * A's logits must be bit-identical every time, on the cpu backend and, when
 * there is a device, on opencl. Uses stories260K. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include "backend/backend.h"
#include "check.h"
#include "model/model.h"

const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
	return "use_tls=0"; /* as test_cl_vs_cpu: PoCL's TLS trips LSan's scan */
}

#define BS 4
static const int a_tok[] = { 1, 461, 401, 401, 378, 455, 473 };
static const int b_tok[] = { 1, 13, 299, 362, 409, 283, 264, 283, 452 };
static const int c_tok[] = { 1, 288 };
/* block tables: A and the others share no block; A's are out of order */
static const int a_blk[] = { 7, 2 }, b_blk[] = { 0, 5, 9 }, c_blk[] = { 11 };

typedef struct {
	const BackendOps *ops;
	void *st;
	float *logits; /* (3, vocab) */
	int vocab;
} Rig;

/* opencl: one kernel per forward, or one per phase */
static enum cl_launch launch_mode;

/* OpenCL platforms this machine has (0: none, or no ICD loader). */
static cl_uint opencl_platforms(void)
{
	cl_uint n = 0;

	return clGetPlatformIDs(0, NULL, &n) == CL_SUCCESS ? n : 0;
}

static int rig_open(Rig *r, const BackendOps *ops, const Model *m)
{
	BackendOptions o = { .cl_platform = -1, .cl_device = -1, .kv_blocks = 16,
			     .kv_block_size = BS, .max_seqs = 3, .cl_launch = launch_mode };
	InferError err;

	r->ops = ops;
	r->vocab = m->config.vocab_size;
	r->logits = calloc(3 * (size_t)r->vocab, sizeof(float));
	if (!r->logits || ops->create(m, &o, &r->st, &err) < 0) {
		printf("%s: %s\n", ops->name, err.msg);
		free(r->logits);
		return -1;
	}
	return 0;
}

static void rig_close(Rig *r)
{
	r->ops->destroy(r->st);
	free(r->logits);
}

static int run(Rig *r, const BatchSeq *q, int n)
{
	InferError err;

	if (r->ops->forward_batch(r->st, q, n, r->logits, &err) < 0) {
		CHECK(0, "%s: forward_batch: %s", r->ops->name, err.msg);   /* a failed forward fails */
		return -1;
	}
	return 0;
}

#define SEQ(tok, from, n, blk, want) (BatchSeq){ (tok) + (from), (n), (from), (blk), (want) }

/* A's logits after its 6-token prefill, and after decoding its 7th token. */
static int a_alone(Rig *r, float *pre, float *dec)
{
	if (run(r, &SEQ(a_tok, 0, 6, a_blk, 1), 1))
		return -1;
	memcpy(pre, r->logits, (size_t)r->vocab * sizeof(float));
	if (run(r, &SEQ(a_tok, 6, 1, a_blk, 1), 1))
		return -1;
	memcpy(dec, r->logits, (size_t)r->vocab * sizeof(float));
	return 0;
}

/* The same with company: B prefilling around A in one batch, A chunked,
 * then A decoding between B's and C's work. A's row is the 2nd (or 1st). */
static void a_batched(Rig *r, const float *pre, const float *dec)
{
	size_t row = (size_t)r->vocab * sizeof(float);
	BatchSeq s1[] = { SEQ(b_tok, 0, 5, b_blk, 1), SEQ(a_tok, 0, 3, a_blk, 0),
			  SEQ(c_tok, 0, 2, c_blk, 1) };
	BatchSeq s2[] = { SEQ(b_tok, 5, 3, b_blk, 0), SEQ(a_tok, 3, 3, a_blk, 1) };
	BatchSeq s3[] = { SEQ(b_tok, 8, 1, b_blk, 1), SEQ(a_tok, 6, 1, a_blk, 1),
			  SEQ(c_tok, 1, 1, c_blk, 1) };

	if (run(r, s1, 3) || run(r, s2, 2))
		return;
	CHECK(memcmp(r->logits, pre, row) == 0,
	      "%s: A's prefill logits changed when chunked and batched", r->ops->name);
	if (run(r, s3, 3))
		return;
	CHECK(memcmp(r->logits + r->vocab, dec, row) == 0,
	      "%s: A's decode logits changed in a batch of three", r->ops->name);
}

/* Checks ops for batch invariance; with ref non-NULL, A's decode logits
 * must also equal ref bit for bit. Returns A's decode logits (or NULL). */
static float *test_backend(const BackendOps *ops, const Model *m, const char *label,
			   const float *ref)
{
	Rig r;
	float *pre = calloc((size_t)m->config.vocab_size, sizeof(float));
	float *dec = calloc((size_t)m->config.vocab_size, sizeof(float));

	if (!pre || !dec || rig_open(&r, ops, m) < 0) {
		/* OpenCL may be absent (no platform at all); where it is, it must open */
		CHECK(ops == &backend_opencl && !opencl_platforms(), "%s backend would not open", label);
		free(pre);
		free(dec);
		return NULL;
	}
	if (a_alone(&r, pre, dec) < 0) {
		rig_close(&r);
		free(pre);
		free(dec);
		return NULL;   /* run() failed the test; no zeroed logits to compare */
	}
	rig_close(&r);
	if (rig_open(&r, ops, m) == 0) { /* a fresh cache: nothing left over */
		a_batched(&r, pre, dec);
		rig_close(&r);
	} else {
		CHECK(0, "%s backend would not open a second time", label);
	}
	printf("%s: batch invariance checked\n", label);
	if (ref)
		CHECK(memcmp(ref, dec, (size_t)m->config.vocab_size * sizeof(float)) == 0,
		      "%s: decode logits differ from the other launch mode's", label);
	free(pre);
	return dec;
}

/* ---- long prompts: attention's groups of 16 queries and 16 positions ----
 * stories260K's heads are 8 wide, and its prompts above are shorter than a
 * group of positions, so the cpu backend's grouped attention (a run of
 * one sequence's queries at once, an f16 cache converted once) needs a
 * model of its own: heads 32 wide, two kv heads for four (GQA), and a
 * 100-token prompt, fed token by token and then in chunks. */
#define LONG_SHAPE "128,256,2,4,2,64,160"
#define LONG_N 100
#define LONG_VOCAB 64

/* A's logits after each of its positions, one token a forward. */
static int long_reference(Rig *r, const int *tok, const int *blk, float *ref)
{
	for (int p = 0; p < LONG_N; p++) {
		if (run(r, &SEQ(tok, p, 1, blk, 1), 1))
			return -1;
		memcpy(ref + (size_t)p * LONG_VOCAB, r->logits, LONG_VOCAB * sizeof(float));
	}
	return 0;
}

/* A prefilled in chunks of the given sizes (0-terminated), alone or with
 * B's same chunk beside it in the batch (paged layouts): the logits at
 * each chunk's end must be the token-by-token ones. */
static void long_chunks(const BackendOptions *o, const Model *m, const int *chunks,
			const int *tok, const int *blk, const int *btok, const int *bblk,
			const float *ref, const char *label)
{
	Rig r;
	InferError err;
	int from = 0;

	r.ops = &backend_cpu;
	r.vocab = LONG_VOCAB;
	r.logits = calloc(2 * LONG_VOCAB, sizeof(float));
	if (!r.logits || backend_cpu.create(m, o, &r.st, &err) < 0) {
		CHECK(0, "%s: cpu backend would not open", label);
		free(r.logits);
		return;
	}
	for (const int *c = chunks; *c && from < LONG_N; from += *c++) {
		BatchSeq q[2] = { SEQ(tok, from, *c, blk, 1), SEQ(btok, from, *c, bblk, 1) };
		int with_b = bblk != NULL && *c <= 32; /* two chunks fit one batch */

		if (run(&r, q, 1 + with_b))
			break;
		CHECK(memcmp(r.logits, ref + (size_t)(from + *c - 1) * LONG_VOCAB,
			     LONG_VOCAB * sizeof(float)) == 0,
		      "%s: logits after a %d-token chunk at %d%s differ from token-by-token",
		      label, *c, from, with_b ? " beside another sequence" : "");
	}
	backend_cpu.destroy(r.st);
	free(r.logits);
}

/* Each layout (one block; even paged blocks; odd ones) and cache type. */
static void test_long_prompts(const Model *m)
{
	static const int chunks[][5] = { { 64, 36 }, { 37, 27, 36 }, { 1, 16, 47, 36 }, { 30, 30, 30, 10 } };
	struct { int blocks, bs; const char *name; } layouts[] = {
		{ 0, 0, "one block" }, { 20, 16, "16-position blocks" }, { 40, 7, "7-position blocks" }
	};
	int tok[LONG_N], btok[LONG_N], blk[32], bblk[32];
	float *ref = calloc((size_t)LONG_N * LONG_VOCAB, sizeof(float));

	for (int i = 0; i < LONG_N; i++)
		tok[i] = (i * 37 + 11) % LONG_VOCAB, btok[i] = (i * 13 + 5) % LONG_VOCAB;
	for (int i = 0; i < 32; i++) /* A's blocks out of order; B's the others */
		blk[i] = (i * 2 + 1) % 40, bblk[i] = (i * 2) % 40;
	for (int k = 0; ref && k < 2; k++) {
		for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
			BackendOptions o = { .cl_platform = -1, .cl_device = -1,
					     .kv_blocks = layouts[l].blocks, .kv_block_size = layouts[l].bs,
					     .max_seqs = 2, .kv_type = k ? KV_F16 : KV_F32 };
			const int *a_blocks = layouts[l].blocks ? blk : (const int[]){ 0 };
			char label[96];
			Rig r = { &backend_cpu, NULL, NULL, LONG_VOCAB };
			InferError err;

			snprintf(label, sizeof(label), "cpu, %s cache, %s", k ? "f16" : "f32",
				 layouts[l].name);
			r.logits = calloc(2 * LONG_VOCAB, sizeof(float));
			if (!r.logits || backend_cpu.create(m, &o, &r.st, &err) < 0) {
				CHECK(0, "%s: cpu backend would not open", label);
				free(r.logits);
				continue;
			}
			int rc = long_reference(&r, tok, a_blocks, ref);

			backend_cpu.destroy(r.st);
			free(r.logits);
			if (rc)
				continue;
			for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++)
				long_chunks(&o, m, chunks[c], tok, a_blocks, btok,
					    layouts[l].blocks ? bblk : NULL, ref, label);
			printf("%s: long prompts checked\n", label);
		}
	}
	free(ref);
}

/* The long-prompt model, made by mkmodel into a temporary file. */
static int load_long_model(Model *m)
{
	char dir[] = "/tmp/test_batch_invXXXXXX", cmd[8192], path[64];
	InferError err;
	int rc;

	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/long.bin", dir);
	snprintf(cmd, sizeof(cmd), "'%s/mkmodel' '%s' --shape " LONG_SHAPE " --seed 5 >/dev/null",
		 getenv("BUILD") ? getenv("BUILD") : "build", path);
	rc = system(cmd) == 0 ? model_load(m, path, &err) : -1;
	unlink(path);
	rmdir(dir);
	return rc;
}

int main(void)
{
	Model long_model;
	const char *models = getenv("MODELS");
	char path[4096];
	Model m;
	InferError err;

	snprintf(path, sizeof(path), "%s/stories260K.bin",
		 models ? models : "../shared/models");
	if (model_load(&m, path, &err) < 0) {
		snprintf(path, sizeof(path), "%s/../shared/models/stories260K.bin",
			 getenv("ROOT") ? getenv("ROOT") : ".");
		if (model_load(&m, path, &err) < 0) {
			printf("skip: no stories260K.bin beside the project\n");
			return 77;
		}
	}
	free(test_backend(&backend_cpu, &m, "cpu", NULL));
	CHECK(load_long_model(&long_model) == 0, "mkmodel --shape " LONG_SHAPE " did not load");
	if (!failures) {
		test_long_prompts(&long_model);
		model_free(&long_model);
	}
	launch_mode = CL_LAUNCH_FORWARD;
	float *fwd = test_backend(&backend_opencl, &m, "opencl (one kernel a forward)", NULL);
	launch_mode = CL_LAUNCH_PHASES;
	free(test_backend(&backend_opencl, &m, "opencl (a kernel a phase)", fwd));
	free(fwd);
	model_free(&m);
	return check_report();
}
