/* opencl_events.h - the records `--opencl` sends (bpf/opencl.bpf.h): what
 * the uprobes on the OpenCL ICD loader (libOpenCL.so.1) saw of an unmodified
 * program's calls. Included by spantrace.h; plain __u32/__u64 only.
 *
 * What the loader's arguments cannot tell is flagged unknown, never 0: a
 * local work size the program left to the driver (NULL), a kernel created
 * before the attach (no name), device times the program never read. */
#ifndef SPANTRACE_OPENCL_EVENTS_H
#define SPANTRACE_OPENCL_EVENTS_H

#include "spantrace.h"   /* struct event_header (it includes this file after it) */

#define CL_NAME_MAX 64           /* kernel names kept, NUL included */

/* cl_kernel_event.flags */
#define CL_K_NAMED      1        /* name[] came from clCreateKernel */
#define CL_K_LOCAL      2        /* local[] was given (not NULL) */
#define CL_K_EVENT      4        /* the program asked for an event */

/* One clEnqueueNDRangeKernel. ts_ns: the call's entry. */
struct cl_kernel_event {
	struct event_header h;
	__u64 host_ns;               /* the call, entry to return */
	__u64 queue, kernel, event;  /* handles (event: 0 = none asked for) */
	__u64 global[3], local[3];   /* work sizes, work_dim of them valid */
	__u32 work_dim;
	__s32 status;                /* the call's cl_int */
	__u32 flags;                 /* CL_K_* */
	__u32 pad;
	char name[CL_NAME_MAX];
};

/* cl_call_event.op: which loader function. */
enum cl_op {
	CL_OP_FINISH = 0,
	CL_OP_WAIT_EVENTS,
	CL_OP_READ,                  /* clEnqueueReadBuffer: device to host */
	CL_OP_WRITE,                 /* clEnqueueWriteBuffer: host to device */
	CL_OP_MAP,                   /* clEnqueueMapBuffer */
	CL_OP_BUILD,                 /* clBuildProgram */
	CL_OP_COUNT
};

/* A wait (EV_CL_WAIT), a transfer (EV_CL_TRANSFER) or a build (EV_CL_BUILD).
 * A blocking read/write/map gives both a transfer and a wait record. */
struct cl_call_event {
	struct event_header h;       /* ts_ns: the call's entry */
	__u64 host_ns;               /* entry to return: how long the host was in it */
	__u64 handle;                /* queue (waits, transfers), program (build) */
	__u64 bytes;                 /* transfers; events waited for (clWaitForEvents) */
	__u32 op;                    /* enum cl_op */
	__s32 status;                /* cl_int returned (map: its errcode is not read: 0) */
	__u32 blocking;              /* read/write/map: CL_TRUE was passed */
	__u32 flags;                 /* map: cl_map_flags */
};

/* cl_mem_event.op */
enum cl_mem_op { CL_MEM_CREATE = 0, CL_MEM_RELEASE, CL_MEM_OP_COUNT };

/* One clCreateBuffer or clReleaseMemObject. live/peak: the buffer's context
 * in this process, after the call. A release frees only when the object's
 * reference count (clRetainMemObject counted) reaches zero. */
struct cl_mem_event {
	struct event_header h;
	__u64 mem, context, bytes;
	__u64 live_bytes, peak_bytes;
	__u32 op;                    /* enum cl_mem_op */
	__u32 freed;                 /* release: the last reference went */
	__u32 unknown;               /* release of a buffer made before the attach */
	__s32 status;                /* create: 0, or -1 when it returned NULL */
};

/* cl_devtime_event.mask: which of the four times the program read. */
#define CL_T_QUEUED 1
#define CL_T_SUBMIT 2
#define CL_T_START  4
#define CL_T_END    8

/* The device times of one enqueued kernel, as the program itself read them
 * with clGetEventProfilingInfo (sent once it has read all four, or at its
 * clReleaseEvent). A time not in mask was never read: unknown. */
struct cl_devtime_event {
	struct event_header h;       /* ts_ns: the kernel's enqueue */
	__u64 event, kernel, queue;
	__u64 t[4];                  /* queued, submit, start, end (device clock) */
	__u32 mask;                  /* CL_T_* */
	__u32 named;                 /* name[] is known */
	char name[CL_NAME_MAX];
};

/* Kinds of the `agg` map (spantrace.h) --opencl fills, per process, so the
 * daemon and top need nothing streamed: host time in the loader's calls,
 * and the device time (END - START) of kernels whose times the program read. */
#define AGG_KIND_CL_ENQUEUE  80      /* clEnqueueNDRangeKernel, host */
#define AGG_KIND_CL_WAIT     81      /* clFinish, clWaitForEvents, blocking transfers */
#define AGG_KIND_CL_TRANSFER 82      /* read/write/map buffer calls, host */
#define AGG_KIND_CL_BUILD    83      /* clBuildProgram */
#define AGG_KIND_CL_DEVICE   84      /* kernel device time, when the program read it */

/* Map `cl_ctxmem` (hash, key {pid, context}): device memory per context. */
struct cl_ctx_key {
	__u32 pid;
	__u32 pad;
	__u64 context;
};

struct cl_ctx_val {
	__u64 live_bytes, peak_bytes;
	__u64 creates, releases, frees;
};

#endif
