/* phases.h - the phases of a forward and their tiles (phases.c). */
#ifndef INFER_CPU_PHASES_H
#define INFER_CPU_PHASES_H

#include "backend/cpu/state.h"

/* Tile t of phase ph; in is the phase's input when it is a product. */
void run_tile(const CpuState *s, const Phase *ph, int t, const MatInput *in, int thread) CPU_INTERNAL;
/* Tiles of each phase for n tokens, n_out of them wanting logits. */
int phase_tiles(const CpuState *s, enum phase_kind kind) CPU_INTERNAL;
/* The quantized forms (QUANT_*) the products of a phase take: both for a
 * layer that mixes Q8_0 or Q4_0 with the k-quants. */
int phase_quant_forms(const CpuState *s, const Phase *ph) CPU_INTERNAL;
/* The input of a product phase: (rows, n) floats; NULL for the others. */
const float *phase_input(const CpuState *s, enum phase_kind kind, int *rows, int *n) CPU_INTERNAL;
/* The forward's phases: each layer's in order, then the classifier's. */
void plan_phases(CpuState *s) CPU_INTERNAL;

#endif
