/* attention.h - the CPU backend's attention phase (attention.c). */
#ifndef INFER_CPU_ATTENTION_H
#define INFER_CPU_ATTENTION_H

#include "backend/cpu/state.h"

/* Attention tile t: query group t / n_heads (a run of one sequence's tokens,
 * gather_batch), head t % n_heads. Each query of a prompt would convert an
 * f16 cache's rows again, so a group of several converts them once: 36% of
 * a Q4_K stories110M pp512 was attention, half of it conversions. */
void attention_tile(const CpuState *s, int l, int t, int thread) CPU_INTERNAL;

#endif
