/* backend.h - the interface both forward-pass implementations provide.
 *
 * A forward call processes a batch of n consecutive tokens at positions
 * pos..pos+n-1 (n > 1 is a prefill batch) and leaves the logits of the last
 * position. Each phase processes the whole batch, so one forward fires one
 * `layer` span per layer whatever n is. The engine wraps each call in the
 * `forward` span; backends fire embed, layer, the layer phases, final_norm
 * and logits (see probes.h and trace.h). */
#ifndef INFER_BACKEND_H
#define INFER_BACKEND_H

#include "error.h"
#include "model.h"

typedef struct {
	int cl_platform; /* -1: the first platform with a device */
	int cl_device;   /* -1: the first device of that platform */
	int threads;     /* cpu backend: 0 means OpenMP's default */
} BackendOptions;

typedef struct {
	const char *name;
	/* Builds the backend state for m (which must outlive it). */
	int (*create)(const Model *m, const BackendOptions *opt, void **state,
		      InferError *err);
	/* logits: vocab_size floats, host memory, written before return. */
	int (*forward)(void *state, const int *tokens, int n, int pos,
		       float *logits, InferError *err);
	void (*destroy)(void *state);
	/* Most tokens one forward call accepts (the prefill batch limit). */
	int max_batch;
} BackendOps;

extern const BackendOps backend_cpu;
extern const BackendOps backend_opencl;

/* Returns the backend named name ("cpu", "opencl") or NULL. */
const BackendOps *backend_find(const char *name);

#endif
