/* device.h - the OpenCL backend's device and programs (device.c). */
#ifndef INFER_CL_DEVICE_H
#define INFER_CL_DEVICE_H

#include "backend/opencl/cl_state.h"

/* Local memory of n staged tokens of width k (00_common.cl, stage_tokens):
 * the floats and a scale per token, or for Q8_0 and Q4_0 a scale per token
 * and the values quantized: k int8s and a float and an int per block of
 * 32 (the k-quants: a float per 256 and an int per 16). */
size_t staged_bytes(WeightType wtype, size_t n, size_t k) CL_INTERNAL;
/* Picks the platform and device (opt's, or the first that has one), the
 * launch, checks that the model fits the device, and makes the context,
 * the queue, the programs and the kernels. */
int setup_device(ClState *s, const BackendOptions *opt, InferError *err) CL_INTERNAL;

#endif
