/* enqueue.h - a forward's kernels enqueued (enqueue.c). */
#ifndef INFER_CL_ENQUEUE_H
#define INFER_CL_ENQUEUE_H

#include "backend/opencl/cl_state.h"

/* After the sync: device timestamps of every kernel, one cl_batch. */
void report_kernels(ClState *s) CL_INTERNAL;
/* Releases the forward's kernel events. */
void release_events(ClState *s) CL_INTERNAL;
/* Everything up to the logits kernel, enqueued without waiting (a forward
 * launch: the whole forward, a kernel no op span stands for; a layers
 * launch: the embedding, then the layers in such a kernel). */
int enqueue_forward(ClState *s, int n, int n_out, InferError *err) CL_INTERNAL;
/* The final norm and classifier (phases and layers launches), then the one
 * sync, in its own span: reading the logits waits for every kernel of the
 * forward. */
int finish_forward(ClState *s, int n_out, float *logits, InferError *err) CL_INTERNAL;

#endif
