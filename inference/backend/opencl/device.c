/* device.c - the OpenCL backend's device: the platform and device picked,
 * the programs built (one per matrix type a model has), the kernels made,
 * the launch chosen, and the model checked against the device's local
 * memory. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend/opencl/device.h"

/* The kernels' source, embedded by the build (cl_source.o). */
extern const char infer_cl_source[];

const char *const cl_fn_names[FN_COUNT] = {
	"embed", "qkv_rope", "attention", "matmul_add", "ffn_up", "logits", "forward",
};

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

size_t staged_bytes(WeightType wtype, size_t n, size_t k)
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

int setup_device(ClState *s, const BackendOptions *opt, InferError *err)
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
