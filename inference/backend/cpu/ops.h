/* ops.h - the CPU backend's operations outside the products and attention
 * (ops.c). */
#ifndef INFER_CPU_OPS_H
#define INFER_CPU_OPS_H

#include "backend/cpu/state.h"

/* o = x normalized by its root mean square (plus eps), times weight. */
void rmsnorm(float *o, const float *x, const float *weight, int size, float eps) CPU_INTERNAL;
/* RoPE on one head of q, and of k unless NULL, with the precomputed table
 * (cs: the position's row): the same rotation as run.c, whose angles come
 * from the same libm calls. */
void rope_head(float *q, float *k, int head_size, const float *cs) CPU_INTERNAL;
/* The table rope reads: (cos, sin) of pos * theta^(-2i / head_size) per
 * position and pair (theta: the model's base, llama2.c's 10000), computed
 * as run.c computes each angle. */
void fill_rope_table(CpuState *s) CPU_INTERNAL;
/* x[b][r0..r1) += d[b][r0..r1) for every token: a tile's residual add. */
void residual_rows(float *x, const float *d, int width, int r0, int r1, int n) CPU_INTERNAL;
/* Row `token` of the embedding as floats, from its stored type. */
void embed_row(float *out, const Tensor *emb, int token, int dim) CPU_INTERNAL;
/* The conversion attention takes f16 rows through: F16C's where the CPU
 * has it. */
halves_fn *halves_for_cpu(void) CPU_INTERNAL;

#endif
