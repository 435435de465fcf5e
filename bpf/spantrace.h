/* spantrace.h - what the BPF programs send to userspace: plain __u32/__u64
 * structs shared by bpf/ and user/. Append fields at the end; never reorder. */
#ifndef SPANTRACE_H
#define SPANTRACE_H

#include "spantrace/probes.h"
#include "hist.h"

/* User-defined spans (--span) are kinds USER_SPAN_BASE .. + USER_SPAN_MAX - 1,
 * named by the tracer's table (user/core/userspans.h); SPAN_KINDS sizes the
 * per-kind tables of userspace. SPAN_KIND_COUNT stays the "no span" value. */
#define USER_SPAN_BASE 32
#define USER_SPAN_MAX 16
#define SPAN_KINDS (USER_SPAN_BASE + USER_SPAN_MAX)

#define SPAN_STACK_DEPTH 16   /* per-thread nesting the kernel tracks */
#define PERF_COUNTERS_MAX 4   /* span-attributed perf counters (profile mode) */

enum event_type {
	EV_SPAN = 1,    /* a matched span_begin/op_begin .. end */
	EV_TOKEN,       /* a matched token_begin .. token_end */
	EV_REQUEST,     /* a matched request_begin .. request_end */
	EV_ALLOC,
	EV_FREE,
	EV_KV,          /* kv_usage */
	EV_KERNEL,      /* one record of a cl_batch */
	EV_SAMPLE,      /* a CPU sample tagged with the current span (profile mode) */
	EV_STEP,        /* a serving engine step: step_begin .. step_end */
	EV_EMIT,        /* one emitted token of a request (token_emit, or a CLI token_end) */
	EV_REQ_STATE,   /* a serving request queued, admitted or preempted */
	/* --opencl: calls into the OpenCL ICD loader (bpf/opencl.bpf.h) */
	EV_CL_KERNEL,   /* one clEnqueueNDRangeKernel */
	EV_CL_WAIT,     /* clFinish, clWaitForEvents, a blocking read/write/map */
	EV_CL_TRANSFER, /* clEnqueueRead/Write/MapBuffer */
	EV_CL_BUILD,    /* clBuildProgram */
	EV_CL_MEM,      /* clCreateBuffer / clReleaseMemObject */
	EV_CL_DEVTIME,  /* device times the application read (clGetEventProfilingInfo) */
	EV_TENSOR,      /* a weight tensor, from a state dump (state_tensor) */
	EV_DL_CHANGE,   /* the target's dynamic linker mapped or unmapped a library;
			 * it is stopped (SIGSTOP) until the session looks */
	EV_PROBE,       /* a probe row handled by probe_generic: its id and arguments */
	EV_HTTP,        /* --http: one HTTP request on a server's socket, at its end (bpf/http.bpf.c) */
	EV_TYPE_COUNT
};

/* Span end flags. */
#define SPAN_F_MISMATCH   1  /* end's kind/layer differed from the stack top */
#define SPAN_F_STRUCTURAL 2  /* came from span_* (not op_*) probes */
#define SPAN_F_BATCH      16 /* n_tokens, n_seqs, n_outputs hold a batch (engine profiles) */
/* A forward's enum span_launch, from its span_end (0: not told): three
 * bits above SPAN_F_BATCH, room for the five it has. */
#define SPAN_F_LAUNCH_SHIFT 5
#define SPAN_F_LAUNCH_MASK (7u << SPAN_F_LAUNCH_SHIFT)
_Static_assert(LAUNCH_COUNT <= 8, "enum span_launch outgrew SPAN_F_LAUNCH_MASK");

static inline unsigned span_launch_of(__u32 flags)
{
	return (flags & SPAN_F_LAUNCH_MASK) >> SPAN_F_LAUNCH_SHIFT;
}

/* span_event.device_ns when there is no device figure: the span launched
 * nothing, or kernels were not traced (DEVICE_NS_NONE); or its forward's
 * kernel records were lost (DEVICE_NS_LOST, counted in the drops). Only
 * userspace's join (core/devjoin.h) writes any other value. */
#define DEVICE_NS_NONE (~0ull)
#define DEVICE_NS_LOST (~0ull - 1)

struct event_header {
	__u32 type;   /* enum event_type */
	__u32 pid;    /* tgid */
	__u32 tid;
	__u32 cpu;
	__u64 ts_ns;  /* bpf_ktime_get_ns() at the event (begin for spans) */
};

struct span_event {
	struct event_header h;
	__u64 dur_ns;
	__u32 kind;         /* enum span_kind */
	__s32 layer;
	__u32 depth;        /* 0 = outermost */
	__u32 parent_kind;  /* enum span_kind, or SPAN_KIND_COUNT for none */
	__s32 parent_layer;
	__u32 flags;
	__u64 req;          /* request id in force on this thread, 0 if none */
	__u32 pos;          /* token position in force on this thread */
	__u32 ncounters;    /* how many counters[] are valid */
	__u64 counters[PERF_COUNTERS_MAX]; /* scaled deltas over the span */
	/* appended: device time (ns, device clock) of the kernels enqueued
	 * inside this span, or a DEVICE_NS_* value */
	__u64 device_ns;
	/* appended: a forward's batch, when flags has SPAN_F_BATCH */
	__u32 n_tokens;     /* tokens in the batch */
	__u32 n_seqs;       /* distinct sequences among them */
	__u32 n_outputs;    /* tokens whose output (logits) was asked for */
	__u32 pad;
};

struct token_event {
	struct event_header h;
	__u64 dur_ns;
	__u64 req;
	__u32 pos;
	__u32 token_in;
	__u32 token_out;
	__u32 pad;
};

/* A finished request: the CLI's request_begin .. request_end, or a serving
 * request from req_queued to req_finished. ts_ns is its begin (queued). */
struct request_event {
	struct event_header h;
	__u64 dur_ns;             /* end to end */
	__u64 req;
	__u32 prompt_tokens;
	__u32 generated_tokens;
	/* appended: request-level timing, 0 where a phase did not happen */
	__u64 queue_ns;           /* queued .. first admitted */
	__u64 ttft_ns;            /* queued .. first emitted token */
	__u64 prefill_ns;         /* last admission before the first token .. it */
	__u64 decode_ns;          /* first token .. finished */
	__u64 itl_p50_ns, itl_p95_ns, itl_max_ns;  /* inter-token gaps (hist.h) */
	__u32 itl_count;          /* gaps: emitted tokens after the first */
	__u32 preemptions;
	__u32 finish_reason;      /* enum finish_reason; FINISH_REASON_COUNT: not told (CLI) */
	__u32 flags;              /* REQ_F_* */
	__u32 running, waiting;   /* served: the engine's gauges once it finished */
	/* appended: the HTTP request it came in on (http.bpf.h's thread link),
	 * sock 0: none seen. The rest is written by the tracer's join
	 * (user/core/reqjoin.h), never by BPF: with from REQ_FROM_SOCKET,
	 * ts_ns, ttft_ns and dur_ns count from the request's arrival on the
	 * socket, and the engine's own are kept beside them. */
	__u64 http_sock;
	__u32 http_seq;
	__u32 from;               /* enum req_from */
	__u64 engine_ts_ns;       /* the engine's queued time */
	__u64 engine_ttft_ns, engine_dur_ns;
	__u32 http_status, http_events;
	/* appended: REQ_F_TWIN's group, an opaque number shared by the
	 * identical prompts pending with its own; the join pairs the group's
	 * requests with the group's links (reqjoin.c). Never an output. */
	__u32 twin_group;
	__u32 pad;
};

#define REQ_F_SERVED 1        /* from the serving engine's req_* probes */
#define REQ_F_HTTP_FIRST 2    /* joined with an http record that went out before it (reqjoin.h) */
#define REQ_F_TWIN 4          /* its prompt had identical twins pending: the kernel's link is a guess, */
                              /* and the join pairs the group's requests and links (reqjoin.c) */
#define REQ_F_UNLINKED 8      /* its prompt had twins, none provably its own: not linked */
#define REQ_F_CROSSED 16      /* its link's socket wrote a token before it made one: not joined */

enum req_from {
	REQ_FROM_ENGINE = 0,      /* the engine's probes alone */
	REQ_FROM_SOCKET,          /* joined with its HTTP request: times from the socket */
};

/* One engine step (step_begin .. step_end) and its batch. */
struct step_event {
	struct event_header h;    /* ts_ns: the step's begin */
	__u64 dur_ns;
	__u64 step;
	__u32 nseqs, prefill_tokens, decode_tokens, kv_used_blocks;
};

/* One emitted token. gap_ns: since the request's previous token, or since it
 * was queued for the first one (its TTFT). step: the step it came out of
 * (0 outside the serving engine). */
struct emit_event {
	struct event_header h;
	__u64 req;
	__u64 gap_ns;
	__u64 step;
	__u32 pos, token_id;
	__u32 first;              /* 1 for the request's first token */
	__u32 pad;
};

enum req_state_kind { REQ_QUEUED = 0, REQ_ADMITTED, REQ_PREEMPTED, REQ_STATE_COUNT };

/* A serving request changing state; running/waiting are the engine's gauges
 * just after it. a, b: prompt_tokens, max_tokens (queued); prefill_tokens,
 * generated (admitted); generated, blocks_freed (preempted). */
struct req_state_event {
	struct event_header h;
	__u64 req;
	__u32 state;              /* enum req_state_kind */
	__u32 a, b;
	__u32 running, waiting;
	__u32 pad;
};

struct alloc_event {
	struct event_header h;
	__u64 ptr;
	__u64 bytes;
	__u64 reserved;     /* this allocation's bytes held from the system */
	__u64 live_bytes;   /* this pool in this process, after the event */
	__u64 peak_bytes;
	__u64 reserved_bytes; /* held by the pool's live allocations, after it */
	__u32 pool;         /* enum pool_id */
	__u32 unknown;      /* free of a pointer never seen allocated; on an
			     * EV_ALLOC, 2: made before the attach (state_alloc) */
};

/* One weight tensor of a state dump (inference/base/state.h). */
struct tensor_event {
	struct event_header h;
	char name[48];
	__u32 shape[4];     /* unused dims 0 */
	__u64 bytes;
	__u32 pool;         /* enum pool_id */
	__u32 device;       /* 0 host, 1 OpenCL */
	__u32 dtype;        /* element type: tensor_dtype_names (spantrace/probes.h) */
	__u32 pad;
};

/* Any row of spantrace/probes.def whose program is probe_generic: the
 * decoder names the probe and its arguments from the row. */
/* --http: one request on an accepted TCP connection of a traced server,
 * seen on its socket (bpf/http.bpf.c). Times are CLOCK_MONOTONIC (the host
 * clock); start is when its first bytes reached the socket in the kernel
 * (HTTP_F_ARRIVAL), else when the server read them. No body leaves the
 * kernel: the method, the path up to any '?', lengths and counts. */
#define HTTP_METHOD_LEN 8
#define HTTP_PATH_LEN 64
#define HTTP_F_ARRIVAL 1   /* start_ns is the socket's arrival, not the read */
#define HTTP_F_SSE     2   /* Content-Type: text/event-stream */
#define HTTP_F_CHUNKED 4   /* Transfer-Encoding: chunked */
#define HTTP_F_LENGTH  8   /* Content-Length given */
#define HTTP_F_PATH_CUT 16 /* the path was longer than HTTP_PATH_LEN - 1 */
enum http_end {
	HTTP_END_RESPONSE = 0, /* the response's last byte was written */
	HTTP_END_CLOSE,        /* the server closed the connection first */
	HTTP_END_RESET,        /* the peer reset (a write failed, or an RST came) */
	HTTP_END_EXIT,         /* the server process exited */
	HTTP_END_UNPARSED,     /* its end could not be found: the next response began */
	HTTP_END_COUNT
};
/* A process whose sockets are traced (map http_pids): the tree it belongs
 * to, and whether its children are traced too. */
#define HTTP_W_TREE 1   /* a child it forks is traced as well */
struct http_watch {
	__u32 root;    /* the pid the user named: the tree's series carry it */
	__u32 flags;   /* HTTP_W_* */
};
/* The bit arrays beside it (global data, http.bpf.h): one bit a pid the
 * kernel can give (PID_MAX_LIMIT), one a TCP port. */
#define HTTP_PID_BITS (1u << 22)
#define HTTP_PORT_BITS 65536u

struct http_event {
	struct event_header h;
	__u64 start_ns;       /* arrival on the socket (or the read) */
	__u64 read_ns;        /* the server's first read of it */
	__u64 resp_ns;        /* the response's first byte written */
	__u64 first_event_ns; /* the first SSE data event written, 0 if none */
	__u64 last_event_ns;
	__u64 end_ns;         /* the response's end (or the close) */
	__u64 gap_sum_ns;     /* between consecutive events */
	__u64 gap_max_ns;
	__u64 req_bytes;      /* read from the socket for this request */
	__u64 resp_bytes;     /* written for its response, headers included */
	__u64 sock;           /* the socket's kernel address: a connection id */
	__u32 fd;
	__u32 status;         /* the response's status code, 0 if none was written */
	__u32 events;         /* SSE "data:" lines */
	__u32 flags;          /* HTTP_F_* */
	__u32 end;            /* enum http_end */
	__u32 seq;            /* the request's number on its connection, from 1 */
	char method[HTTP_METHOD_LEN];
	char path[HTTP_PATH_LEN];
	/* written by the tracer's join (user/core/reqjoin.h), 0 from BPF: the
	 * engine's request this one became, and its token counts */
	__u64 req;
	__u32 prompt_tokens, generated_tokens;
};

struct probe_event {
	struct event_header h;
	__u32 probe;        /* enum probe_id */
	__u32 nargs;        /* arguments read: the row's count, at most PROBE_ARGS_MAX */
	__u64 args[PROBE_ARGS_MAX];
};

struct kv_event {
	struct event_header h;
	__u64 used_bytes;
	__u64 capacity_bytes;
};

struct kernel_event {
	struct event_header h;
	__u32 kernel_id;
	__u32 queue;
	__s32 layer;
	__u32 index;        /* position within its batch */
	__u64 queued_ns, submit_ns, start_ns, end_ns; /* device clock, unchanged */
	__u64 req;
	__u32 pos;
	__u32 forward_kernels; /* records of its forward, all batches (0: not told) */
};

/* Per-CPU loss accounting, indexed by enum event_type:
 * fired[t] = events the probes produced, dropped[t] = failed reserves.
 * delivered (counted by userspace) + dropped == fired, exactly. */
struct counters {
	__u64 fired[EV_TYPE_COUNT];
	__u64 dropped[EV_TYPE_COUNT];
	__u64 span_errors;     /* unbalanced or mismatched ends */
	__u64 stack_overflow;  /* begins beyond SPAN_STACK_DEPTH */
	__u64 unknown_frees;
	__u64 alloc_table_full;
	__u64 kernels_truncated; /* cl_batch records beyond what one hit reads */
	/* profile mode (appended): */
	__u64 counters_invalid;  /* spans streamed without a counter delta
				  * (ended on another CPU, or a read failed) */
	__u64 stack_errors;      /* samples whose user or kernel stack id failed */
	/* Ends with no open span to close while the observed stack was empty,
	 * or any unmatched end before every probe was armed: spans that began
	 * before the tracer attached. Not engine errors (see span_end). */
	__u64 orphan_ends;
	/* An allocation of a pointer still on record: the old one's free was
	 * never seen; its bytes were taken out of its pool then. */
	__u64 missed_frees;
	/* Durations not aggregated because `agg` was full. */
	__u64 agg_table_full;
	/* Requests whose state could not be kept (table full): counted, not timed. */
	__u64 req_table_full;
	/* Serving probes of a request never seen queued (before the attach). */
	__u64 req_orphans;
	/* --opencl calls not recorded: a per-thread or per-buffer table was full. */
	__u64 cl_table_full;
	/* --http: requests not timed (the connection table was full), and
	 * connections whose first bytes were not HTTP/1.x (TLS among them) */
	__u64 http_table_full;
	__u64 http_unparsed;
	__u64 http_tls;
	/* --http: requests lost, by reason: read ahead and the connection
	 * closed before their response (closed), too many read ahead
	 * (pipeline), no boundary found after a request (boundary); and
	 * connections that opened with HTTP/2's preface (h2) */
	__u64 http_lost_closed;
	__u64 http_lost_pipeline;
	__u64 http_lost_boundary;
	__u64 http_h2;
	/* --http: requests read (begun) and gone from the table (done:
	 * answered, or lost with their connection); begun - done is the
	 * socket's requests in flight since the attach */
	__u64 http_begun;
	__u64 http_done;
};


/* ---- in-kernel aggregation (always on; the daemon reads only these) ----
 * Map `agg` (BPF_MAP_TYPE_HASH without preallocation, key struct agg_key,
 * value struct agg_val): one histogram (hist.h) per process, span kind and
 * layer. CPUs share an entry and add to it atomically, so its memory does
 * not grow with the CPU count; a full table counts counters.agg_table_full. */
#define AGG_MAX_ENTRIES 8192
#define AGG_KIND_TOKEN   64          /* token_begin..token_end */
#define AGG_KIND_REQUEST 65          /* a request, end to end */
#define AGG_KIND_TTFT    66          /* queued .. first token */
#define AGG_KIND_ITL     67          /* each gap between a request's tokens */
#define AGG_KIND_QUEUE   68          /* queued .. first admitted */
#define AGG_KIND_PREFILL 69          /* last admission .. first token */
#define AGG_KIND_DECODE  70          /* first token .. finished */
#define AGG_KIND_STEP    71          /* an engine step */
#define AGG_KIND_STEP_TOKENS 72      /* tokens in a step (a count, not ns) */
/* HTTP requests from the socket (http.bpf.c), timed from their arrival */
#define AGG_KIND_HTTP_REQUEST 73     /* arrival .. response end; layer = status (0: none written) */
#define AGG_KIND_HTTP_TTFT    74     /* arrival .. first SSE event written (else first byte) */
#define AGG_KIND_HTTP_ITL     75     /* each gap between a response's SSE events */
#define AGG_KIND_HTTP_EVENTS  76     /* SSE events per request (a count, not ns) */
#define AGG_KIND_REQ_UNLINKED 77     /* a request of a process whose sockets are traced that no HTTP
				      * request could be proved its own (a count) */
#define AGG_KIND_KERNEL_BASE 128     /* + enum cl_kernel_id: device end-start */
/* + enum span_kind: the device time of each span, its kernels' end-start
 * summed per span (cl_kernel_span_kind; layers: all their kernels) */
#define AGG_KIND_DEVICE_BASE 192

struct agg_key {
	__u32 pid;
	__u32 kind;     /* enum span_kind, or an AGG_KIND_* value */
	__s32 layer;    /* LAYER_NONE when not per layer */
	__u32 pad;
};

struct agg_val {
	__u64 count;
	__u64 sum_ns;
	__u64 max_ns;
	__u64 errors;   /* mismatched ends of this kind */
	__u64 buckets[HIST_BUCKETS];
};

/* Map `pools` (BPF_MAP_TYPE_HASH, key struct pool_key, value struct pool_val). */
struct pool_key {
	__u32 pid;
	__u32 pool;     /* enum pool_id */
};

struct pool_val {
	__u64 live_bytes;
	__u64 peak_bytes;
	__u64 allocs;
	__u64 frees;
	__u64 reserved_bytes;       /* see probes.def: held from the system */
	__u64 peak_reserved_bytes;
};

/* Map `serving` (BPF_MAP_TYPE_HASH, key: __u32 pid, value struct
 * serving_val): a serving engine's gauges as its last probe gave them, and
 * its request counters. */
struct serving_val {
	__u32 running, waiting;
	__u32 kv_used_blocks, kv_total_blocks;
	__u32 kv_block_size;
	__u32 gauges_seen;            /* running/waiting came from a probe: known */
	__u64 kv_block_bytes;
	__u64 requests;               /* queued (server) or begun (CLI) */
	__u64 prompt_tokens, generation_tokens;
	__u64 finished[FINISH_REASON_COUNT + 1];  /* by reason; [COUNT]: not told */
	__u64 preemptions;
	__u64 steps;
	__u64 prefix_hits;            /* prefix_hit: admissions that reused a cached prefix */
	__u64 prefix_cached_tokens;   /* ...and the tokens they did not compute */
	__u32 prefix_cache_entries, prefix_cache_blocks; /* prefix_cache's last gauges */
};

/* Map `requests` (hash, key {pid, req}): each live request's timeline and
 * its inter-token gaps, until it finishes. */
#define REQ_MAX_ENTRIES 16384

/* Map `kv` (BPF_MAP_TYPE_HASH, key: __u32 pid, value struct kv_val). */
struct kv_val {
	__u64 used_bytes;
	__u64 capacity_bytes;
	__u64 ts_ns;
};

/* Knob `stream_mode` (const volatile) and map `slow_ns` (BPF_MAP_TYPE_ARRAY,
 * SPAN_KIND_COUNT entries of __u64): in tail mode a span is streamed only when
 * dur >= slow_ns[kind], which userspace rewrites (a fixed threshold, or a
 * percentile of the histograms); nothing else is streamed then. */
enum stream_mode {
	STREAM_ALL = 0,  /* record/top/profile: every event */
	STREAM_TAIL = 1, /* daemon: only slow spans */
};

/* Knob `loaded` (const volatile): which families of programs the session
 * loads. Code that only a family's maps feed (the exit handler's scans, the
 * http programs' end of a llama.cpp request) is left to the verifier only
 * when that family is loaded: it prunes a branch on a known constant. */
#define LOADED_PROBES  1u   /* the `infer` USDT probes' */
#define LOADED_ENGINES 2u   /* the engine profiles' (bpf/engines.bpf.h) */
#define LOADED_OPENCL  4u   /* --opencl's */
#define LOADED_HTTP    8u   /* --http's */
#define LOADED_ALL     15u

/* Knob `level` (const volatile): coarse attaches only request/token/span
 * (forward, layer), alloc/free and kv_usage; detail also op_* and cl_batch. */
enum trace_level {
	LEVEL_COARSE = 0,
	LEVEL_DETAIL = 1,
};

/* Outstanding allocations tracked per {pid, ptr} (map `allocs`); past this
 * the table is full and counters.alloc_table_full counts the misses. */
#define ALLOC_MAX_ENTRIES 65536

/* ---- profile mode (spantrace profile, record --perf) ----
 * Knob `perf_ncounters` (0 = off): span begins and ends read counters
 * i < perf_ncounters of their CPU from map `perf_counters`
 * (BPF_MAP_TYPE_PERF_EVENT_ARRAY, index cpu * perf_ncounters + i, see
 * user/analysis/perfev.h); a span that ends on its begin CPU carries the deltas.
 * Knob `perf_mode` (1 = sampling): program profile_sample runs on a per-CPU
 * cpu-clock sampling event and streams EV_SAMPLE; map `proc_span` (tgid ->
 * struct proc_span) holds each process's innermost open span, which threads
 * without a span of their own (OpenMP/PoCL workers) inherit; map `stacks`
 * (BPF_MAP_TYPE_STACK_TRACE, PROFILE_STACK_DEPTH u64 ips per id). */
#define PROFILE_STACK_DEPTH 127
#define PROFILE_STACK_ENTRIES 16384

#define SAMPLE_F_INHERITED 1   /* span taken from proc_span, not the thread */

struct proc_span {
	__u32 kind;     /* enum span_kind; SPAN_KIND_COUNT = none open */
	__s32 layer;
};

struct sample_event {
	struct event_header h;   /* ts_ns = the sample */
	__u32 kind;              /* enum span_kind, SPAN_KIND_COUNT = no span */
	__s32 layer;
	__s32 ustack_id, kstack_id;  /* ids in `stacks`; < 0 = none (-errno) */
	__u32 flags;             /* SAMPLE_F_* */
	__u32 pad;
	__u64 req;
	__u32 pos, pad2;
};

/* ---- engine profiles: another engine's exported functions ----
 * user/core/engines.c holds each engine's table (function -> role); each
 * function's link carries ENGINE_COOKIE(role, span kind) and
 * bpf/engines.bpf.h acts on the role, so an engine is data, not programs. */
enum engine_role {
	FN_SPAN = 1,       /* entry .. return is a span of the cookie's kind */
	FN_DECODE,         /* a forward over a batch passed by value (batch_layout) */
	FN_SEQ_REMOVE,     /* (memory, seq, p0, p1): p1 < 0 removes to the end */
	FN_MEMORY_CLEAR,   /* (memory, data): every sequence goes */
	FN_BUF_ALLOC,      /* (type, size) -> buffer */
	FN_BUF_FROM_HOST,  /* (device, ptr, size, max) -> buffer over host memory */
	FN_BUF_USAGE,      /* (buffer, usage): what the buffer holds */
	FN_BUF_FREE,       /* (buffer) */
	FN_TENSOR_SCOPE,   /* buffers allocated inside hold a context's tensors */
	FN_TOKENIZE,       /* a span of the cookie's kind, (vocab, text, len, tokens, max, ...)
			    * -> n: a prompt arriving, matched later by its last token */
	FN_LOGITS,         /* (ctx, i): the caller samples output i of the last batch */
	FN_ACCEPT,         /* (sampler, token): the token it sampled */
	FN_COUNT
};

#define ENGINE_COOKIE(role, kind) ((__u64)(role) | (__u64)(kind) << 8)
#define ENGINE_COOKIE_ROLE(c) ((__u32)((c) & 0xff))
#define ENGINE_COOKIE_KIND(c) ((__u32)((c) >> 8))

/* Knob `engine_abi` (const volatile): how to read a profile's arguments. */
struct engine_abi {
	__u32 batch_stack_off;   /* the batch, from the stack pointer at entry */
	__u32 batch_size;
	__u32 b_n_tokens, b_token, b_embd, b_pos, b_n_seq_id, b_seq_id, b_logits; /* field offsets */
	__u32 usage_weights, usage_compute;  /* FN_BUF_USAGE values */
	__u32 max_batch_tokens;  /* tokens read per batch; beyond: not attributed */
};

/* Map `seqs` (hash, key struct seq_key): each sequence of another engine,
 * followed through its batches; a request is a sequence from its first
 * tokens until it is removed or cleared (bpf/engines.bpf.h). */
struct seq_key {
	__u32 pid;
	__s32 seq;
};

#define SEQ_MAX_ENTRIES 4096

#include "opencl_events.h"

#endif
