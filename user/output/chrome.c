/* chrome.c - streaming Chrome trace event JSON writer (see chrome.h). */
#include "output/chrome.h"
#include "core/grow.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <search.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A thread's spans are written once its outermost span ends; a thread whose
 * outermost end never comes (lost event) is flushed at this many. */
#define PENDING_FLUSH_AT 65536

struct pending_thread {
	__u32 pid, tid;
	struct span_event *spans;
	size_t n, cap;
};

struct meta_entry {
	char *key, *value;
};

struct chrome_writer {
	FILE *f;
	uint64_t max_events, written, truncated, metadata;
	uint64_t lost;              /* records it could not keep (out of memory) */
	uint64_t flows;             /* request -> step arrows so far: their ids */
	int truncation_warned;
	int64_t device_offset_ns;
	const char *const *counter_names;
	unsigned ncounter_names;
	struct pending_thread *threads;
	size_t nthreads, threads_cap;
	void *named;                /* tsearch tree of named tracks: pid << 32 | tid (tid 0: the process) */
	struct meta_entry *meta;
	size_t nmeta;
};

/* ---- low-level output ---- */

static void put_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* ns as microseconds with exactly three decimals: no float rounding. */
static void put_us(FILE *f, uint64_t ns)
{
	fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

/* Starts one traceEvents element; 0 if it should be skipped (cap reached).
 * Metadata is exempt from the cap so every written track keeps its name. */
static int begin_event(struct chrome_writer *cw, int is_metadata)
{
	if (!is_metadata && cw->written >= cw->max_events) {
		cw->truncated++;
		if (!cw->truncation_warned) {
			fprintf(stderr, "spantrace: chrome trace reached --max-events %" PRIu64
				"; further events are dropped and counted in otherData.truncated\n",
				cw->max_events);
			cw->truncation_warned = 1;
		}
		return 0;
	}
	if (cw->written + cw->metadata > 0)
		fputs(",\n", cw->f);
	if (is_metadata)
		cw->metadata++;
	else
		cw->written++;
	return 1;
}

/* Tracks are looked up per event, and a serving run has one per request:
 * a tree, not a list. The key is the pointer value itself. */
static int track_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return x < y ? -1 : x > y;
}

_Static_assert(sizeof(void *) >= sizeof(uint64_t), "track keys are stored as pointer values");

static void *track_key(__u32 pid, __u32 tid)
{
	return (void *)(uintptr_t)((uint64_t)pid << 32 | tid);
}

static int track_named(struct chrome_writer *cw, __u32 pid, __u32 tid)
{
	return tfind(track_key(pid, tid), &cw->named, track_cmp) != NULL;
}

static int remember_track(struct chrome_writer *cw, __u32 pid, __u32 tid)
{
	return tsearch(track_key(pid, tid), &cw->named, track_cmp) ? 0 : -1;
}

static void write_name_metadata(struct chrome_writer *cw, const char *what, __u32 pid,
				__u32 tid, const char *name)
{
	begin_event(cw, 1);
	fprintf(cw->f, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":",
		what, pid, tid);
	put_json_string(cw->f, name);
	fputs("}}", cw->f);
}

/* comm of /proc/PID[/task/TID], or "" when gone or unreadable. */
static void read_comm(__u32 pid, __u32 tid, char *buf, size_t len)
{
	char path[64];
	if (tid)
		snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	buf[0] = '\0';
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

int chrome_process_name(struct chrome_writer *cw, __u32 pid, const char *name)
{
	if (track_named(cw, pid, 0))
		return 0;
	if (remember_track(cw, pid, 0))
		return -1;
	write_name_metadata(cw, "process_name", pid, 0, name);
	return 0;
}

int chrome_thread_name(struct chrome_writer *cw, __u32 pid, __u32 tid, const char *name)
{
	if (tid == 0 || track_named(cw, pid, tid))
		return 0;
	if (remember_track(cw, pid, tid))
		return -1;
	write_name_metadata(cw, "thread_name", pid, tid, name);
	return 0;
}

/* Names the process and thread from /proc the first time they are seen. */
static int ensure_named(struct chrome_writer *cw, __u32 pid, __u32 tid)
{
	char comm[64], name[96];
	if (!track_named(cw, pid, 0)) {
		read_comm(pid, 0, comm, sizeof(comm));
		if (comm[0])
			snprintf(name, sizeof(name), "%s (%u)", comm, pid);
		else
			snprintf(name, sizeof(name), "pid %u", pid);
		if (chrome_process_name(cw, pid, name))
			return -1;
	}
	if (tid && !track_named(cw, pid, tid)) {
		read_comm(pid, tid, comm, sizeof(comm));
		if (comm[0])
			snprintf(name, sizeof(name), "%s (%u)", comm, tid);
		else
			snprintf(name, sizeof(name), "tid %u", tid);
		if (chrome_thread_name(cw, pid, tid, name))
			return -1;
	}
	return 0;
}

/* ---- open / configure ---- */

struct chrome_writer *chrome_open(const char *path, uint64_t max_events, char *err, size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
		return NULL;
	}
	struct chrome_writer *cw = calloc(1, sizeof(*cw));
	FILE *f = cw ? fdopen(fd, "w") : NULL;
	if (!f) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno ? errno : ENOMEM));
		free(cw);
		close(fd);
		return NULL;
	}
	cw->f = f;
	cw->max_events = max_events ? max_events : CHROME_DEFAULT_MAX_EVENTS;
	fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", f);
	return cw;
}

void chrome_set_counter_names(struct chrome_writer *cw, const char *const *names, unsigned n)
{
	cw->counter_names = names;
	cw->ncounter_names = n;
}

void chrome_set_device_offset(struct chrome_writer *cw, int64_t offset_ns)
{
	cw->device_offset_ns = offset_ns;
}

int chrome_add_meta(struct chrome_writer *cw, const char *key, const char *value)
{
	struct meta_entry *m = realloc(cw->meta, (cw->nmeta + 1) * sizeof(*m));
	if (!m)
		return -1;
	cw->meta = m;
	char *k = strdup(key), *v = strdup(value);
	if (!k || !v) {
		free(k);
		free(v);
		return -1;
	}
	cw->meta[cw->nmeta++] = (struct meta_entry){ k, v };
	return 0;
}

/* ---- spans: held per thread until the outermost one ends ---- */

static struct pending_thread *pending_thread(struct chrome_writer *cw, __u32 pid, __u32 tid)
{
	for (size_t i = 0; i < cw->nthreads; i++)
		if (cw->threads[i].pid == pid && cw->threads[i].tid == tid)
			return &cw->threads[i];
	if (ARRAY_GROW(cw->threads, cw->threads_cap, cw->nthreads))
		return NULL;
	struct pending_thread *t = &cw->threads[cw->nthreads++];
	*t = (struct pending_thread){ .pid = pid, .tid = tid };
	return t;
}

/* Begin time ascending; on ties the longer (the parent) first. */
static int span_order(const void *a, const void *b)
{
	const struct span_event *x = a, *y = b;
	if (x->h.ts_ns != y->h.ts_ns)
		return x->h.ts_ns < y->h.ts_ns ? -1 : 1;
	if (x->dur_ns != y->dur_ns)
		return x->dur_ns > y->dur_ns ? -1 : 1;
	return x->depth < y->depth ? -1 : x->depth > y->depth;
}

static void write_span(struct chrome_writer *cw, const struct span_event *ev)
{
	if (!begin_event(cw, 0))
		return;
	FILE *f = cw->f;
	fprintf(f, "{\"ph\":\"X\",\"cat\":\"span\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":",
		span_kind_name(ev->kind), ev->h.pid, ev->h.tid);
	put_us(f, ev->h.ts_ns);
	fputs(",\"dur\":", f);
	put_us(f, ev->dur_ns);
	fprintf(f, ",\"args\":{\"clock\":\"host\",\"layer\":%d,\"req\":%llu,\"pos\":%u,\"depth\":%u",
		ev->layer, (unsigned long long)ev->req, ev->pos, ev->depth);
	/* the device time of its kernels, drawn on the queue's track */
	if (ev->device_ns == DEVICE_NS_LOST)
		fputs(",\"device_ns\":null", f);
	else if (ev->device_ns != DEVICE_NS_NONE)
		fprintf(f, ",\"device_ns\":%llu", (unsigned long long)ev->device_ns);
	if (ev->kind == SPAN_FORWARD)
		fprintf(f, ",\"launch\":\"%s\"", span_launch_name(span_launch_of(ev->flags)));
	if (ev->flags & SPAN_F_BATCH)   /* another engine's forward: its batch */
		fprintf(f, ",\"n_tokens\":%u,\"n_seqs\":%u,\"n_outputs\":%u", ev->n_tokens, ev->n_seqs,
			ev->n_outputs);
	if (ev->flags & SPAN_F_MISMATCH)
		fputs(",\"mismatch\":true", f);
	unsigned n = ev->ncounters < PERF_COUNTERS_MAX ? ev->ncounters : PERF_COUNTERS_MAX;
	if (n) {
		fputs(",\"counters\":{", f);
		for (unsigned i = 0; i < n; i++) {
			char fallback[24];
			const char *name = fallback;
			if (i < cw->ncounter_names)
				name = cw->counter_names[i];
			else
				snprintf(fallback, sizeof(fallback), "counter%u", i);
			if (i)
				fputc(',', f);
			put_json_string(f, name);
			fprintf(f, ":%llu", (unsigned long long)ev->counters[i]);
		}
		fputc('}', f);
	}
	fputs("}}", f);
}

static void flush_thread(struct chrome_writer *cw, struct pending_thread *t)
{
	qsort(t->spans, t->n, sizeof(*t->spans), span_order);
	for (size_t i = 0; i < t->n; i++)
		write_span(cw, &t->spans[i]);
	t->n = 0;
}

int chrome_span(struct chrome_writer *cw, const struct span_event *ev)
{
	if (ensure_named(cw, ev->h.pid, ev->h.tid))
		return -1;
	struct pending_thread *t = pending_thread(cw, ev->h.pid, ev->h.tid);
	if (!t)
		return -1;
	if (ARRAY_GROW(t->spans, t->cap, t->n))
		return -1;
	t->spans[t->n++] = *ev;
	if (ev->depth == 0 || t->n >= PENDING_FLUSH_AT)
		flush_thread(cw, t);
	return 0;
}

/* ---- kernels, tokens, counters ---- */

static uint64_t device_to_host(const struct chrome_writer *cw, uint64_t device_ns)
{
	int64_t host = (int64_t)device_ns + cw->device_offset_ns;
	return host > 0 ? (uint64_t)host : 0;
}

int chrome_kernel(struct chrome_writer *cw, const struct kernel_event *ev)
{
	__u32 tid = CHROME_QUEUE_TID_BASE + ev->queue;
	if (ensure_named(cw, ev->h.pid, 0))
		return -1;
	if (!track_named(cw, ev->h.pid, tid)) {
		char name[48];
		snprintf(name, sizeof(name), "OpenCL queue %u (device clock)", ev->queue);
		if (chrome_thread_name(cw, ev->h.pid, tid, name))
			return -1;
	}
	if (!begin_event(cw, 0))
		return 0;
	uint64_t dur = ev->end_ns > ev->start_ns ? ev->end_ns - ev->start_ns : 0;
	uint64_t wait = ev->start_ns > ev->submit_ns ? ev->start_ns - ev->submit_ns : 0;
	fprintf(cw->f, "{\"ph\":\"X\",\"cat\":\"opencl\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":",
		cl_kernel_name(ev->kernel_id), ev->h.pid, tid);
	put_us(cw->f, device_to_host(cw, ev->start_ns));
	fputs(",\"dur\":", cw->f);
	put_us(cw->f, dur);
	unsigned op = cl_kernel_span_kind(ev->kernel_id);
	fprintf(cw->f, ",\"args\":{\"clock\":\"device\",\"op\":\"%s\",\"layer\":%d,\"req\":%llu,"
		"\"pos\":%u,\"index\":%u,\"submit_to_start_ns\":%llu,\"host_tid\":%u}}",
		op < SPAN_KIND_COUNT ? span_kind_name(op) : cl_kernel_name(ev->kernel_id), ev->layer,
		(unsigned long long)ev->req, ev->pos, ev->index, (unsigned long long)wait, ev->h.tid);
	return 0;
}

int chrome_token(struct chrome_writer *cw, const struct token_event *ev)
{
	if (ensure_named(cw, ev->h.pid, ev->h.tid))
		return -1;
	if (!begin_event(cw, 0))
		return 0;
	fprintf(cw->f, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"token\",\"name\":\"token\",\"pid\":%u,\"tid\":%u,\"ts\":",
		ev->h.pid, ev->h.tid);
	put_us(cw->f, ev->h.ts_ns + ev->dur_ns);
	fprintf(cw->f, ",\"args\":{\"req\":%llu,\"pos\":%u,", (unsigned long long)ev->req, ev->pos);
	if (events_capture_tokens())
		fprintf(cw->f, "\"token_in\":%u,\"token_out\":%u,", ev->token_in, ev->token_out);
	fprintf(cw->f, "\"dur_ns\":%llu}}", (unsigned long long)ev->dur_ns);
	return 0;
}

int chrome_counter(struct chrome_writer *cw, __u32 pid, __u64 ts_ns, const char *name,
		   const char *series, uint64_t value)
{
	if (ensure_named(cw, pid, 0))
		return -1;
	if (!begin_event(cw, 0))
		return 0;
	fputs("{\"ph\":\"C\",\"name\":", cw->f);
	put_json_string(cw->f, name);
	fprintf(cw->f, ",\"pid\":%u,\"ts\":", pid);
	put_us(cw->f, ts_ns);
	fputs(",\"args\":{", cw->f);
	put_json_string(cw->f, series);
	fprintf(cw->f, ":%" PRIu64 "}}", value);
	return 0;
}

int chrome_kv(struct chrome_writer *cw, const struct kv_event *ev)
{
	return chrome_counter(cw, ev->h.pid, ev->h.ts_ns, "kv_cache bytes", "used",
			      ev->used_bytes);
}

int chrome_alloc(struct chrome_writer *cw, const struct alloc_event *ev)
{
	/* A free of a pointer allocated before attach carries no pool state. */
	if (ev->unknown == 1)
		return 0;
	char name[48];
	snprintf(name, sizeof(name), "live bytes %s", pool_name(ev->pool));
	return chrome_counter(cw, ev->h.pid, ev->h.ts_ns, name, "bytes", ev->live_bytes);
}

/* ---- the serving engine: a steps track, one track per request, flows ---- */

static int ensure_track(struct chrome_writer *cw, __u32 pid, __u32 tid, const char *name)
{
	if (ensure_named(cw, pid, 0))
		return -1;
	return track_named(cw, pid, tid) ? 0 : chrome_thread_name(cw, pid, tid, name);
}

static __u32 request_tid(__u64 req)
{
	return CHROME_REQUEST_TID_BASE + (__u32)(req % CHROME_REQUEST_TIDS);
}

static int ensure_request_track(struct chrome_writer *cw, __u32 pid, __u64 req)
{
	char name[48];

	snprintf(name, sizeof(name), "request %llu", (unsigned long long)req);
	return ensure_track(cw, pid, request_tid(req), name);
}

/* A complete event on a synthetic track; the caller writes its args and "}}". */
static int open_slice(struct chrome_writer *cw, const char *cat, const char *name, __u32 pid, __u32 tid,
		      uint64_t ts_ns, uint64_t dur_ns)
{
	if (!begin_event(cw, 0))
		return 0;
	fprintf(cw->f, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", cat);
	put_json_string(cw->f, name);
	fprintf(cw->f, ",\"pid\":%u,\"tid\":%u,\"ts\":", pid, tid);
	put_us(cw->f, ts_ns);
	fputs(",\"dur\":", cw->f);
	put_us(cw->f, dur_ns);
	return 1;
}

int chrome_step(struct chrome_writer *cw, const struct step_event *ev)
{
	char name[96];

	if (ensure_track(cw, ev->h.pid, CHROME_STEP_TID, "engine steps"))
		return -1;
	snprintf(name, sizeof(name), "step %llu: %u seqs, %u prefill + %u decode tok",
		 (unsigned long long)ev->step, ev->nseqs, ev->prefill_tokens, ev->decode_tokens);
	if (!open_slice(cw, "step", name, ev->h.pid, CHROME_STEP_TID, ev->h.ts_ns, ev->dur_ns))
		return 0;
	fprintf(cw->f, ",\"args\":{\"step\":%llu,\"nseqs\":%u,\"prefill_tokens\":%u,\"decode_tokens\":%u,"
		"\"kv_used_blocks\":%u}}", (unsigned long long)ev->step, ev->nseqs, ev->prefill_tokens,
		ev->decode_tokens, ev->kv_used_blocks);
	return 0;
}

static void request_phase(struct chrome_writer *cw, const struct request_event *ev, const char *phase,
			  uint64_t begin_ns, uint64_t dur_ns)
{
	if (dur_ns && open_slice(cw, "request", phase, ev->h.pid, request_tid(ev->req), begin_ns, dur_ns))
		fprintf(cw->f, ",\"args\":{\"req\":%llu}}", (unsigned long long)ev->req);
}

/* The request, then its phases inside it: queued (to its first admission),
 * prefill (its last admission before the first token, to that token) and
 * decode (the first token to the finish). Joined with its HTTP request
 * (core/reqjoin.h), it runs from the arrival on the socket to the
 * response's end: `server` before the engine had it, `respond` after. */
int chrome_request(struct chrome_writer *cw, const struct request_event *ev)
{
	int joined = ev->from == REQ_FROM_SOCKET;   /* t0: its arrival on the socket */
	uint64_t t0 = ev->h.ts_ns, engine_t0 = joined ? ev->engine_ts_ns : t0;
	uint64_t engine_ttft = joined ? ev->engine_ttft_ns : ev->ttft_ns, first = engine_t0 + engine_ttft;
	char name[48];

	if (ensure_request_track(cw, ev->h.pid, ev->req))
		return -1;
	snprintf(name, sizeof(name), "request %llu", (unsigned long long)ev->req);
	if (open_slice(cw, "request", name, ev->h.pid, request_tid(ev->req), t0, ev->dur_ns))
		fprintf(cw->f, ",\"args\":{\"req\":%llu,\"prompt_tokens\":%u,\"generated_tokens\":%u,"
			"\"finish_reason\":\"%s\",\"preemptions\":%u,\"ttft_ns\":%llu,\"queue_ns\":%llu,"
			"\"from\":\"%s\"}}",
			(unsigned long long)ev->req, ev->prompt_tokens, ev->generated_tokens,
			finish_reason_name(ev->finish_reason), ev->preemptions,
			(unsigned long long)ev->ttft_ns, (unsigned long long)ev->queue_ns, joined ? "socket" : "engine");
	if (joined)   /* arrived, not yet the engine's: the server's own time */
		request_phase(cw, ev, "server", t0, engine_t0 - t0);
	request_phase(cw, ev, "queued", engine_t0, ev->queue_ns);
	if (engine_ttft) {
		request_phase(cw, ev, "prefill", first - ev->prefill_ns, ev->prefill_ns);
		request_phase(cw, ev, "decode", first, ev->decode_ns);
	}
	if (joined && t0 + ev->dur_ns > engine_t0 + ev->engine_dur_ns)   /* the response's last bytes */
		request_phase(cw, ev, "respond", engine_t0 + ev->engine_dur_ns,
			      t0 + ev->dur_ns - (engine_t0 + ev->engine_dur_ns));
	return 0;
}

static void write_flow(struct chrome_writer *cw, const char *ph, __u32 pid, __u32 tid, uint64_t ts_ns,
		       uint64_t id)
{
	begin_event(cw, 0);
	fprintf(cw->f, "{\"ph\":\"%s\",\"cat\":\"ride\",\"name\":\"ride\",\"id\":%llu,\"pid\":%u,\"tid\":%u,"
		"\"bp\":\"e\",\"ts\":", ph, (unsigned long long)id, pid, tid);
	put_us(cw->f, ts_ns);
	fputs("}", cw->f);
}

/* A flow arrow from the request to the step its token came out of: both
 * ends at the emit, which lies inside the step (the engine emits before
 * step_end). Both ends or neither, so no arrow is left dangling. */
int chrome_emit(struct chrome_writer *cw, const struct emit_event *ev)
{
	if (!ev->step)
		return 0;
	if (ensure_request_track(cw, ev->h.pid, ev->req) ||
	    ensure_track(cw, ev->h.pid, CHROME_STEP_TID, "engine steps"))
		return -1;
	if (cw->written + 2 > cw->max_events) {
		begin_event(cw, 0);
		begin_event(cw, 0);
		return 0;
	}
	cw->flows++;
	write_flow(cw, "s", ev->h.pid, request_tid(ev->req), ev->h.ts_ns, cw->flows);
	write_flow(cw, "f", ev->h.pid, CHROME_STEP_TID, ev->h.ts_ns, cw->flows);
	return 0;
}

/* ---- HTTP requests from the socket (--http): a track per connection ---- */

static __u32 http_tid(uint64_t conn)
{
	return CHROME_HTTP_TID_BASE + (__u32)(conn % CHROME_HTTP_TIDS);
}

static void http_phase(struct chrome_writer *cw, const struct http_event *ev, __u32 tid, const char *phase,
		       uint64_t begin_ns, uint64_t end_ns)
{
	if (end_ns > begin_ns && open_slice(cw, "http", phase, ev->h.pid, tid, begin_ns, end_ns - begin_ns))
		fputs(",\"args\":{}}", cw->f);
}

/* The request from its arrival to its response's end, with inside it:
 * unread (arrival to the server's first read), to first token (arrival to
 * the first SSE event or byte written) and events (first to last event). */
int chrome_http(struct chrome_writer *cw, const struct http_event *ev)
{
	uint64_t conn = http_conn_id(ev->sock), first = http_first_token_ns(ev);
	__u32 tid = http_tid(conn);
	char name[HTTP_METHOD_LEN + HTTP_PATH_LEN + 2];

	snprintf(name, sizeof(name), "http conn %llu", (unsigned long long)conn);
	if (ensure_track(cw, ev->h.pid, tid, name))
		return -1;
	snprintf(name, sizeof(name), "%.*s %.*s", HTTP_METHOD_LEN, ev->method, HTTP_PATH_LEN, ev->path);
	if (open_slice(cw, "http", name, ev->h.pid, tid, ev->start_ns, ev->end_ns - ev->start_ns))
		fprintf(cw->f, ",\"args\":{\"status\":%u,\"stream\":%s,\"events\":%u,\"ttft_ns\":%llu,"
			"\"end\":\"%s\",\"seq\":%u,\"clock\":\"host\"}}", ev->status,
			ev->flags & HTTP_F_SSE ? "true" : "false", ev->events,
			(unsigned long long)(first ? first - ev->start_ns : 0), http_end_name(ev->end), ev->seq);
	http_phase(cw, ev, tid, "unread", ev->start_ns, ev->read_ns);
	if (first)
		http_phase(cw, ev, tid, "to first token", ev->start_ns, first);
	if (ev->events > 1)
		http_phase(cw, ev, tid, "events", ev->first_event_ns, ev->last_event_ns);
	return 0;
}

/* The session's handlers: a record the writer cannot keep (out of memory)
 * is counted and reported at close; it does not stop the tracing. */
static int keep(struct chrome_writer *cw, int rc)
{
	if (rc)
		cw->lost++;
	return 0;
}

static int on_span(void *cw, const struct span_event *e) { return keep(cw, chrome_span(cw, e)); }
static int on_token(void *cw, const struct token_event *e) { return keep(cw, chrome_token(cw, e)); }
static int on_kernel(void *cw, const struct kernel_event *e) { return keep(cw, chrome_kernel(cw, e)); }
static int on_kv(void *cw, const struct kv_event *e) { return keep(cw, chrome_kv(cw, e)); }
static int on_alloc(void *cw, const struct alloc_event *e) { return keep(cw, chrome_alloc(cw, e)); }
static int on_step(void *cw, const struct step_event *e) { return keep(cw, chrome_step(cw, e)); }
static int on_request(void *cw, const struct request_event *e) { return keep(cw, chrome_request(cw, e)); }
static int on_emit(void *cw, const struct emit_event *e) { return keep(cw, chrome_emit(cw, e)); }
static int on_http(void *cw, const struct http_event *e) { return keep(cw, chrome_http(cw, e)); }

const struct event_handlers chrome_handlers = {
	.span = on_span,
	.token = on_token,
	.kernel = on_kernel,
	.kv = on_kv,
	.alloc = on_alloc,
	.free = on_alloc,
	.step = on_step,
	.request = on_request,
	.emit = on_emit,
	.http = on_http,
};

int chrome_write_record(struct chrome_writer *cw, const void *data, size_t size)
{
	struct event_sink sink = { &chrome_handlers, cw };
	uint64_t lost = cw->lost;
	enum event_verdict v;

	event_dispatch(data, size, &sink, 1, &v);
	return v == EVENT_OK && cw->lost == lost ? 0 : -1;
}

uint64_t chrome_events_written(const struct chrome_writer *cw)
{
	return cw->written;
}

uint64_t chrome_events_truncated(const struct chrome_writer *cw)
{
	return cw->truncated;
}

/* ---- close ---- */

static void write_other_data(struct chrome_writer *cw)
{
	FILE *f = cw->f;
	fprintf(f, "\n],\n\"otherData\":{\"tool\":\"spantrace\",\"clock\":\"CLOCK_MONOTONIC\","
		"\"device_clock\":\"host CLOCK_MONOTONIC_RAW + device_offset_ns\","
		"\"device_offset_ns\":%" PRId64 ",\"max_events\":%" PRIu64
		",\"events\":%" PRIu64 ",\"truncated\":%" PRIu64,
		cw->device_offset_ns, cw->max_events, cw->written, cw->truncated);
	for (size_t i = 0; i < cw->nmeta; i++) {
		fputc(',', f);
		put_json_string(f, cw->meta[i].key);
		fputc(':', f);
		put_json_string(f, cw->meta[i].value);
	}
	fputs("}}\n", f);
}

static void no_free(void *key)
{
	(void)key;   /* keys are values, not allocations */
}

static void free_writer(struct chrome_writer *cw)
{
	for (size_t i = 0; i < cw->nthreads; i++)
		free(cw->threads[i].spans);
	for (size_t i = 0; i < cw->nmeta; i++) {
		free(cw->meta[i].key);
		free(cw->meta[i].value);
	}
	free(cw->threads);
	tdestroy(cw->named, no_free);
	free(cw->meta);
	free(cw);
}

int chrome_close(struct chrome_writer *cw, char *err, size_t errlen)
{
	if (!cw)
		return 0;
	for (size_t i = 0; i < cw->nthreads; i++)
		flush_thread(cw, &cw->threads[i]);
	write_other_data(cw);
	int failed = ferror(cw->f);
	int saved = errno;
	if (fclose(cw->f) != 0) {
		failed = 1;
		saved = errno;
	}
	if (cw->truncated)
		fprintf(stderr, "spantrace: chrome trace truncated: %" PRIu64
			" events dropped after --max-events %" PRIu64 "\n",
			cw->truncated, cw->max_events);
	uint64_t lost = cw->lost;
	free_writer(cw);
	if (failed) {
		snprintf(err, errlen, "writing the chrome trace failed: %s", strerror(saved));
		return -1;
	}
	if (lost) {
		snprintf(err, errlen, "chrome trace: out of memory, %" PRIu64 " records left out", lost);
		return -1;
	}
	return 0;
}
