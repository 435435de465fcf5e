/* backend_cl.c - placeholder; the OpenCL backend replaces this file. */
#include "backend.h"
static int cl_create(const Model *m, const BackendOptions *o, void **s, InferError *e)
{ return infer_fail(e, "opencl backend not built yet"); }
static int cl_forward(void *s, const int *t, int n, int p, float *l, InferError *e)
{ return infer_fail(e, "opencl backend not built yet"); }
static void cl_destroy(void *s) { }
const BackendOps backend_opencl = { "opencl", cl_create, cl_forward, cl_destroy, 1 };
