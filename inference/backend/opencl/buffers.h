/* buffers.h - the OpenCL backend's device buffers (buffers.c). */
#ifndef INFER_CL_BUFFERS_H
#define INFER_CL_BUFFERS_H

#include "backend/opencl/cl_state.h"

/* Uploads the model's weights and the RoPE table, and makes the KV cache,
 * the activations and the forward kernel's counters: every buffer. */
int upload_model(ClState *s, const Model *m, InferError *err) CL_INTERNAL;

#endif
