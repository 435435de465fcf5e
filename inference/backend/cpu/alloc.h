/* alloc.h - the CPU backend's create and destroy (alloc.c). */
#ifndef INFER_CPU_ALLOC_H
#define INFER_CPU_ALLOC_H

#include "backend/cpu/state.h"

int cpu_create(const Model *m, const BackendOptions *opt, void **state, InferError *err) CPU_INTERNAL;
void cpu_destroy(void *state) CPU_INTERNAL;

#endif
