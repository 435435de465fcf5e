/* devjoin.h - the one join of spans and device kernel records.
 *
 * A device backend's op spans time the host's enqueue; the work is in the
 * kernel records (EV_KERNEL) its forward reports after the sync. This stage
 * sits between the ring buffer and every consumer: it holds a thread's
 * nested spans until their forward's span arrives (spans stream at their
 * end, so a forward's record follows its children's and its kernels'),
 * then writes each span's device_ns and hands them on in arrival order.
 *
 * The join key is (pid, tid, req, pos, layer, kernel id): a kernel belongs
 * to the span of kind cl_kernel_span_kind(id) with its layer, in the
 * forward whose time window holds the kernel batch; a layer span gets all
 * its layer's kernels, the forward all of them. A forward whose records
 * did not all arrive (forward_kernels says how many there were) gives its
 * device spans DEVICE_NS_LOST, never a partial sum. Spans that launched
 * nothing, and every span when kernels are not traced, stay DEVICE_NS_NONE. */
#ifndef SPANTRACE_DEVJOIN_H
#define SPANTRACE_DEVJOIN_H

#include <stddef.h>
#include <stdint.h>
#include "spantrace.h"

/* Where joined records go: the session's dispatch to its consumers. */
typedef int (*devjoin_deliver_fn)(void *ctx, const void *data, size_t size);

struct devjoin_thread;

struct devjoin {
	int kernels_traced;          /* cl_batch attached: device spans expect kernels */
	devjoin_deliver_fn deliver;
	void *ctx;
	struct devjoin_thread *threads;
	size_t nthreads, cap_threads;
	uint64_t forwards_joined;    /* forwards given device times */
	uint64_t forwards_lost;      /* forwards whose kernel records were not all read */
	uint64_t spans_unjoined;     /* held spans handed on without their forward */
};

void devjoin_init(struct devjoin *j, int kernels_traced, devjoin_deliver_fn deliver, void *ctx);
/* One ring-buffer record: handed on now, or held until its forward ends.
 * Returns the first non-zero deliver return. */
int devjoin_feed(struct devjoin *j, const void *data, size_t size);
/* Hands on everything still held (the session's end). */
int devjoin_flush(struct devjoin *j);
void devjoin_free(struct devjoin *j);

#endif
