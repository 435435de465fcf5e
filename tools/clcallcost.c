/* clcallcost.c - what one OpenCL loader call costs, for tools/bench_opencl.sh:
 * times N calls each of clFinish on an idle queue (traced: a wait record)
 * and clGetEventProfilingInfo (traced: probes, no record) and prints the
 * mean ns per call. Run it under `record --opencl` and without. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
	cl_platform_id plat;
	cl_device_id dev;
	cl_int err;
	cl_ulong t;
	double t0;

	if (n <= 0 || clGetPlatformIDs(1, &plat, NULL) || clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL))
		return fprintf(stderr, "clcallcost: no OpenCL device\n"), 1;
	cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
	cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
	cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
	char host[64] = { 0 };
	cl_event ev;

	if (err || clEnqueueWriteBuffer(q, b, CL_TRUE, 0, sizeof(host), host, 0, NULL, &ev))
		return fprintf(stderr, "clcallcost: setup failed\n"), 1;
	clFinish(q);
	t0 = now_ns();
	for (long i = 0; i < n; i++)
		clFinish(q);
	printf("clFinish ns/call: %.0f\n", (now_ns() - t0) / n);
	t0 = now_ns();
	for (long i = 0; i < n; i++)
		clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof(t), &t, NULL);
	printf("clGetEventProfilingInfo ns/call: %.0f\n", (now_ns() - t0) / n);
	clReleaseEvent(ev);
	clReleaseMemObject(b);
	clReleaseCommandQueue(q);
	clReleaseContext(ctx);
	return 0;
}
