/* cl_layout.h - what the OpenCL host code and the kernels must agree on
 * beyond kernel arguments. Plain C that is also OpenCL C: the build puts it
 * ahead of the kernel sources (inference/backend/opencl/kernels). */
#ifndef INFER_CL_LAYOUT_H
#define INFER_CL_LAYOUT_H

/* The forward kernel's woff table: offsets (floats) into the one weights
 * buffer, W_GLOBAL entries, then W_PER_LAYER for each layer. */
enum { W_EMB, W_RMS_FINAL, W_CLS, W_GLOBAL };
enum { W_RMS_ATT, W_RMS_FFN, W_QKV, W_WO, W_W13, W_W2, W_PER_LAYER };

/* The forward kernel's phases: embed, 5 a layer, logits. Its sync buffer
 * has a claim and a done counter per phase and an exit counter, each
 * SYNC_STRIDE ints (a cache line) from the next. */
#define LAYER_PHASES 5
#define FORWARD_PHASES(n_layers) (LAYER_PHASES * (n_layers) + 2)
#define SYNC_STRIDE 16
#define SYNC_INTS(n_layers) ((2 * FORWARD_PHASES(n_layers) + 1) * SYNC_STRIDE)

#endif
