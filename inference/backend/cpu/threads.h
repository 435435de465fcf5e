/* threads.h - a forward's phases run on the threads (threads.c). */
#ifndef INFER_CPU_THREADS_H
#define INFER_CPU_THREADS_H

#include "backend/cpu/state.h"

/* Runs the phases of the batch gather_batch laid out, on s->threads
 * threads where the work is worth waking them. */
void run_forward(CpuState *s) CPU_INTERNAL;

#endif
