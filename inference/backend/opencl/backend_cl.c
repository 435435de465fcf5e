/* backend_cl.c - the OpenCL forward pass.
 *
 * Weights are uploaded once, all into one buffer; the key/value cache and
 * every activation stay on the device. One forward enqueues a write of the
 * batch's per-token metadata and its kernels on one in-order queue without
 * blocking, and syncs exactly once: the blocking read of the logits. The
 * KV cache is a pool of blocks per layer (see kvcache.h); attention reads
 * each sequence's positions through its block table.
 *
 * Two ways to launch (enum cl_launch), chosen per forward:
 * - forward (the default on CPU devices while no tracer wants op detail):
 *   the `forward` kernel runs the whole pass in one launch, its work-groups
 *   taking each phase's tasks from shared counters (10_forward.cl). Each
 *   launch on PoCL wakes its worker threads: 33 launches a token cost more
 *   than the phases' work. A model whose embedding or classifier has
 *   another type than its layers runs the kernel for the layers only,
 *   between the embed and logits kernels of those types' programs (the
 *   span_launch `layers`: three launches).
 * - phases (the default elsewhere, and on CPU devices for every forward
 *   while op_begin is attached): 5 kernels per layer plus embed and
 *   logits, each phase fused so launches stay few:
 *   qkv_rope   = attn rmsnorm + q/k/v projection + RoPE + kv-cache store
 *   attention  = scores + softmax + weighted values
 *   matmul_add = wo (or w2) projection + residual add
 *   ffn_up     = ffn rmsnorm + w1/w3 projection + SwiGLU
 *   logits     = final rmsnorm + classifier (last token only)
 * Both run the same per-task code, so their results are bit-identical.
 * The kernels are built for one matrix type (WTYPE); a model whose
 * embedding or classifier has another type than its layers (llama.cpp's
 * Q4_0 files keep token_embd in Q8_0) gets a program per type, embed and
 * logits from theirs.
 *
 * Spans: on this backend an op span times the host's enqueue of the
 * kernels it launches; their device times come from the kernel records,
 * which the tracer joins to the spans (cl_kernel_span_kind). The host's
 * one wait for the device is a span of its own, sync. Only spans that
 * launch something are fired: a forward launch is forward{sync} and one
 * kernel; phases are forward{embed, layer{qkv, attention, attn_out, ffn},
 * logits, sync}, the norms and RoPE inside the kernels of their phase; a
 * layers launch is forward{embed, logits, sync} and three kernels.
 * The forward's span_end says which (trace_forward_launch). */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <limits.h>
#include <unistd.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "backend/opencl/cl_layout.h"
#include "format/gguf.h"
#include "backend/panels.h"
#include "base/pool.h"
#include "base/trace.h"

extern const char infer_cl_source[];

/* The prefill batch limit: staged token blocks live in local memory, so a
 * wide model on a device with little of it gets fewer (s->max_batch). */
#define CL_MAX_BATCH 64
/* Work-items per group of the matrix kernels, each a 16-row panel
 * (backend/panels.h): 64 rows a group, as many as the 4-row items had when
 * 16 of them read memory fastest among 1..64 on PoCL's CPU device. */
#define MAT_LOCAL 4
/* With more than one token on a CPU device, each group's staging (all its
 * tokens normed and quantized again) costs as much as its products: groups
 * of 16 items ran an 8-token 65,536 x 768 Q8_0 product at 67-70 GMAC/s
 * against 33-48 with 4 (PoCL on a Zen 3, best of 19 launches), and 8 served
 * streams of the stories110M shape as Q4_0 with a Q8_0 embedding (phases
 * launches) 1.27x faster. Small matrices keep GROUPS_MIN_BATCH groups for
 * the two threads to share. */
#define MAT_LOCAL_BATCH 16
#define EMBED_LOCAL 16 /* work-items of the embed kernel's groups: a column each */

enum cl_fn { FN_EMBED, FN_QKV, FN_ATTENTION, FN_MATMUL_ADD, FN_FFN_UP,
	     FN_LOGITS, FN_FORWARD, FN_COUNT };
static const char *const cl_fn_names[FN_COUNT] = {
	"embed", "qkv_rope", "attention", "matmul_add", "ffn_up", "logits", "forward",
};



/* A layer's parts of the weights and KV buffers, for the phase kernels. */
typedef struct {
	cl_mem rms_att, wqkv, wo, rms_ffn, w13, w2, kcache, vcache;
} ClLayer;

typedef struct {
	cl_mem mem;
	size_t bytes;
	enum pool_id pool;
} ClBuffer;

/* Offsets (in ints) of the per-token metadata in the meta buffer. */
enum { META_TOKENS = 0, META_POS = CL_MAX_BATCH, META_SLOT = 2 * CL_MAX_BATCH,
       META_TAB = 3 * CL_MAX_BATCH, META_OUT = 4 * CL_MAX_BATCH };

typedef struct {
	const Config *c;
	int n_blocks, block_size;
	int max_out;    /* sequences wanting logits per call */
	int max_batch;  /* tokens per call: CL_MAX_BATCH, or what local memory holds */
	int tab_cap;    /* block table entries one call can carry */
	int *host_meta; /* (META_OUT + max_out + tab_cap) ints, the staging copy of meta */
	int meta_ints;
	cl_context ctx;
	cl_command_queue queue;
	cl_program prog, prog_emb, prog_cls; /* built for wtype, emb_type, cls_type; one if equal */
	cl_kernel fn[FN_COUNT];
	ClBuffer *bufs; /* every buffer allocated, for pool_note_free */
	int nbufs, cap_bufs;
	cl_mem *subs;   /* sub-buffers of those, released first */
	int nsubs, cap_subs;
	size_t align;   /* floats: sub-buffers start at multiples of it */
	/* All weights in one buffer, each at woff (floats; cl_layout.h), and
	 * the KV cache in one buffer per side, layer l at l * kv_stride
	 * (elements of kv_elem bytes). */
	cl_mem weights, woff_mem, kcache, vcache;
	cl_ulong *woff;
	size_t weight_floats, kv_stride;
	ClLayer *layers; /* phases mode only */
	cl_mem emb, rms_final, wcls; /* phases and layers launches only */
	cl_mem rope;
	cl_mem meta, x, q, att_out, hb, logits;
	/* How this forward launches: the forward kernel on `groups` work-groups
	 * for the whole pass (LAUNCH_FORWARD) or for its layers (LAUNCH_LAYERS),
	 * or a kernel a phase. Chosen per forward from `want` (forward_launch). */
	enum span_launch launch;
	int cpu_device;
	enum cl_launch want;
	cl_uint groups;
	cl_mem sync;
	/* Per-forward kernel records, used when kernel timings are wanted. */
	int profiling, nevents, max_events;
	cl_event *events;
	struct cl_kernel_record *recs;
	/* The layers' matrices' type (model_layer_type), the embedding's and
	 * the classifier's: each is the WTYPE of the program whose kernels
	 * read it. one_type: all three are one, so the forward kernel, built
	 * for one, may run the whole pass; else it runs the layers. */
	WeightType wtype, emb_type, cls_type;
	int one_type;
	enum kv_type kv_type; /* the cache's element (KV_HALF in the kernels) */
	size_t kv_elem;       /* its bytes */
} ClState;

static int cl_fail(InferError *err, const char *what, cl_int code)
{
	return infer_fail(err, "opencl: %s failed (CL error %d)", what, (int)code);
}

static size_t round_up(size_t v, size_t m)
{
	return (v + m - 1) / m * m;
}

/* ---- device and program ---- */

/* PoCL keeps its compiled kernels in POCL_CACHE_DIR, else
 * $XDG_CACHE_HOME/pocl, else $HOME/.cache/pocl; when it cannot write
 * there it offers no device, and the ICD loader says no more. Returns a
 * sentence saying so, or "" when the directory (or the nearest one that
 * exists above it) is writable. */
static const char *pocl_cache_hint(void)
{
	static char hint[PATH_MAX + 160];
	char dir[PATH_MAX], *slash;
	const char *env = getenv("POCL_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");

	if (env && *env)
		snprintf(dir, sizeof(dir), "%s", env);
	else if (xdg && *xdg)
		snprintf(dir, sizeof(dir), "%s/pocl", xdg);
	else if (home && *home)
		snprintf(dir, sizeof(dir), "%s/.cache/pocl", home);
	else
		return "";
	while (access(dir, F_OK) && (slash = strrchr(dir, '/')) && slash != dir)
		*slash = '\0';
	if (!access(dir, W_OK))
		return "";
	snprintf(hint, sizeof(hint), " (PoCL cannot write its kernel cache under %s: set POCL_CACHE_DIR "
		 "to a writable directory)", dir);
	return hint;
}

static int pick_platform(int want, cl_platform_id *out, InferError *err)
{
	cl_uint n = 0;
	cl_platform_id *all;
	cl_int rc = clGetPlatformIDs(0, NULL, &n);

	if (rc != CL_SUCCESS || n == 0) /* the ICD loader says -1001 then */
		return infer_fail(err, "no OpenCL platform found%s", pocl_cache_hint());
	if (want >= (int)n)
		return infer_fail(err, "OpenCL platform %d does not exist (%u found)", want, n);
	all = calloc(n, sizeof(*all));
	if (!all)
		return infer_fail(err, "out of memory listing OpenCL platforms");
	rc = clGetPlatformIDs(n, all, NULL);
	if (rc != CL_SUCCESS) {
		free(all);
		return cl_fail(err, "clGetPlatformIDs", rc);
	}
	/* -1: the first platform that has any device */
	int found = -1;
	for (cl_uint i = 0; i < n && found < 0; i++) {
		cl_uint nd = 0;
		if (want >= 0 && (int)i != want)
			continue;
		if (clGetDeviceIDs(all[i], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) == CL_SUCCESS && nd > 0)
			found = (int)i;
	}
	if (found >= 0)
		*out = all[found];
	free(all);
	if (found < 0)
		return want >= 0 ? infer_fail(err, "OpenCL platform %d has no device%s", want, pocl_cache_hint())
				 : infer_fail(err, "no OpenCL platform has a device%s", pocl_cache_hint());
	return 0;
}

int backend_opencl_has_gpu(void)
{
	cl_platform_id all[16];
	cl_uint n = 0;
	int found = 0;

	if (clGetPlatformIDs(16, all, &n) != CL_SUCCESS)
		return 0;
	for (cl_uint i = 0; i < n && i < 16 && !found; i++) {
		cl_uint nd = 0;

		found = clGetDeviceIDs(all[i], CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR, 0, NULL,
				       &nd) == CL_SUCCESS && nd > 0;
	}
	return found;
}

static int pick_device(cl_platform_id plat, int want, cl_device_id *out, InferError *err)
{
	cl_uint n = 0;
	cl_device_id *all;
	cl_int rc = clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 0, NULL, &n);

	if (rc != CL_SUCCESS || n == 0)
		return infer_fail(err, "OpenCL platform has no device");
	if (want >= (int)n)
		return infer_fail(err, "OpenCL device %d does not exist (%u found)", want, n);
	all = calloc(n, sizeof(*all));
	if (!all)
		return infer_fail(err, "out of memory listing OpenCL devices");
	rc = clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, n, all, NULL);
	if (rc == CL_SUCCESS)
		*out = all[want < 0 ? 0 : want];
	free(all);
	return rc == CL_SUCCESS ? 0 : cl_fail(err, "clGetDeviceIDs", rc);
}

/* The build option that picks the integer dot product of the quantized
 * kernels (00_common.cl, dot4) on dev: PoCL on an x86 CPU (this one) takes
 * x86 builtins, vpdpbusd where the CPU has AVX512-VNNI, vpmaddubsw where
 * it has AVX2. Anything else gets portable OpenCL C. */
static const char *dot4_option(cl_device_id dev)
{
#if defined(__x86_64__)
	char version[256] = "";
	cl_device_type type = 0;

	clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
	clGetDeviceInfo(dev, CL_DEVICE_VERSION, sizeof(version) - 1, version, NULL);
	if (!(type & CL_DEVICE_TYPE_CPU) || !strstr(version, "PoCL"))
		return "";
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512vnni"))
		return " -DX86_VNNI";
	return __builtin_cpu_supports("avx2") ? " -DX86_AVX2" : "";
#else
	(void)dev;
	return "";
#endif
}

/* Builds src for dev; on failure the error carries the build log, newlines
 * folded so it stays one line. */
static int build_program(cl_context ctx, cl_device_id dev, const char *src, WeightType wtype,
			 enum kv_type kv, float eps, cl_program *out, InferError *err)
{
	char opts[192];
	cl_int rc;
	cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &rc);

	if (!prog)
		return cl_fail(err, "clCreateProgramWithSource", rc);
	cl_device_type type = 0;

	clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
	/* the matrices' type, the cache's and the norm's epsilon (a hex
	 * literal: the host's float exactly) are the kernels' own */
	snprintf(opts, sizeof(opts), "-cl-std=CL1.2 -DWTYPE=%d -DNORM_EPS=%af%s%s%s", (int)wtype, (double)eps,
		 kv == KV_F16 ? " -DKV_HALF" : "", type & CL_DEVICE_TYPE_CPU ? " -DCPU_DEVICE" : "",
		 dot4_option(dev));
	rc = clBuildProgram(prog, 1, &dev, opts, NULL, NULL);
	if (rc != CL_SUCCESS) {
		char log[400] = "";
		size_t len = 0;
		clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof(log) - 1, log, &len);
		log[sizeof(log) - 1] = '\0';
		for (char *p = log; *p; p++)
			if (*p == '\n' || *p == '\r')
				*p = ' ';
		clReleaseProgram(prog);
		return infer_fail(err, "opencl: kernel build failed (CL error %d): %s",
				  (int)rc, log[0] ? log : "(no build log)");
	}
	*out = prog;
	return 0;
}

/* Test hook: builds src (NULL: the engine's kernels) on the default device,
 * reporting as create does. */
int infer_cl_build_check(const char *src, InferError *err)
{
	cl_platform_id plat;
	cl_device_id dev;
	cl_context ctx;
	cl_program prog;
	cl_int rc;

	if (pick_platform(-1, &plat, err) || pick_device(plat, -1, &dev, err))
		return -1;
	ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &rc);
	if (!ctx)
		return cl_fail(err, "clCreateContext", rc);
	rc = build_program(ctx, dev, src ? src : infer_cl_source, WEIGHT_F32, KV_F32, 1e-5f, &prog, err);
	if (rc == 0)
		clReleaseProgram(prog);
	clReleaseContext(ctx);
	return rc;
}

/* ---- buffers ---- */

/* A device buffer counted in pool, filled from host when src is non-NULL.
 * The KV cache counts in POOL_KV_CACHE, as on the CPU backend, so that pool
 * means the same whatever the backend; everything else in POOL_DEVICE. */
static int dev_buffer_in(ClState *s, enum pool_id pool, size_t bytes, const void *src,
			 cl_mem *out, InferError *err)
{
	cl_int rc;
	cl_mem mem;

	if (s->nbufs == s->cap_bufs)
		return infer_fail(err, "opencl: internal buffer table full");
	mem = clCreateBuffer(s->ctx, CL_MEM_READ_WRITE, bytes, NULL, &rc);
	if (!mem)
		return cl_fail(err, "clCreateBuffer", rc);
	s->bufs[s->nbufs++] = (ClBuffer){ mem, bytes, pool };
	pool_note_alloc(pool, (uint64_t)(uintptr_t)mem, bytes, bytes);
	*out = mem;
	if (src) {
		rc = clEnqueueWriteBuffer(s->queue, mem, CL_TRUE, 0, bytes, src, 0, NULL, NULL);
		if (rc != CL_SUCCESS)
			return cl_fail(err, "clEnqueueWriteBuffer", rc);
	}
	return 0;
}

static int dev_buffer(ClState *s, size_t bytes, const void *src, cl_mem *out,
		      InferError *err)
{
	return dev_buffer_in(s, POOL_DEVICE, bytes, src, out, err);
}

/* Elements off.. (n of them, each elem bytes) of parent as a buffer of its
 * own, for the phase kernels' arguments; off * elem is a multiple of
 * s->align floats. */
static int sub_buffer(ClState *s, cl_mem parent, size_t off, size_t n, size_t elem, cl_mem *out,
		      InferError *err)
{
	cl_buffer_region r = { off * elem, n * elem };
	cl_int rc;

	if (s->nsubs == s->cap_subs)
		return infer_fail(err, "opencl: internal sub-buffer table full");
	*out = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &rc);
	if (!*out)
		return cl_fail(err, "clCreateSubBuffer", rc);
	s->subs[s->nsubs++] = *out;
	return 0;
}

/* A row-major matrix of width n for upload_packed: rows of src, in its
 * stored type. */
typedef struct {
	const void *src;
	int rows;
} MatrixPart;

/* 4-byte words of a packed (d, n) matrix of type t: the weights buffer is
 * counted in floats, and every packed size is a multiple of 4. */
static size_t packed_words(WeightType t, int d, int n)
{
	return packed_bytes(t, d, n) / sizeof(float);
}

/* Bytes of one stored row of n values of type t (GGUF's layout). */
static size_t row_bytes(WeightType t, int n)
{
	return (size_t)ggml_type_bytes((uint32_t)t, (uint64_t)n);
}

/* Writes matrices of type t packed for the panel kernels (backend/panels.h)
 * into the weights buffer at off (floats). fused: the parts' rows are one
 * matrix (wq, wk, wv as wqkv); else each part is packed on its own, one
 * after the other (w1 then w3). */
static int upload_packed(ClState *s, WeightType t, const MatrixPart *parts, int nparts, int n,
			 int fused, size_t off, InferError *err)
{
	size_t rows = 0, words = 0, rb = row_bytes(t, n);
	float *packed;
	char *concat = NULL;
	cl_int rc;

	for (int i = 0; i < nparts; i++) {
		rows += parts[i].rows;
		words += packed_words(t, parts[i].rows, n);
	}
	if (fused)
		words = packed_words(t, (int)rows, n);
	packed = malloc(words * sizeof(float));
	if (fused && packed)
		concat = malloc(rows * rb);
	if (!packed || (fused && !concat)) {
		free(packed);
		return infer_fail(err, "opencl: out of memory packing %zu rows", rows);
	}
	if (fused) {
		char *p = concat;

		for (int i = 0; i < nparts; p += (size_t)parts[i].rows * rb, i++)
			memcpy(p, parts[i].src, (size_t)parts[i].rows * rb);
		pack_matrix_typed(packed, t, concat, (int)rows, n);
	} else {
		float *p = packed;

		for (int i = 0; i < nparts; p += packed_words(t, parts[i].rows, n), i++)
			pack_matrix_typed(p, t, parts[i].src, parts[i].rows, n);
	}
	rc = clEnqueueWriteBuffer(s->queue, s->weights, CL_TRUE, off * sizeof(float),
				  words * sizeof(float), packed, 0, NULL, NULL);
	free(concat);
	free(packed);
	return rc == CL_SUCCESS ? 0 : cl_fail(err, "clEnqueueWriteBuffer", rc);
}

static int upload_vector(ClState *s, const float *src, size_t n, size_t off, InferError *err)
{
	cl_int rc = clEnqueueWriteBuffer(s->queue, s->weights, CL_TRUE, off * sizeof(float),
					 n * sizeof(float), src, 0, NULL, NULL);

	return rc == CL_SUCCESS ? 0 : cl_fail(err, "clEnqueueWriteBuffer", rc);
}

/* Floats of each weight as the kernels hold it, by woff index. */
static void weight_sizes(const ClState *s, size_t global[W_GLOBAL], size_t layer[W_PER_LAYER])
{
	const Config *c = s->c;
	int kv = c->n_kv_heads * (c->dim / c->n_heads);

	global[W_EMB] = packed_words(s->emb_type, c->vocab_size, c->dim);
	global[W_RMS_FINAL] = c->dim;
	global[W_CLS] = c->shared_classifier ? 0 : packed_words(s->cls_type, c->vocab_size, c->dim);
	layer[W_RMS_ATT] = layer[W_RMS_FFN] = c->dim;
	layer[W_QKV] = packed_words(s->wtype, c->dim + 2 * kv, c->dim);
	layer[W_WO] = packed_words(s->wtype, c->dim, c->dim);
	layer[W_W13] = 2 * packed_words(s->wtype, c->hidden_dim, c->dim);
	layer[W_W2] = packed_words(s->wtype, c->dim, c->hidden_dim);
}

/* Places every weight in the weights buffer (s->woff, s->weight_floats),
 * each at a multiple of s->align; a shared classifier is the embedding. */
static int plan_weights(ClState *s, InferError *err)
{
	const Config *c = s->c;
	size_t g[W_GLOBAL], l[W_PER_LAYER], at = 0;

	s->woff = calloc(W_GLOBAL + (size_t)c->n_layers * W_PER_LAYER, sizeof(*s->woff));
	if (!s->woff)
		return infer_fail(err, "out of memory for the opencl weight table");
	weight_sizes(s, g, l);
	for (int i = 0; i < W_GLOBAL; at += round_up(g[i], s->align), i++)
		s->woff[i] = at;
	if (c->shared_classifier)
		s->woff[W_CLS] = s->woff[W_EMB];
	for (int j = 0; j < c->n_layers; j++)
		for (int i = 0; i < W_PER_LAYER; at += round_up(l[i], s->align), i++)
			s->woff[W_GLOBAL + j * W_PER_LAYER + i] = at;
	s->weight_floats = at;
	return 0;
}

static size_t layer_off(const ClState *s, int l, int which)
{
	return s->woff[W_GLOBAL + l * W_PER_LAYER + which];
}

static int upload_layer(ClState *s, const Weights *w, int l, InferError *err)
{
	const Config *c = s->c;
	size_t dim = c->dim, hid = c->hidden_dim;
	size_t kv = (size_t)c->n_kv_heads * (c->dim / c->n_heads);
	const LayerWeights *lw = &w->layers[l];
	MatrixPart wo = { lw->wo.data, dim }, w2 = { lw->w2.data, dim };
	MatrixPart qkv[] = { { lw->wq.data, dim }, { lw->wk.data, kv }, { lw->wv.data, kv } };
	MatrixPart w13[] = { { lw->w1.data, hid }, { lw->w3.data, hid } };

	return upload_vector(s, tensor_f32(lw->rms_att), dim, layer_off(s, l, W_RMS_ATT), err) ||
	       upload_vector(s, tensor_f32(lw->rms_ffn), dim, layer_off(s, l, W_RMS_FFN), err) ||
	       upload_packed(s, s->wtype, qkv, 3, dim, 1, layer_off(s, l, W_QKV), err) ||
	       upload_packed(s, s->wtype, &wo, 1, dim, 0, layer_off(s, l, W_WO), err) ||
	       upload_packed(s, s->wtype, w13, 2, dim, 0, layer_off(s, l, W_W13), err) ||
	       upload_packed(s, s->wtype, &w2, 1, hid, 0, layer_off(s, l, W_W2), err);
}

/* The phase kernels take each weight, and each layer's KV cache, as a
 * buffer of its own: sub-buffers of the shared ones (not made when the
 * forward kernel, which takes the shared ones, is forced for every forward). */
static int split_buffers(ClState *s, InferError *err)
{
	const Config *c = s->c;
	size_t g[W_GLOBAL], lw[W_PER_LAYER];
	size_t kv_n = (size_t)s->n_blocks * s->block_size * c->n_kv_heads * (c->dim / c->n_heads);
	size_t f = sizeof(float);

	weight_sizes(s, g, lw);
	if (sub_buffer(s, s->weights, s->woff[W_EMB], g[W_EMB], f, &s->emb, err) ||
	    sub_buffer(s, s->weights, s->woff[W_RMS_FINAL], g[W_RMS_FINAL], f, &s->rms_final, err))
		return -1;
	if (c->shared_classifier)
		s->wcls = s->emb;
	else if (sub_buffer(s, s->weights, s->woff[W_CLS], g[W_CLS], f, &s->wcls, err))
		return -1;
	for (int l = 0; l < c->n_layers; l++) {
		ClLayer *L = &s->layers[l];
		cl_mem *part[W_PER_LAYER] = { &L->rms_att, &L->rms_ffn, &L->wqkv, &L->wo, &L->w13,
					      &L->w2 };

		for (int i = 0; i < W_PER_LAYER; i++)
			if (sub_buffer(s, s->weights, layer_off(s, l, i), lw[i], f, part[i], err))
				return -1;
		if (sub_buffer(s, s->kcache, l * s->kv_stride, kv_n, s->kv_elem, &L->kcache, err) ||
		    sub_buffer(s, s->vcache, l * s->kv_stride, kv_n, s->kv_elem, &L->vcache, err))
			return -1;
	}
	return 0;
}

/* RoPE (cos, sin) per position and head pair, with the reference's libm
 * calls so the device rotates by exactly the host's angles. */
static int upload_rope(ClState *s, InferError *err)
{
	const Config *c = s->c;
	int hs = c->dim / c->n_heads, pairs = hs / 2;
	size_t bytes = (size_t)c->seq_len * pairs * 2 * sizeof(float);
	float *tab = malloc(bytes ? bytes : 1);
	int rc;

	if (!tab)
		return infer_fail(err, "opencl: out of memory for the rope table");
	for (int p = 0; p < c->seq_len; p++)
		for (int i = 0; i < pairs; i++) {
			float freq = 1.0f / powf(config_rope_theta(c), (2 * i) / (float)hs);
			float val = p * freq;
			tab[((size_t)p * pairs + i) * 2] = cosf(val);
			tab[((size_t)p * pairs + i) * 2 + 1] = sinf(val);
		}
	rc = dev_buffer(s, bytes, tab, &s->rope, err);
	free(tab);
	return rc;
}

static int upload_weights(ClState *s, const Model *m, InferError *err)
{
	const Config *c = &m->config;
	MatrixPart emb = { m->weights.token_embedding_table.data, c->vocab_size };
	MatrixPart wcls = { m->weights.wcls.data, c->vocab_size };

	if (plan_weights(s, err) ||
	    dev_buffer(s, s->weight_floats * sizeof(float), NULL, &s->weights, err) ||
	    dev_buffer(s, (W_GLOBAL + (size_t)c->n_layers * W_PER_LAYER) * sizeof(cl_ulong),
		       s->woff, &s->woff_mem, err))
		return -1;
	/* the embedding is packed too, so a shared classifier is one copy */
	if (upload_packed(s, s->emb_type, &emb, 1, c->dim, 0, s->woff[W_EMB], err) ||
	    upload_vector(s, tensor_f32(m->weights.rms_final_weight), c->dim, s->woff[W_RMS_FINAL], err))
		return -1;
	if (!c->shared_classifier &&
	    upload_packed(s, s->cls_type, &wcls, 1, c->dim, 0, s->woff[W_CLS], err))
		return -1;
	for (int l = 0; l < c->n_layers; l++)
		if (upload_layer(s, &m->weights, l, err))
			return -1;
	return 0;
}

static int upload_weights_span(ClState *s, const Model *m, InferError *err)
{
	int rc;

	trace_span_begin(SPAN_PACK, LAYER_NONE);
	rc = upload_weights(s, m, err);
	trace_span_end(SPAN_PACK, LAYER_NONE);
	return rc;
}

/* The forward kernel's task counters, zeroed (the kernel leaves them so). */
static int sync_buffer(ClState *s, InferError *err)
{
	size_t bytes = SYNC_INTS(s->c->n_layers) * sizeof(int);
	int *zero = calloc(1, bytes);
	int rc;

	if (!zero)
		return infer_fail(err, "out of memory for the opencl sync counters");
	rc = dev_buffer(s, bytes, zero, &s->sync, err);
	free(zero);
	return rc;
}

static int upload_model(ClState *s, const Model *m, InferError *err)
{
	const Config *c = &m->config;
	size_t f = sizeof(float), dim = c->dim, hid = c->hidden_dim;
	size_t kv = (size_t)c->n_kv_heads * (c->dim / c->n_heads);

	/* the KV cache counts in POOL_KV_CACHE, as on the cpu backend; a
	 * layer's part starts where a sub-buffer may */
	s->kv_stride = round_up((size_t)s->n_blocks * s->block_size * kv, s->align * f / s->kv_elem);
	if (upload_weights_span(s, m, err) || upload_rope(s, err) ||
	    dev_buffer_in(s, POOL_KV_CACHE, c->n_layers * s->kv_stride * s->kv_elem, NULL, &s->kcache, err) ||
	    dev_buffer_in(s, POOL_KV_CACHE, c->n_layers * s->kv_stride * s->kv_elem, NULL, &s->vcache, err) ||
	    (s->want != CL_LAUNCH_FORWARD && split_buffers(s, err)))
		return -1;
	return dev_buffer(s, (size_t)s->meta_ints * sizeof(int), NULL, &s->meta, err) ||
	       dev_buffer(s, CL_MAX_BATCH * dim * f, NULL, &s->x, err) ||
	       dev_buffer(s, CL_MAX_BATCH * dim * f, NULL, &s->q, err) ||
	       dev_buffer(s, CL_MAX_BATCH * dim * f, NULL, &s->att_out, err) ||
	       dev_buffer(s, CL_MAX_BATCH * hid * f, NULL, &s->hb, err) ||
	       dev_buffer(s, (size_t)s->max_out * c->vocab_size * f, NULL, &s->logits, err) ||
	       sync_buffer(s, err);
}

/* ---- create / destroy ---- */

static void cl_destroy(void *state)
{
	ClState *s = state;

	if (!s)
		return;
	if (s->queue)
		clFinish(s->queue);
	for (int i = 0; i < s->nsubs; i++)
		clReleaseMemObject(s->subs[i]);
	for (int i = 0; i < s->nbufs; i++) {
		clReleaseMemObject(s->bufs[i].mem);
		pool_note_free(s->bufs[i].pool, (uint64_t)(uintptr_t)s->bufs[i].mem,
			       s->bufs[i].bytes, s->bufs[i].bytes);
	}
	for (int i = 0; i < FN_COUNT; i++)
		if (s->fn[i])
			clReleaseKernel(s->fn[i]);
	if (s->prog_cls && s->prog_cls != s->prog_emb && s->prog_cls != s->prog)
		clReleaseProgram(s->prog_cls);
	if (s->prog_emb && s->prog_emb != s->prog)
		clReleaseProgram(s->prog_emb);
	if (s->prog)
		clReleaseProgram(s->prog);
	if (s->queue)
		clReleaseCommandQueue(s->queue);
	if (s->ctx)
		clReleaseContext(s->ctx);
	free(s->bufs);
	free(s->subs);
	free(s->woff);
	free(s->layers);
	free(s->events);
	free(s->recs);
	free(s->host_meta);
	free(s);
}

/* Local memory of n staged tokens of width k (00_common.cl, stage_tokens):
 * the floats and a scale per token, or for Q8_0 and Q4_0 a scale per token
 * and the values quantized: k int8s and a float and an int per block of
 * 32 (the k-quants: a float per 256 and an int per 16). */
static size_t staged_bytes(WeightType wtype, size_t n, size_t k)
{
	if (!weight_type_quantized(wtype))
		return (n * k + n) * sizeof(float);
	if (weight_type_kquant(wtype)) /* a float per 256 values, an int per 16 */
		return n * sizeof(float) + n * k + n * k / Q6_K_BLOCK * sizeof(float) + n * k / 16 * sizeof(int);
	return n * sizeof(float) + n * k + n * k / Q8_0_BLOCK * (sizeof(float) + sizeof(int));
}

/* The model must suit the kernels: even head size (RoPE pairs), and a
 * staged block of tokens of the widest matrix input must fit local memory
 * (beside the attention scratch, which the fused forward also holds). Sets
 * s->max_batch: CL_MAX_BATCH tokens, or as many as fit (the stories110M
 * shape's 2048-wide hidden layer fits 63 F32 or F16 tokens in PoCL's 512 KiB;
 * quantized ones stage no floats, and all 64 fit). */
static int check_model_fits(ClState *s, cl_device_id dev, InferError *err)
{
	const Config *c = s->c;
	cl_ulong have = 0;
	size_t width = c->hidden_dim > c->dim ? c->hidden_dim : c->dim;
	size_t token = staged_bytes(s->wtype, 1, width);
	size_t out = staged_bytes(s->cls_type, (size_t)s->max_out, c->dim);
	size_t att = (size_t)c->seq_len * sizeof(float), room;

	if ((c->dim / c->n_heads) % 2 != 0) /* the kernels rotate whole pairs */
		return infer_fail(err, "opencl: head size %d is odd; RoPE needs pairs",
				  c->dim / c->n_heads);
	clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(have), &have, NULL);
	room = have > att ? (size_t)have - att : 0;   /* the scratch, fused or not */
	s->max_batch = room / token < CL_MAX_BATCH ? (int)(room / token) : CL_MAX_BATCH;
	if (s->max_batch < 1 || out > room)
		return infer_fail(err, "opencl: device local memory %llu bytes < %zu needed",
				  (unsigned long long)have, att + (out > token ? out : token));
	return 0;
}

/* The whole forward in one launch on CPU devices, where each launch costs
 * a wake-up of every worker thread (unless asked otherwise, or a tracer
 * wants op detail: forward_launch): a work-group per compute unit (a
 * worker thread). Sub-buffers start at the device's base alignment, and at
 * least a cache line. */
static void choose_launches(ClState *s, cl_device_id dev, enum cl_launch want)
{
	cl_device_type type = 0;
	cl_uint units = 0, align_bits = 0;

	clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
	clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(units), &units, NULL);
	clGetDeviceInfo(dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof(align_bits), &align_bits, NULL);
	s->want = want;
	s->cpu_device = (type & CL_DEVICE_TYPE_CPU) != 0;
	s->launch = LAUNCH_PHASES;
	s->groups = units > 0 ? units : 1;
	s->align = align_bits / 8 / sizeof(float);
	if (s->align < 16)
		s->align = 16;
}

/* A program for each type the kernels read: the embed kernel's comes from
 * emb_type's, the logits kernel's from cls_type's, the rest from the
 * layers'. Equal types share one. */
static int build_programs(ClState *s, cl_device_id dev, InferError *err)
{
	float eps = config_norm_eps(s->c);

	if (build_program(s->ctx, dev, infer_cl_source, s->wtype, s->kv_type, eps, &s->prog, err))
		return -1;
	s->prog_emb = s->prog;
	if (s->emb_type != s->wtype &&
	    build_program(s->ctx, dev, infer_cl_source, s->emb_type, s->kv_type, eps, &s->prog_emb, err))
		return -1;
	if (s->cls_type == s->wtype || s->cls_type == s->emb_type) {
		s->prog_cls = s->cls_type == s->wtype ? s->prog : s->prog_emb;
		return 0;
	}
	return build_program(s->ctx, dev, infer_cl_source, s->cls_type, s->kv_type, eps, &s->prog_cls, err);
}

static int setup_device(ClState *s, const BackendOptions *opt, InferError *err)
{
	cl_platform_id plat;
	cl_device_id dev;
	cl_int rc;

	if (pick_platform(opt ? opt->cl_platform : -1, &plat, err) ||
	    pick_device(plat, opt ? opt->cl_device : -1, &dev, err))
		return -1;
	choose_launches(s, dev, opt ? opt->cl_launch : CL_LAUNCH_AUTO);
	/* The forward kernel's work-groups wait on each other's counters in
	 * global memory: PoCL's CPU device runs them as threads that see each
	 * other's stores. OpenCL promises neither elsewhere, and on an NVIDIA
	 * H200 the forced kernel gave other ids than the phases (wrong ones). */
	if (s->want == CL_LAUNCH_FORWARD && !s->cpu_device)
		return infer_fail(err, "opencl: --cl-launch forward needs a CPU device (its work-groups "
				  "wait on each other through memory); this one is not: use phases");
	if (s->want == CL_LAUNCH_FORWARD && !s->one_type)
		return infer_fail(err, "opencl: --cl-launch forward needs one matrix type "
				  "(token_embd %s, the classifier %s, the layers %s): use auto (the layers "
				  "in one kernel) or phases",
				  weight_type_name(s->emb_type), weight_type_name(s->cls_type),
				  weight_type_name(s->wtype));
	if (check_model_fits(s, dev, err))
		return -1;
	s->ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &rc);
	if (!s->ctx)
		return cl_fail(err, "clCreateContext", rc);
	s->queue = clCreateCommandQueue(s->ctx, dev, CL_QUEUE_PROFILING_ENABLE, &rc);
	if (!s->queue)
		return cl_fail(err, "clCreateCommandQueue", rc);
	if (build_programs(s, dev, err))
		return -1;
	for (int i = 0; i < FN_COUNT; i++) {
		cl_program p = i == FN_EMBED ? s->prog_emb : i == FN_LOGITS ? s->prog_cls : s->prog;

		s->fn[i] = clCreateKernel(p, cl_fn_names[i], &rc);
		if (!s->fn[i])
			return infer_fail(err, "opencl: kernel %s missing (CL error %d)",
					  cl_fn_names[i], (int)rc);
	}
	return 0;
}

static int cl_create(const Model *m, const BackendOptions *opt, void **state,
		     InferError *err)
{
	const Config *c = &m->config;
	ClState *s;

	*state = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return infer_fail(err, "out of memory for the opencl backend");
	s->c = c;
	if (model_layer_type(m, &s->wtype, err)) {   /* the layers' kernels are built for one */
		char why[sizeof(err->msg)];

		snprintf(why, sizeof(why), "%s", err ? err->msg : "");
		free(s);
		return infer_fail(err, "opencl backend: %s (the cpu backend, -b cpu, runs any mix)",
				  why);
	}
	s->emb_type = m->weights.token_embedding_table.type;
	s->cls_type = m->weights.wcls.type;
	s->one_type = s->emb_type == s->wtype && s->cls_type == s->wtype;
	backend_kv_shape(c, opt, &s->n_blocks, &s->block_size);
	s->kv_type = opt ? opt->kv_type : KV_F32;
	s->kv_elem = backend_kv_elem_bytes(s->kv_type);
	s->max_out = opt && opt->max_seqs > 0 ? opt->max_seqs : 1;
	if (s->max_out > CL_MAX_BATCH)
		s->max_out = CL_MAX_BATCH;
	s->tab_cap = CL_MAX_BATCH * ((c->seq_len + s->block_size - 1) / s->block_size);
	s->meta_ints = META_OUT + s->max_out + s->tab_cap;
	s->host_meta = calloc((size_t)s->meta_ints, sizeof(int));
	s->cap_bufs = 16;
	s->cap_subs = 8 * c->n_layers + 3;
	s->max_events = 5 * c->n_layers + 2;
	s->bufs = calloc(s->cap_bufs, sizeof(*s->bufs));
	s->subs = calloc(s->cap_subs, sizeof(*s->subs));
	s->layers = calloc(c->n_layers, sizeof(*s->layers));
	s->events = calloc(s->max_events, sizeof(*s->events));
	s->recs = calloc(s->max_events, sizeof(*s->recs));
	if (!s->bufs || !s->subs || !s->layers || !s->events || !s->recs || !s->host_meta) {
		cl_destroy(s);
		return infer_fail(err, "out of memory for the opencl backend");
	}
	if (setup_device(s, opt, err) || upload_model(s, m, err)) {
		cl_destroy(s);
		return -1;
	}
	*state = s;
	return 0;
}

/* ---- forward ---- */

/* Kernel arguments as a list of (size, pointer) pairs; a NULL pointer
 * with a size is a __local buffer of that many bytes. */
struct arg_pair {
	size_t size;
	const void *val;
};
#define ARG(v) sizeof(v), &(v)
#define LOCAL_ARG(bytes) (bytes), NULL
#define SET_ARGS(k, err, ...)                                               \
	set_args((k), (err), (const struct arg_pair[]){ __VA_ARGS__ },       \
		 sizeof((const struct arg_pair[]){ __VA_ARGS__ }) / sizeof(struct arg_pair))

static int set_args(cl_kernel k, InferError *err, const struct arg_pair *a, int n)
{
	for (int i = 0; i < n; i++) {
		cl_int rc = clSetKernelArg(k, i, a[i].size, a[i].val);
		if (rc != CL_SUCCESS)
			return infer_fail(err, "opencl: setting argument %d failed (CL error %d)",
					  i, (int)rc);
	}
	return 0;
}


/* Work-group size for a matrix kernel of `items` work-items: the largest
 * power of two <= max_local that still gives min_groups groups, so PoCL's
 * two threads get near-equal shares (5 groups split 3:2, 18 split 9:9). */
static size_t pick_local(size_t items, size_t max_local, size_t min_groups)
{
	size_t local = max_local;

	while (local > 1 && items / local < min_groups)
		local /= 2;
	return local;
}
/* Every work-group of the matrix kernels re-stages (and re-normalizes) its
 * tokens, so the logits kernel, with ~2000 panels, uses big groups: 512
 * rows a group used ~15% less CPU than 64 on a 32000-row classifier. */
#define GROUPS_MIN 16
#define GROUPS_MIN_BATCH 8
#define LOGITS_LOCAL_MAX 32
#define LOGITS_GROUPS_MIN 32

/* Work-items per group of a matrix kernel over items panels for n tokens. */
static size_t matrix_local(const ClState *s, size_t items, int n)
{
	if (n > 1 && s->cpu_device)
		return pick_local(items, MAT_LOCAL_BATCH, GROUPS_MIN_BATCH);
	return pick_local(items, MAT_LOCAL, GROUPS_MIN);
}

/* Enqueues fn; with profiling on it keeps the event and what it was. */
static int launch(ClState *s, enum cl_fn fn, enum cl_kernel_id id, int layer,
		  cl_uint dims, const size_t *global, const size_t *local,
		  InferError *err)
{
	cl_event *ev = NULL;
	cl_int rc;

	if (s->profiling) {
		if (s->nevents == s->max_events)
			return infer_fail(err, "opencl: more kernels than event slots");
		ev = &s->events[s->nevents];
	}
	rc = clEnqueueNDRangeKernel(s->queue, s->fn[fn], dims, NULL, global, local, 0, NULL, ev);
	if (rc != CL_SUCCESS)
		return infer_fail(err, "opencl: enqueue %s failed (CL error %d)",
				  cl_fn_names[fn], (int)rc);
	if (ev) {
		s->recs[s->nevents] = (struct cl_kernel_record){
			.kernel_id = id, .queue = 0, .layer = layer };
		s->nevents++;
	}
	return 0;
}

static int run_embed(ClState *s, int n, InferError *err)
{
	int dim = s->c->dim;
	size_t global[2] = { round_up(dim, EMBED_LOCAL), n }, local[2] = { EMBED_LOCAL, 1 };

	if (SET_ARGS(s->fn[FN_EMBED], err, { ARG(s->meta) }, { ARG(s->emb) },
		     { ARG(s->x) }, { ARG(dim) }))
		return -1;
	return launch(s, FN_EMBED, KERNEL_EMBED, LAYER_NONE, 2, global, local, err);
}

static int run_qkv(ClState *s, int l, int n, InferError *err)
{
	const Config *c = s->c;
	ClLayer *L = &s->layers[l];
	int dim = c->dim, hs = c->dim / c->n_heads, kv = c->n_kv_heads * hs;
	int pos_off = META_POS, slot_off = META_SLOT;
	size_t items = (dim + 2 * kv + PANEL_ROWS - 1) / PANEL_ROWS;
	size_t local = matrix_local(s, items, n);
	size_t global = round_up(items, local);
	size_t xs = staged_bytes(s->wtype, (size_t)n, dim);

	if (SET_ARGS(s->fn[FN_QKV], err, { ARG(s->x) }, { ARG(L->rms_att) }, { ARG(L->wqkv) },
		     { ARG(s->q) }, { ARG(L->kcache) }, { ARG(L->vcache) }, { ARG(s->rope) },
		     { ARG(s->meta) }, { ARG(pos_off) }, { ARG(slot_off) }, { ARG(n) }, { ARG(dim) },
		     { ARG(kv) }, { ARG(hs) }, { ARG(s->block_size) }, { LOCAL_ARG(xs) }))
		return -1;
	return launch(s, FN_QKV, KERNEL_QKV, l, 1, &global, &local, err);
}

static int run_attention(ClState *s, int l, int n, InferError *err)
{
	const Config *c = s->c;
	ClLayer *L = &s->layers[l];
	int dim = c->dim, hs = c->dim / c->n_heads, kv = c->n_kv_heads * hs;
	int kv_mul = c->n_heads / c->n_kv_heads;
	int pos_off = META_POS, tab_off = META_TAB, btab_off = META_OUT + s->max_out;
	size_t global[2] = { c->n_heads, n }, local[2] = { 1, 1 };
	size_t att = (size_t)c->seq_len * sizeof(float);

	if (SET_ARGS(s->fn[FN_ATTENTION], err, { ARG(s->q) }, { ARG(L->kcache) },
		     { ARG(L->vcache) }, { ARG(s->att_out) }, { ARG(s->meta) }, { ARG(pos_off) },
		     { ARG(tab_off) }, { ARG(btab_off) }, { ARG(s->block_size) }, { ARG(dim) },
		     { ARG(kv) }, { ARG(hs) }, { ARG(kv_mul) }, { LOCAL_ARG(att) }))
		return -1;
	return launch(s, FN_ATTENTION, KERNEL_ATTENTION, l, 2, global, local, err);
}

/* x += w @ in, w is (rows = dim, k). */
static int run_matmul_add(ClState *s, cl_mem in, cl_mem w, int k, enum cl_kernel_id id,
			  int l, int n, InferError *err)
{
	int rows = s->c->dim;
	size_t items = (rows + PANEL_ROWS - 1) / PANEL_ROWS;
	size_t local = matrix_local(s, items, n);
	size_t global = round_up(items, local);
	size_t xs = staged_bytes(s->wtype, (size_t)n, k);

	if (SET_ARGS(s->fn[FN_MATMUL_ADD], err, { ARG(in) }, { ARG(w) }, { ARG(s->x) },
		     { ARG(n) }, { ARG(k) }, { ARG(rows) }, { LOCAL_ARG(xs) }))
		return -1;
	return launch(s, FN_MATMUL_ADD, id, l, 1, &global, &local, err);
}

static int run_ffn_up(ClState *s, int l, int n, InferError *err)
{
	ClLayer *L = &s->layers[l];
	int dim = s->c->dim, hid = s->c->hidden_dim;
	size_t items = (hid + PANEL_ROWS - 1) / PANEL_ROWS; /* a panel of w1 and of w3 each */
	size_t local = matrix_local(s, items, n);
	size_t global = round_up(items, local);
	size_t xs = staged_bytes(s->wtype, (size_t)n, dim);

	if (SET_ARGS(s->fn[FN_FFN_UP], err, { ARG(s->x) }, { ARG(L->rms_ffn) }, { ARG(L->w13) },
		     { ARG(s->hb) }, { ARG(n) }, { ARG(dim) }, { ARG(hid) }, { LOCAL_ARG(xs) }))
		return -1;
	return launch(s, FN_FFN_UP, KERNEL_FFN_UP, l, 1, &global, &local, err);
}

static int run_logits(ClState *s, int n_out, InferError *err)
{
	int dim = s->c->dim, vocab = s->c->vocab_size, out_off = META_OUT;
	size_t items = (vocab + 2 * PANEL_ROWS - 1) / (2 * PANEL_ROWS); /* two panels each */
	size_t local = pick_local(items, LOGITS_LOCAL_MAX, LOGITS_GROUPS_MIN);
	size_t global = round_up(items, local);
	size_t xs = staged_bytes(s->cls_type, (size_t)n_out, dim);

	if (SET_ARGS(s->fn[FN_LOGITS], err, { ARG(s->x) }, { ARG(s->rms_final) }, { ARG(s->wcls) },
		     { ARG(s->logits) }, { ARG(s->meta) }, { ARG(out_off) }, { ARG(n_out) },
		     { ARG(dim) }, { ARG(vocab) }, { LOCAL_ARG(xs) }))
		return -1;
	return launch(s, FN_LOGITS, KERNEL_LOGITS, LAYER_NONE, 1, &global, &local, err);
}

/* The whole forward, logits included, in one launch of `groups` one-item
 * work-groups (10_forward.cl); with embed 0 and n_out 0, its layers only. */
static int run_forward(ClState *s, int n, int n_out, int embed, InferError *err)
{
	const Config *c = s->c;
	int pos_off = META_POS, slot_off = META_SLOT, tab_off = META_TAB, out_off = META_OUT;
	int btab_off = META_OUT + s->max_out;
	cl_ulong kv_stride = s->kv_stride;
	size_t global = s->groups, local = 1;
	size_t width = c->hidden_dim > c->dim ? c->hidden_dim : c->dim;
	size_t xs = staged_bytes(s->wtype, (size_t)n, width);
	size_t att = (size_t)c->seq_len * sizeof(float);

	if (SET_ARGS(s->fn[FN_FORWARD], err, { ARG(s->weights) }, { ARG(s->woff_mem) },
		     { ARG(s->kcache) }, { ARG(s->vcache) }, { ARG(kv_stride) }, { ARG(s->rope) },
		     { ARG(s->meta) }, { ARG(s->x) }, { ARG(s->q) }, { ARG(s->att_out) },
		     { ARG(s->hb) }, { ARG(s->logits) }, { ARG(s->sync) }, { ARG(n) }, { ARG(n_out) },
		     { ARG(c->n_layers) }, { ARG(c->dim) }, { ARG(c->hidden_dim) },
		     { ARG(c->n_heads) }, { ARG(c->n_kv_heads) }, { ARG(c->vocab_size) },
		     { ARG(s->block_size) }, { ARG(pos_off) }, { ARG(slot_off) }, { ARG(tab_off) },
		     { ARG(btab_off) }, { ARG(out_off) }, { ARG(embed) }, { LOCAL_ARG(xs) },
		     { LOCAL_ARG(att) }))
		return -1;
	return launch(s, FN_FORWARD, KERNEL_FORWARD, LAYER_NONE, 1, &global, &local, err);
}

/* One layer's phase kernels, each enqueued inside its op span; every span
 * begun is ended even when an enqueue fails. */
static int run_layer(ClState *s, int l, int n, InferError *err)
{
	ClLayer *L = &s->layers[l];
	int rc;

	trace_span_begin(SPAN_QKV, l);
	rc = run_qkv(s, l, n, err);
	trace_span_end(SPAN_QKV, l);
	if (rc)
		return rc;

	trace_span_begin(SPAN_ATTENTION, l);
	rc = run_attention(s, l, n, err);
	trace_span_end(SPAN_ATTENTION, l);
	if (rc)
		return rc;

	trace_span_begin(SPAN_ATTN_OUT, l);
	rc = run_matmul_add(s, s->att_out, L->wo, s->c->dim, KERNEL_ATTN_OUT, l, n, err);
	trace_span_end(SPAN_ATTN_OUT, l);
	if (rc)
		return rc;

	trace_span_begin(SPAN_FFN, l);
	rc = run_ffn_up(s, l, n, err);
	if (!rc)
		rc = run_matmul_add(s, s->hb, L->w2, s->c->hidden_dim, KERNEL_FFN_DOWN, l, n, err);
	trace_span_end(SPAN_FFN, l);
	return rc;
}

/* After the sync: device timestamps of every kernel, one cl_batch. */
static void report_kernels(ClState *s)
{
	for (int i = 0; i < s->nevents; i++) {
		struct cl_kernel_record *r = &s->recs[i];
		cl_ulong t[4] = { 0, 0, 0, 0 };
		const cl_profiling_info what[4] = {
			CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
			CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END,
		};
		for (int j = 0; j < 4; j++)
			clGetEventProfilingInfo(s->events[i], what[j], sizeof(t[j]), &t[j], NULL);
		r->queued_ns = t[0];
		r->submit_ns = t[1];
		r->start_ns = t[2];
		r->end_ns = t[3];
	}
	for (int i = 0; i < s->nevents; i++)
		s->recs[i].forward_kernels = (uint32_t)s->nevents;
	if (s->nevents > 0)
		trace_kernels(s->recs, (uint32_t)s->nevents);
}

static void release_events(ClState *s)
{
	for (int i = 0; i < s->nevents; i++)
		clReleaseEvent(s->events[i]);
	s->nevents = 0;
}

/* Fills the staging copy of meta: per token its id, position, pool row and
 * block-table start; the logits tokens; the tables. Returns the token
 * count; *n_out gets the number of logits rows. */
static int fill_meta(ClState *s, const BatchSeq *seqs, int nseqs, int *n_out)
{
	int *m = s->host_meta, *btab = m + META_OUT + s->max_out;
	int n = 0, tab = 0, bs = s->block_size;

	*n_out = 0;
	for (int i = 0; i < nseqs; i++) {
		const BatchSeq *q = &seqs[i];
		int nb = (q->pos + q->n - 1) / bs + 1;

		memcpy(btab + tab, q->blocks, (size_t)nb * sizeof(int));
		for (int t = 0; t < q->n; t++, n++) {
			int p = q->pos + t;

			m[META_TOKENS + n] = q->tokens[t];
			m[META_POS + n] = p;
			m[META_SLOT + n] = q->blocks[p / bs] * bs + p % bs;
			m[META_TAB + n] = tab;
		}
		tab += nb;
		if (q->want_logits)
			m[META_OUT + (*n_out)++] = n - 1;
	}
	return n;
}

/* Everything up to the logits kernel, enqueued without waiting (a forward
 * launch: the whole forward, a kernel no op span stands for; a layers
 * launch: the embedding, then the layers in such a kernel). */
static int enqueue_forward(ClState *s, int n, int n_out, InferError *err)
{
	int rc;
	cl_int crc = clEnqueueWriteBuffer(s->queue, s->meta, CL_FALSE, 0,
					  (size_t)s->meta_ints * sizeof(int), s->host_meta,
					  0, NULL, NULL);

	if (crc != CL_SUCCESS)
		return cl_fail(err, "clEnqueueWriteBuffer", crc);
	if (s->launch == LAUNCH_FORWARD)
		return run_forward(s, n, n_out, 1, err);
	trace_span_begin(SPAN_EMBED, LAYER_NONE);
	rc = run_embed(s, n, err);
	trace_span_end(SPAN_EMBED, LAYER_NONE);
	if (!rc && s->launch == LAUNCH_LAYERS)
		return run_forward(s, n, 0, 0, err);
	for (int l = 0; !rc && l < s->c->n_layers; l++) {
		trace_span_begin(SPAN_LAYER, l);
		rc = run_layer(s, l, n, err);
		trace_span_end(SPAN_LAYER, l);
	}
	return rc;
}

/* The final norm and classifier (phases and layers launches), then the one
 * sync, in its own span: reading the logits waits for every kernel of the
 * forward. */
static int finish_forward(ClState *s, int n_out, float *logits, InferError *err)
{
	cl_int crc;

	if (n_out > 0 && s->launch != LAUNCH_FORWARD) {
		int rc;

		trace_span_begin(SPAN_LOGITS, LAYER_NONE);
		rc = run_logits(s, n_out, err);
		trace_span_end(SPAN_LOGITS, LAYER_NONE);
		if (rc)
			return rc;
	}
	trace_span_begin(SPAN_SYNC, LAYER_NONE);
	crc = n_out > 0 ? clEnqueueReadBuffer(s->queue, s->logits, CL_TRUE, 0,
					      (size_t)n_out * s->c->vocab_size * sizeof(float),
					      logits, 0, NULL, NULL)
			: clFinish(s->queue);
	trace_span_end(SPAN_SYNC, LAYER_NONE);
	return crc == CL_SUCCESS ? 0 : cl_fail(err, "clEnqueueReadBuffer", crc);
}

/* Auto runs the forward kernel on CPU devices unless a tracer wants op
 * detail (then every op span must launch its own kernel to have device
 * time of its own): for the whole pass, or for the layers of a model of
 * more than one matrix type (setup_device refuses --cl-launch forward
 * there). The stories110M shape as Q4_0 with a Q8_0 embedding decoded at
 * 162.9 tok/s with layers launches against 117.2 with phases (fwdbench,
 * medians of 5 interleaved rounds, PoCL on a Zen 3). */
static enum span_launch forward_launch(const ClState *s)
{
	int kernel = s->want == CL_LAUNCH_AUTO ? s->cpu_device && !trace_op_detail_wanted()
					       : s->want == CL_LAUNCH_FORWARD;

	if (!kernel)
		return LAUNCH_PHASES;
	return s->one_type ? LAUNCH_FORWARD : LAUNCH_LAYERS;
}

static int cl_forward_batch(void *state, const BatchSeq *seqs, int nseqs,
			    float *logits, InferError *err)
{
	ClState *s = state;
	int rc, n, n_out;

	if (backend_check_batch(s->c, seqs, nseqs, s->max_batch, s->max_out, s->n_blocks,
				s->block_size, err))
		return -1;
	s->profiling = trace_kernels_wanted();
	s->nevents = 0;
	s->launch = forward_launch(s);
	trace_forward_launch(s->launch);
	n = fill_meta(s, seqs, nseqs, &n_out);
	rc = enqueue_forward(s, n, n_out, err);
	if (!rc)
		rc = finish_forward(s, n_out, logits, err);
	if (rc)
		clFinish(s->queue); /* meta must not be read after we return */
	else if (s->profiling)
		report_kernels(s);
	release_events(s);
	return rc;
}

static int cl_forward(void *state, const int *tokens, int n, int pos,
		      float *logits, InferError *err)
{
	ClState *s = state;
	BatchSeq q = { tokens, n, pos, (const int[]){ 0 }, 1 };

	if (s->n_blocks != 1 || s->block_size != s->c->seq_len)
		return infer_fail(err, "opencl: single-stream calls need the single-stream KV layout");
	return cl_forward_batch(state, &q, 1, logits, err);
}

static int cl_batch_limit(const void *state)
{
	return ((const ClState *)state)->max_batch;
}

const BackendOps backend_opencl = {
	.name = "opencl",
	.create = cl_create,
	.forward = cl_forward,
	.destroy = cl_destroy,
	.max_batch = CL_MAX_BATCH,
	.batch_limit = cl_batch_limit,
	.forward_batch = cl_forward_batch,
};
