/* test_cl_build.c - a kernel source that fails to compile gives an error
 * with the compiler's log (through the same build path backend create
 * uses), and the real kernels build. Exit 77 without an OpenCL platform. */
#include <stdio.h>
#include <string.h>
#include "base/error.h"

/* Under SANITIZE=1, LeakSanitizer's exit-time scan crashes (SIGSEGV in its
 * tracer) on a bogus dynamic-TLS range left by PoCL's dlopen'd libraries
 * when this binary also links the tracer's libraries; skipping TLS roots
 * avoids it while heap, stack and globals are still scanned. */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
	return "use_tls=0";
}

/* backend/opencl/device.c's test hook; src NULL builds the engine's own
 * kernels. (The test does not name infer_cl_source itself: a copy
 * relocation would freeze its size at link time.) */
int infer_cl_build_check(const char *src, InferError *err);

int main(void)
{
	InferError err = { "" };
	const char *bad = "__kernel void broken(__global float *x) { x[0] = undefined_name; }";

	if (infer_cl_build_check(bad, &err) == 0) {
		fprintf(stderr, "FAIL: a broken kernel built\n");
		return 1;
	}
	if (strstr(err.msg, "no OpenCL platform")) {
		printf("%s\n", err.msg);
		return 77;
	}
	if (!strstr(err.msg, "kernel build failed") || !strstr(err.msg, "undefined_name")) {
		fprintf(stderr, "FAIL: error lacks the build log: %s\n", err.msg);
		return 1;
	}
	printf("ok bad source: %.200s\n", err.msg);
	if (infer_cl_build_check(NULL, &err) != 0) {
		fprintf(stderr, "FAIL: the engine's kernels do not build: %s\n", err.msg);
		return 1;
	}
	printf("ok: bad kernel source reported with its build log; engine kernels build\n");
	return 0;
}
