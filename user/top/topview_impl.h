/* topview_impl.h - the inside of struct topview, shared by the model
 * (topview.c, topview_refresh.c, topview_tree.c) and its text (format.c)
 * and by nothing else. */
#ifndef SPANTRACE_TOPVIEW_IMPL_H
#define SPANTRACE_TOPVIEW_IMPL_H

#include "analysis/procs.h"
#include "analysis/stats.h"
#include "top/topview.h"

/* One line of the table: a window plus totals, and its numbers after the
 * last refresh. Aggregate rows have no window of their own. */
struct tv_row {
	struct window win;            /* slots == NULL until the first value */
	struct window dwin;           /* device clock: the spans' joined device_ns */
	uint64_t count, last, last_ts;
	uint64_t dcount, dlost;       /* spans with device time; whose kernels were lost */
	int expanded;
	struct topview_row st; /* numbers of the last refresh */
	uint64_t wsum;         /* summed time in the window */
};

/* A layer's own span (kind[SPAN_LAYER]) and its phases. */
struct tv_layer {
	struct tv_row kind[SPAN_KINDS];
};

/* Request-level rows: their times are request phases, not spans. */
enum tv_req_row { RR_TTFT, RR_ITL, RR_QUEUE, RR_STEP, RR_HTTP_TTFT, RR_HTTP_E2E, TV_REQ_ROWS };

/* --opencl rows: host time in the loader's calls, and the device time of
 * kernels whose START and END the program read itself. */
enum tv_cl_row { CLR_ENQUEUE, CLR_WAIT, CLR_TRANSFER, CLR_BUILD, CLR_DEVICE, TV_CL_ROWS };

/* A serving request in flight (queued, or running). */
struct tv_req {
	__u32 pid;
	__u64 req;
	uint64_t queued_ns;
	uint32_t tokens;
	uint32_t preemptions;
	int running;
};

#define TOPVIEW_MAX_ACTIVE 256

enum node_type {
	N_REQUEST, N_TOKEN, N_REQ_ROW, N_FORWARD, N_SPAN, N_LAYERS, N_PHASE_AGG,
	N_LAYER, N_LAYER_PHASE, N_KERNELS, N_KERNEL, N_CL_ROW,
};

struct tv_node {
	uint8_t type;
	uint8_t depth;
	uint16_t kind;  /* span kind or kernel id */
	int32_t layer;
};

struct tv_vis {
	struct tv_node node;
	char name[32];
};

/* The RSS of procs.procs[i] as of the last topview_poll_proc(). */
struct tv_rss {
	uint64_t bytes;
	int ok;
};

struct topview {
	uint64_t slot_ns;
	unsigned nslots;
	uint64_t start_ns, base_ns, now_ns, prev_refresh_ns;

	struct tv_row request, token;
	struct tv_row req_rows[TV_REQ_ROWS];       /* enum tv_req_row */
	struct tv_row cl_rows[TV_CL_ROWS];         /* enum tv_cl_row */
	/* serving: the engine's gauges, its last step, the requests in flight */
	int serving_seen;
	int gauges_seen;            /* the engine told running/waiting (ours does; llama.cpp not) */
	uint32_t running, waiting;
	/* --http: the socket's requests in flight since the attach (the
	 * kernel's begun - done), shown where the engine cannot tell */
	int http_traced;
	uint64_t http_in_flight;
	struct step_event last_step;
	/* the prefix cache: hits and their tokens since attach; its size now */
	int prefix_seen;
	uint64_t prefix_hits, prefix_cached_tokens;
	uint32_t prefix_entries, prefix_blocks;
	struct tv_req active[TOPVIEW_MAX_ACTIVE];
	unsigned nactive;
	uint64_t active_untracked;
	struct tv_row none[SPAN_KINDS];      /* spans outside any layer */
	/* of those, how many had no parent span (sample, tokenize: they run
	 * between forwards) and how many had one: a kind is drawn under
	 * forward only when it mostly runs inside a span (runs_outside_forward) */
	uint64_t rooted[SPAN_KINDS], nested[SPAN_KINDS];
	struct tv_row kernel[KERNEL_COUNT];
	struct tv_layer *layers;
	unsigned nlayers;                          /* highest layer seen + 1 */
	struct tv_row layers_agg, phase_agg[SPAN_KINDS], kernels_agg;
	int split_layers;

	char *binary, *level;
	uint64_t dropped;
	int ended;
	struct proc_table procs;                   /* pids seen, their pools and KV */
	struct tv_rss rss[TOPVIEW_MAX_PIDS];
	uint64_t allocs, frees, unknown_frees;
	uint64_t at_attach;              /* allocations from before the attach (state dump) */
	uint64_t tensors, tensor_bytes;  /* the weight tree, from the state dump */
	uint64_t events, events_prev;
	double events_rate;
	uint64_t span_errors, bad_events, oom;
	uint64_t forwards_by_launch[LAUNCH_COUNT];  /* from the forward spans */
	uint64_t device_spans, device_lost;         /* spans with device time; lost ones */
	uint64_t invalid;                          /* records the decoder rejected */
	uint64_t first_token_ns, last_token_end_ns;
	int have_token;
	/* the serving engine's tokens are emits (no token spans): its tok/s */
	uint64_t first_emit_ns, last_emit_ns, emits;
	double tok_now, tok_avg;               /* tok/s as of the last refresh */

	struct tv_vis *vis;
	size_t nvis, cap_vis;
	size_t sel;
	struct tv_node sel_node;
	enum topview_sort sort;
	int paused, help, page;
	struct hist *scratch;
};

#endif
