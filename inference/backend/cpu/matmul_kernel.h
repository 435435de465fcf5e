/* matmul_kernel.h - what the kernels' builds (matmul_kernel.c) and the
 * pick of one (matmul.c) share: the blocking, the vector types, each
 * build's names; internal to them and to test_matmul. */
#ifndef INFER_MATMUL_KERNEL_H
#define INFER_MATMUL_KERNEL_H

#include <stddef.h>
#include <stdint.h>
#include "backend/cpu/matmul.h"

#define TOKEN_GROUP 8 /* tokens per pass over the weights */
/* Bytes ahead in a panel to prefetch F32 and F16 columns: 32 columns of
 * F32. F16 at 32 columns (1 KB) ran 11% slower out of cache. */
#define PREFETCH_BYTES 2048
/* Panels per block: at most 16 accumulators (panels x tokens), so they,
 * the tokens' broadcasts and a load fit the 32 vector registers, and at
 * least 4 chains are in flight for the multiply-add latency. */
#define MAX_PANELS 4

typedef float v16f __attribute__((vector_size(PANEL_ROWS * sizeof(float))));
typedef _Float16 v16h __attribute__((vector_size(PANEL_ROWS * sizeof(_Float16))));
typedef int32_t v16i __attribute__((vector_size(PANEL_ROWS * sizeof(int32_t))));
typedef uint32_t v16u __attribute__((vector_size(PANEL_ROWS * sizeof(uint32_t))));

/* One kernel build (matmul_kernel.c, quantize_kernel.c): matmul_rows_typed
 * and quantize_rows for one x86-64 level, named <function>_<level>. */
typedef void matmul_kernel_fn(const void *w, WeightType type, int n, int r0, int r1, const MatInput *in,
			      int batch, float *out, size_t ldo);
typedef void quantize_fn(const float *x, int batch, int n, QuantRows *out, int forms);
#define MATMUL_KERNEL(level) matmul_kernel_fn matmul_rows_typed_##level; quantize_fn quantize_rows_##level

#endif
