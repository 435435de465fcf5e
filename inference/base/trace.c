/* trace.c - the engine's request, token, span, device and serving probe
 * sites, and its self-timing.
 *
 * Each of those probes fires from one place in this file (alloc/free fire
 * from pool.c, the state dump from state.c); every fire counts in
 * infer_probe_calls, the numbers a tracer would see if it caught every hit. Durations are kept whole (not bucketed) so the
 * --stats median and p95 are exact and the tracer can be checked against
 * them. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "base/pool.h"
#include "base/state.h"
#include "base/trace.h"

/* Run totals, counted whether or not stats are enabled. */
static uint64_t n_requests, n_tokens, n_prompt_tokens, n_forward;

/* Every duration of one span kind, for exact quantiles. */
typedef struct {
	uint64_t *v;
	size_t n, cap;
	uint64_t total, max;
} Durations;

static int stats_on;
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static Durations span_durations[SPAN_KIND_COUNT];
static uint64_t spans_unrecorded; /* allocation failures or stack overflow */
static uint64_t kernel_count[KERNEL_COUNT], kernel_ns[KERNEL_COUNT];
static uint64_t forwards_by_launch[LAUNCH_COUNT];

/* What the serving engine's probes announced, for --stats. */
#define STEP_HIST_MAX 256 /* tokens per step above this share the last bucket */
typedef struct {
	uint64_t req, reason, prompt, generated, preemptions;
} FinishedReq;
typedef struct {
	uint64_t queued, admitted, preempted, finished[FINISH_REASON_COUNT];
	uint64_t steps, prefill_tokens, decode_tokens, emitted;
	uint64_t step_tokens_hist[STEP_HIST_MAX + 1], max_step_seqs;
	Durations step_ns;
	uint32_t running, waiting, peak_running, peak_waiting;
	uint32_t kv_used, kv_total, kv_peak, block_size;
	uint64_t block_bytes;
	uint64_t prefix_hits, prefix_cached_tokens;
	uint32_t prefix_entries, prefix_blocks;
	FinishedReq *done;  /* (done_cap) per finished request, in finishing order */
	size_t n_done, done_cap;
	uint64_t done_unrecorded;
} ServeStats;
static ServeStats serve_stats;
static int serve_seen; /* any serving probe site ran: write the "serving" object */

static char run_backend[32] = "unknown";
static char run_kv_type[8] = "unknown";
static int run_shape[7];

/* The open spans of this thread. */
typedef struct {
	unsigned kind;
	int layer;
	uint64_t t0;
} Frame;
static __thread Frame frames[TRACE_MAX_DEPTH];
static __thread unsigned depth;
/* How this thread's current forward runs: host unless a device backend
 * says otherwise (trace_forward_launch). */
static __thread unsigned forward_launch = LAUNCH_HOST;

void trace_forward_launch(enum span_launch launch)
{
	forward_launch = launch;
}

int trace_op_detail_wanted(void)
{
	return INFER_PROBE_ENABLED(op_begin);
}

uint64_t trace_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void trace_request_begin(uint64_t req, uint32_t prompt_tokens)
{
	__atomic_fetch_add(&n_requests, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&n_prompt_tokens, prompt_tokens, __ATOMIC_RELAXED);
	usdt_request_begin(req, prompt_tokens);
}

void trace_request_end(uint64_t req, uint32_t generated_tokens)
{
	usdt_request_end(req, generated_tokens);
}

void trace_token_begin(uint64_t req, uint32_t pos, uint32_t token_in)
{
	usdt_token_begin(req, pos, token_in);
}

void trace_token_end(uint64_t req, uint32_t pos, uint32_t token_out)
{
	__atomic_fetch_add(&n_tokens, 1, __ATOMIC_RELAXED);
	usdt_token_end(req, pos, token_out);
}

static void durations_add(Durations *d, uint64_t ns)
{
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 1024;
		uint64_t *v = realloc(d->v, cap * sizeof(*v));

		if (!v) {
			spans_unrecorded++;
			return;
		}
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n++] = ns;
	d->total += ns;
	if (ns > d->max)
		d->max = ns;
}

/* Both clocks are read just before their probe fires, as the tracer's are
 * (at its handler's entry), with the bookkeeping kept out of the window. A return from a probe to user space is a
 * scheduling point: with this order a preemption there lands in both the
 * engine's and the tracer's duration (begin) or in neither (end), instead
 * of in the tracer's alone. */
void trace_span_begin(enum span_kind kind, int layer)
{
	int structural = span_kind_is_structural(kind);

	if (kind == SPAN_FORWARD)
		__atomic_fetch_add(&n_forward, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&stats_on, __ATOMIC_RELAXED)) {
		if (depth < TRACE_MAX_DEPTH)
			frames[depth] = (Frame){ kind, layer, trace_now_ns() };
		depth++;
	}
	if (structural)
		usdt_span_begin((unsigned)kind, layer);
	else
		usdt_op_begin((unsigned)kind, layer);
}

void trace_span_end(enum span_kind kind, int layer)
{
	int timed = __atomic_load_n(&stats_on, __ATOMIC_RELAXED) && depth > 0;
	/* Clock before the probe (see trace_span_begin); the bookkeeping waits
	 * until after it, so the window between the two clocks stays tiny. */
	uint64_t now = timed ? trace_now_ns() : 0;

	if (span_kind_is_structural(kind)) {
		unsigned launch = kind == SPAN_FORWARD ? forward_launch : LAUNCH_UNKNOWN;

		usdt_span_end((unsigned)kind, layer, launch);
		if (kind == SPAN_FORWARD) {
			__atomic_fetch_add(&forwards_by_launch[launch], 1, __ATOMIC_RELAXED);
			forward_launch = LAUNCH_HOST;
		}
	} else {
		usdt_op_end((unsigned)kind, layer);
	}
	if (!timed)
		return;
	depth--;
	pthread_mutex_lock(&stats_lock);
	if (depth < TRACE_MAX_DEPTH && frames[depth].kind == (unsigned)kind &&
	    (unsigned)kind < SPAN_KIND_COUNT)
		durations_add(&span_durations[kind], now - frames[depth].t0);
	else
		spans_unrecorded++;
	pthread_mutex_unlock(&stats_lock);
}

void trace_kv_usage(uint64_t used_bytes, uint64_t capacity_bytes)
{
	state_note_kv(used_bytes, capacity_bytes);
	usdt_kv_usage(used_bytes, capacity_bytes);
}

int trace_kernels_wanted(void)
{
	return __atomic_load_n(&stats_on, __ATOMIC_RELAXED) || INFER_PROBE_ENABLED(cl_batch);
}

static void count_kernels(const struct cl_kernel_record *recs, uint32_t n)
{
	pthread_mutex_lock(&stats_lock);
	for (uint32_t i = 0; i < n; i++) {
		unsigned id = recs[i].kernel_id;

		if (id >= KERNEL_COUNT)
			continue;
		kernel_count[id]++;
		if (recs[i].end_ns >= recs[i].start_ns)
			kernel_ns[id] += recs[i].end_ns - recs[i].start_ns;
	}
	pthread_mutex_unlock(&stats_lock);
}

void trace_kernels(const struct cl_kernel_record *recs, uint32_t n)
{
	for (uint32_t done = 0; done < n;) {
		uint32_t chunk = n - done < CL_BATCH_MAX ? n - done : CL_BATCH_MAX;

		usdt_cl_batch((uint64_t)(uintptr_t)(recs + done), chunk);
		done += chunk;
	}
	if (__atomic_load_n(&stats_on, __ATOMIC_RELAXED))
		count_kernels(recs, n);
}

/* ---- the serving engine's probes ---- */

/* Under stats_lock: the gauges every lifecycle probe carries. */
static void note_gauges(uint32_t running, uint32_t waiting)
{
	ServeStats *v = &serve_stats;

	serve_seen = 1;
	v->running = running;
	v->waiting = waiting;
	state_note_gauges(running, waiting);
	if (running > v->peak_running)
		v->peak_running = running;
	if (waiting > v->peak_waiting)
		v->peak_waiting = waiting;
}

void trace_req_queued(uint64_t req, uint32_t prompt_tokens, uint32_t max_tokens,
		      uint32_t running, uint32_t waiting)
{
	__atomic_fetch_add(&n_requests, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&n_prompt_tokens, prompt_tokens, __ATOMIC_RELAXED);
	pthread_mutex_lock(&stats_lock);
	serve_stats.queued++;
	note_gauges(running, waiting);
	pthread_mutex_unlock(&stats_lock);
	usdt_req_queued(req, prompt_tokens, max_tokens, running, waiting);
}

void trace_req_admitted(uint64_t req, uint32_t prefill_tokens, uint32_t generated,
			uint32_t running, uint32_t waiting)
{
	pthread_mutex_lock(&stats_lock);
	serve_stats.admitted++;
	note_gauges(running, waiting);
	pthread_mutex_unlock(&stats_lock);
	usdt_req_admitted(req, prefill_tokens, generated, running, waiting);
}

void trace_req_preempted(uint64_t req, uint32_t generated, uint32_t blocks_freed,
			 uint32_t running, uint32_t waiting)
{
	pthread_mutex_lock(&stats_lock);
	serve_stats.preempted++;
	note_gauges(running, waiting);
	pthread_mutex_unlock(&stats_lock);
	usdt_req_preempted(req, generated, blocks_freed, running, waiting);
}

/* Under stats_lock. Bounded, so a long-running server cannot grow it forever. */
#define DONE_MAX (1u << 20)
static void record_finished(const FinishedReq *r)
{
	ServeStats *v = &serve_stats;

	if (v->n_done == v->done_cap) {
		size_t cap = v->done_cap ? v->done_cap * 2 : 256;
		FinishedReq *d = cap <= DONE_MAX ? realloc(v->done, cap * sizeof(*d)) : NULL;

		if (!d) {
			v->done_unrecorded++;
			return;
		}
		v->done = d;
		v->done_cap = cap;
	}
	v->done[v->n_done++] = *r;
}

void trace_req_finished(uint64_t req, enum finish_reason reason, uint32_t prompt_tokens,
			uint32_t generated, uint32_t preemptions, uint32_t running,
			uint32_t waiting)
{
	pthread_mutex_lock(&stats_lock);
	if ((unsigned)reason < FINISH_REASON_COUNT)
		serve_stats.finished[reason]++;
	note_gauges(running, waiting);
	record_finished(&(FinishedReq){ req, reason, prompt_tokens, generated, preemptions });
	pthread_mutex_unlock(&stats_lock);
	usdt_req_finished(req, (unsigned)reason, prompt_tokens, generated,
		     running, waiting);
}

uint64_t trace_step_begin(uint64_t step, uint32_t nseqs, uint32_t prefill_tokens,
			  uint32_t decode_tokens)
{
	/* The clock just before the probe, as for spans (see trace_span_begin). */
	uint64_t now = trace_now_ns();

	usdt_step_begin(step, nseqs, prefill_tokens, decode_tokens);
	return now;
}

void trace_step_end(uint64_t step, uint64_t begin_ns, uint32_t nseqs, uint32_t prefill_tokens,
		    uint32_t decode_tokens, uint32_t kv_used_blocks)
{
	uint64_t now = trace_now_ns();
	uint32_t tokens = prefill_tokens + decode_tokens;
	ServeStats *v = &serve_stats;

	usdt_step_end(step, begin_ns, nseqs, prefill_tokens, decode_tokens,
		     kv_used_blocks);
	pthread_mutex_lock(&stats_lock);
	v->steps++;
	v->prefill_tokens += prefill_tokens;
	v->decode_tokens += decode_tokens;
	v->step_tokens_hist[tokens < STEP_HIST_MAX ? tokens : STEP_HIST_MAX]++;
	if (nseqs > v->max_step_seqs)
		v->max_step_seqs = nseqs;
	if (stats_on)
		durations_add(&v->step_ns, now - begin_ns);
	serve_seen = 1;
	pthread_mutex_unlock(&stats_lock);
}

void trace_token_emit(uint64_t req, uint32_t pos, uint32_t token_id)
{
	__atomic_fetch_add(&n_tokens, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&serve_stats.emitted, 1, __ATOMIC_RELAXED);
	usdt_token_emit(req, pos, token_id);
}

void trace_prefix_hit(uint64_t req, uint32_t cached_tokens, uint32_t tokens, uint32_t blocks)
{
	pthread_mutex_lock(&stats_lock);
	serve_stats.prefix_hits++;
	serve_stats.prefix_cached_tokens += cached_tokens;
	pthread_mutex_unlock(&stats_lock);
	usdt_prefix_hit(req, cached_tokens, tokens, blocks);
}

void trace_prefix_cache(uint32_t entries, uint32_t blocks, uint32_t max_entries)
{
	pthread_mutex_lock(&stats_lock);
	serve_stats.prefix_entries = entries;
	serve_stats.prefix_blocks = blocks;
	pthread_mutex_unlock(&stats_lock);
	state_note_prefix_cache(entries, blocks, max_entries);
	usdt_prefix_cache(entries, blocks, max_entries);
}

void trace_kv_blocks(uint32_t used, uint32_t total, uint32_t block_size, uint64_t block_bytes)
{
	ServeStats *v = &serve_stats;

	pthread_mutex_lock(&stats_lock);
	serve_seen = 1;
	v->kv_used = used;
	v->kv_total = total;
	v->block_size = block_size;
	v->block_bytes = block_bytes;
	if (used > v->kv_peak)
		v->kv_peak = used;
	pthread_mutex_unlock(&stats_lock);
	state_note_kv_blocks(used, total, block_size, block_bytes);
	usdt_kv_blocks(used, total, block_size, block_bytes);
}

void trace_stats_enable(void)
{
	__atomic_store_n(&stats_on, 1, __ATOMIC_RELAXED);
}

void trace_stats_set_run(const char *backend, const int shape[7], const char *kv_type)
{
	snprintf(run_backend, sizeof(run_backend), "%s", backend ? backend : "unknown");
	snprintf(run_kv_type, sizeof(run_kv_type), "%s", kv_type ? kv_type : "unknown");
	memcpy(run_shape, shape, sizeof(run_shape));
}

/* ---- the --stats JSON ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank: sorted index ceil(pct/100 * n) - 1, in integers. */
static uint64_t nearest_rank(const uint64_t *sorted, size_t n, unsigned pct)
{
	size_t rank;

	if (n == 0)
		return 0;
	rank = (n * pct + 99) / 100;
	return sorted[rank ? rank - 1 : 0];
}

static void write_spans(FILE *f)
{
	fprintf(f, "\"spans\":{");
	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++) {
		Durations *d = &span_durations[k];

		if (d->n > 1) /* qsort(NULL, 0) is undefined: kinds never seen */
			qsort(d->v, d->n, sizeof(*d->v), cmp_u64);
		fprintf(f, "%s\"%s\":{\"count\":%zu,\"total_ns\":%llu,\"median_ns\":%llu,"
			"\"p95_ns\":%llu,\"max_ns\":%llu}", k ? "," : "", span_kind_name(k),
			d->n, (unsigned long long)d->total,
			(unsigned long long)nearest_rank(d->v, d->n, 50),
			(unsigned long long)nearest_rank(d->v, d->n, 95),
			(unsigned long long)d->max);
	}
	fprintf(f, "},\n");
}

static void write_pools(FILE *f)
{
	fprintf(f, "\"pools\":{");
	for (unsigned p = 0; p < POOL_COUNT; p++) {
		PoolStats s;

		pool_get_stats(p, &s);
		fprintf(f, "%s\"%s\":{\"allocs\":%llu,\"frees\":%llu,\"live_bytes\":%llu,"
			"\"peak_bytes\":%llu,\"reserved_bytes\":%llu,\"peak_reserved_bytes\":%llu}",
			p ? "," : "", pool_name(p),
			(unsigned long long)s.allocs, (unsigned long long)s.frees,
			(unsigned long long)s.live_bytes, (unsigned long long)s.peak_bytes,
			(unsigned long long)s.reserved_bytes, (unsigned long long)s.peak_reserved_bytes);
	}
	fprintf(f, "},\n");
}

static void write_opencl(FILE *f)
{
	uint64_t total = 0, ns = 0;

	for (unsigned k = 0; k < KERNEL_COUNT; k++) {
		total += kernel_count[k];
		ns += kernel_ns[k];
	}
	fprintf(f, "\"opencl\":{\"kernels\":%llu,\"device_ns\":%llu,\"per_kernel\":{",
		(unsigned long long)total, (unsigned long long)ns);
	for (unsigned k = 0; k < KERNEL_COUNT; k++)
		fprintf(f, "%s\"%s\":{\"count\":%llu,\"device_ns\":%llu}", k ? "," : "",
			cl_kernel_name(k), (unsigned long long)kernel_count[k],
			(unsigned long long)kernel_ns[k]);
	fprintf(f, "},\"forwards_by_launch\":{");
	for (unsigned l = LAUNCH_HOST; l < LAUNCH_COUNT; l++)
		fprintf(f, "%s\"%s\":%llu", l > LAUNCH_HOST ? "," : "", span_launch_name(l),
			(unsigned long long)__atomic_load_n(&forwards_by_launch[l], __ATOMIC_RELAXED));
	fprintf(f, "}},\n");
}

/* Every row of probes.def, with the calls of its fire function. */
static void write_probes(FILE *f)
{
	fprintf(f, "\"probes\":{");
	for (unsigned p = 0; p < PROBE_ID_COUNT; p++)
		fprintf(f, "%s\"%s\":%llu", p ? "," : "", probe_name(p),
			(unsigned long long)__atomic_load_n(&infer_probe_calls[p], __ATOMIC_RELAXED));
	fprintf(f, "},\n");
}

static void write_step_stats(FILE *f, Durations *d)
{
	if (d->n > 1)
		qsort(d->v, d->n, sizeof(*d->v), cmp_u64);
	fprintf(f, "\"step_ns\":{\"count\":%zu,\"total_ns\":%llu,\"median_ns\":%llu,"
		"\"p95_ns\":%llu,\"max_ns\":%llu},\n", d->n, (unsigned long long)d->total,
		(unsigned long long)nearest_rank(d->v, d->n, 50),
		(unsigned long long)nearest_rank(d->v, d->n, 95), (unsigned long long)d->max);
}

static void write_finished(FILE *f, const ServeStats *v)
{
	fprintf(f, "\"finished\":{");
	for (unsigned r = 0; r < FINISH_REASON_COUNT; r++)
		fprintf(f, "%s\"%s\":%llu", r ? "," : "", finish_reason_name(r),
			(unsigned long long)v->finished[r]);
	fprintf(f, "},\n\"per_request\":[");
	for (size_t i = 0; i < v->n_done; i++) {
		const FinishedReq *r = &v->done[i];

		fprintf(f, "%s{\"req\":%llu,\"reason\":\"%s\",\"prompt_tokens\":%llu,"
			"\"generated_tokens\":%llu,\"preemptions\":%llu}", i ? ",\n" : "",
			(unsigned long long)r->req, finish_reason_name((unsigned)r->reason),
			(unsigned long long)r->prompt, (unsigned long long)r->generated,
			(unsigned long long)r->preemptions);
	}
	fprintf(f, "],\n\"per_request_unrecorded\":%llu,\n", (unsigned long long)v->done_unrecorded);
}

/* The serving engine's counts: what its probes announced (see spantrace/probes.def). */
static void write_serving(FILE *f)
{
	ServeStats *v = &serve_stats;
	int first = 1;

	if (!serve_seen)
		return;
	fprintf(f, "\"serving\":{\"queued\":%llu,\"admitted\":%llu,\"preempted\":%llu,\n",
		(unsigned long long)v->queued, (unsigned long long)v->admitted,
		(unsigned long long)v->preempted);
	write_finished(f, v);
	fprintf(f, "\"steps\":%llu,\"prefill_tokens\":%llu,\"decode_tokens\":%llu,"
		"\"emitted_tokens\":%llu,\"max_step_seqs\":%llu,\n\"step_tokens\":{",
		(unsigned long long)v->steps, (unsigned long long)v->prefill_tokens,
		(unsigned long long)v->decode_tokens,
		(unsigned long long)__atomic_load_n(&v->emitted, __ATOMIC_RELAXED),
		(unsigned long long)v->max_step_seqs);
	for (unsigned t = 0; t <= STEP_HIST_MAX; t++)
		if (v->step_tokens_hist[t]) {
			fprintf(f, "%s\"%u\":%llu", first ? "" : ",", t,
				(unsigned long long)v->step_tokens_hist[t]);
			first = 0;
		}
	fprintf(f, "},\n");
	write_step_stats(f, &v->step_ns);
	fprintf(f, "\"running\":%u,\"waiting\":%u,\"peak_running\":%u,\"peak_waiting\":%u,"
		"\"kv_used_blocks\":%u,\"kv_total_blocks\":%u,\"kv_peak_blocks\":%u,"
		"\"block_size\":%u,\"block_bytes\":%llu,\n\"prefix_hits\":%llu,"
		"\"prefix_cached_tokens\":%llu,\"prefix_cache_entries\":%u,"
		"\"prefix_cache_blocks\":%u},\n", v->running, v->waiting,
		v->peak_running, v->peak_waiting, v->kv_used, v->kv_total, v->kv_peak,
		v->block_size, (unsigned long long)v->block_bytes,
		(unsigned long long)v->prefix_hits, (unsigned long long)v->prefix_cached_tokens,
		v->prefix_entries, v->prefix_blocks);
}

static void write_stats(FILE *f, uint64_t wall_ns)
{
	static const char *const shape_names[7] = {
		"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len",
	};
	uint64_t tokens = __atomic_load_n(&n_tokens, __ATOMIC_RELAXED);

	fprintf(f, "{\"backend\":\"%s\",\"kv_type\":\"%s\",\"model\":{", run_backend, run_kv_type);
	for (int i = 0; i < 7; i++)
		fprintf(f, "%s\"%s\":%d", i ? "," : "", shape_names[i], run_shape[i]);
	fprintf(f, "},\n");
	write_spans(f);
	write_pools(f);
	write_opencl(f);
	write_probes(f);
	write_serving(f);
	fprintf(f, "\"spans_unrecorded\":%llu,\"tokens\":%llu,\"prompt_tokens\":%llu,"
		"\"forward_passes\":%llu,\"requests\":%llu,\"wall_ns\":%llu,\"tok_per_s\":%.3f}\n",
		(unsigned long long)spans_unrecorded, (unsigned long long)tokens,
		(unsigned long long)n_prompt_tokens, (unsigned long long)n_forward,
		(unsigned long long)n_requests, (unsigned long long)wall_ns,
		wall_ns ? (double)tokens * 1e9 / (double)wall_ns : 0.0);
}

void trace_stats_print(FILE *f, uint64_t wall_ns)
{
	pthread_mutex_lock(&stats_lock);
	write_stats(f, wall_ns);
	pthread_mutex_unlock(&stats_lock);
}

int trace_stats_write(const char *path, uint64_t wall_ns, InferError *err)
{
	char tmp[4096];
	FILE *f;
	int bad;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return infer_fail(err, "%s: stats path too long", path);
	f = fopen(tmp, "w");
	if (!f)
		return infer_fail(err, "%s: cannot write stats: %s", tmp, strerror(errno));
	pthread_mutex_lock(&stats_lock);
	write_stats(f, wall_ns);
	pthread_mutex_unlock(&stats_lock);
	bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		unlink(tmp);
		return infer_fail(err, "%s: writing stats failed", tmp);
	}
	if (rename(tmp, path) < 0) {
		int e = errno;

		unlink(tmp);
		return infer_fail(err, "%s: cannot rename stats into place: %s", path, strerror(e));
	}
	return 0;
}
