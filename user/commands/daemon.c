/* daemon.c - `spantrace daemon`: attach once to every process of a binary,
 * let the kernel aggregate (histograms, pools, KV), read the maps every
 * interval into a snapshot that /metrics renders, and stream only spans at
 * or above a threshold into rotating JSONL files.
 *
 * Threads: the main thread owns the session, the maps and the rotator; the
 * HTTP thread only renders the latest snapshot, swapped under `lock`. */
#include "commands/commands.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stddef.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands/daemon_config.h"
#include "commands/daemon_host.h"
#include "core/runloop.h"
#include "output/jsonl.h"
#include "output/httpd.h"
#include "output/outbuf.h"
#include "analysis/rssattr.h"
#include "analysis/stats.h"
#include "output/prom.h"
#include "output/otlp.h"
#include "output/otlp_metrics.h"
#include "core/clock.h"
#include "output/rotate.h"
#include "core/fleet.h"
#include "core/grow.h"
#include "core/maps.h"
#include "core/session.h"
#include "core/statereq.h"
#include "core/target.h"

extern char **environ;

#define THRESH_WINDOW 12            /* intervals a percentile threshold looks back over */
#define DEAD_GRACE_MIN_NS (30ull * 1000000000ull)
#define DAEMON_RINGBUF_KB 1024      /* only slow spans travel through it */
#define POLL_MS 100
#define HOST_SCAN_NS (500ull * 1000000ull) /* host mode: a /proc pass this often */

/* A process seen in the maps. */
struct proc_track {
	uint32_t pid;
	int alive;
	uint64_t prev_tokens;
	uint64_t dead_since_ns;     /* 0 while alive */
	uint64_t start_ticks;       /* tells a reused pid; 0: gone when first seen */
	int start_seen;             /* start_ticks was read */
	double tokens_per_second;
};

/* Bucket counts (hist.h) per span kind. */
struct kind_counts {
	__u64 b[SPAN_KIND_COUNT][HIST_BUCKETS];
};

struct daemon {
	struct daemon_config cfg;
	struct target target;
	struct session s;
	int session_open;
	struct rotator *rot;
	struct httpd *http;
	struct outbuf line;                 /* memory only: formats one tail span */

	pthread_mutex_t lock;
	struct metrics_snapshot snap;   /* guarded by lock */

	struct proc_track *procs;
	size_t nprocs, procs_cap;
	uint64_t last_tick_ns, dead_grace_ns;
	struct daemon_host *host;    /* --all-engines, else NULL */

	/* --slow-pct: per-kind bucket deltas of the last THRESH_WINDOW ticks */
	struct kind_counts cum, prev_cum, retired, window[THRESH_WINDOW];
	struct hist merged;          /* scratch: one kind over the window */
	unsigned wslot;
	uint64_t slow_ns[SPAN_KIND_COUNT];

	struct otlp_exporter *otlp;  /* --otlp: metrics each tick */
	uint64_t otlp_start_ns;      /* Unix ns: the cumulative series' start */
	char hostname[256];         /* OTLP resource host.name */
};

/* ---- tail capture: the ring buffer carries only slow spans ---- */

/* In tail mode the kernel streams only slow spans. */
static int on_slow_span(void *ctx, const struct span_event *e)
{
	struct daemon *d = ctx;

	if (!d->rot)
		return 0;
	d->line.len = d->line.line_start = 0;
	if (jsonl_handlers.span(&d->line, e) < 0 || !d->line.len)
		return 0;
	rotate_write(d->rot, d->line.buf, d->line.len);  /* a drop is counted there */
	return 0;
}

static const struct event_handlers tail_handlers = { .span = on_slow_span };

static int line_buffer_init(struct outbuf *ob)
{
	memset(ob, 0, sizeof(*ob));
	ob->fd = -1;
	ob->cap = 2 * OB_LINE_MAX;   /* ob_begin never needs to flush */
	ob->buf = malloc(ob->cap);
	return ob->buf ? 0 : -1;
}

/* ---- thresholds ---- */

static void write_thresholds(struct daemon *d)
{
	if (maps_set_slow_thresholds(&d->s, d->slow_ns))
		st_err("cannot set the slow-span threshold: %s", strerror(errno));
}

static void initial_thresholds(struct daemon *d)
{
	/* No directory, or a percentile not measured yet: capture nothing. */
	uint64_t v = UINT64_MAX;
	if (d->rot && d->cfg.slow_ms >= 0)
		v = (uint64_t)llround(d->cfg.slow_ms * 1e6);
	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++)
		d->slow_ns[k] = v;
}

/* Samples a window needs before its percentile is trusted: ten beyond it. */
static uint64_t min_samples(double pct)
{
	double n = 10.0 / (1.0 - pct / 100.0);
	return n < 20 ? 20 : (uint64_t)ceil(n);
}

/* The threshold is the upper edge of the bucket that holds the nearest-rank
 * percentile, not an interpolation: a tail budget of (1-q) must hold, and
 * at most (1-q) of the window lies at or above that edge (t_daemon_tail). */
static void update_pct_thresholds(struct daemon *d, const struct metrics_snapshot *s)
{
	struct kind_counts *cum = &d->cum, *slot = &d->window[d->wslot];

	*cum = d->retired;
	for (size_t i = 0; i < s->naggs; i++)
		if (s->aggs[i].kind < SPAN_KIND_COUNT)
			for (unsigned b = 0; b < HIST_BUCKETS; b++)
				cum->b[s->aggs[i].kind][b] += s->aggs[i].buckets[b];
	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++)
		for (unsigned b = 0; b < HIST_BUCKETS; b++)
			slot->b[k][b] = cum->b[k][b] >= d->prev_cum.b[k][b] ? cum->b[k][b] - d->prev_cum.b[k][b] : 0;
	d->prev_cum = *cum;
	d->wslot = (d->wslot + 1) % THRESH_WINDOW;

	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++) {
		/* the window's counts of kind k, merged into cum's row k */
		for (unsigned b = 0; b < HIST_BUCKETS; b++) {
			cum->b[k][b] = 0;
			for (unsigned w = 0; w < THRESH_WINDOW; w++)
				cum->b[k][b] += d->window[w].b[k][b];
		}
		hist_load(&d->merged, cum->b[k], 0, 0);
		if (d->merged.count >= min_samples(d->cfg.slow_pct))
			d->slow_ns[k] = hist_quantile_edge(&d->merged, d->cfg.slow_pct / 100.0);
	}
	write_thresholds(d);
}

/* ---- reading the maps ---- */

/* One map read into a snapshot array: the array's capacity travels along. */
struct map_read {
	struct daemon *d;
	struct metrics_snapshot *s;
	size_t cap;
};

static int agg_entry(void *ctx, const struct agg_key *k, const struct agg_val *v)
{
	struct map_read *r = ctx;

	if (ARRAY_GROW(r->s->aggs, r->cap, r->s->naggs))
		return -1;
	struct metrics_agg *a = &r->s->aggs[r->s->naggs++];
	a->pid = k->pid;
	a->kind = k->kind;
	a->layer = k->layer;
	a->count = v->count;
	a->sum_ns = v->sum_ns;
	a->max_ns = v->max_ns;
	a->errors = v->errors;
	memcpy(a->buckets, v->buckets, sizeof(a->buckets));
	return 0;
}

static int pool_entry(void *ctx, const struct pool_key *k, const struct pool_val *v)
{
	struct map_read *r = ctx;

	if (ARRAY_GROW(r->s->pools, r->cap, r->s->npools))
		return -1;
	r->s->pools[r->s->npools++] = (struct metrics_pool){ k->pid, k->pool, v->live_bytes, v->peak_bytes,
						  v->allocs, v->frees, v->reserved_bytes };
	return 0;
}

static int kv_entry(void *ctx, __u32 pid, const struct kv_val *v)
{
	struct map_read *r = ctx;

	if (ARRAY_GROW(r->s->kvs, r->cap, r->s->nkvs))
		return -1;
	r->s->kvs[r->s->nkvs++] = (struct metrics_kv){ pid, v->used_bytes, v->capacity_bytes };
	return 0;
}

static int clmem_entry(void *ctx, const struct cl_ctx_key *k, const struct cl_ctx_val *v)
{
	struct map_read *r = ctx;

	if (ARRAY_GROW(r->s->clmems, r->cap, r->s->nclmems))
		return -1;
	r->s->clmems[r->s->nclmems++] = (struct metrics_clmem){ k->pid, k->context, v->live_bytes, v->peak_bytes,
							     v->creates, v->frees };
	return 0;
}

static int serving_entry(void *ctx, __u32 pid, const struct serving_val *v)
{
	struct map_read *r = ctx;

	if (ARRAY_GROW(r->s->servings, r->cap, r->s->nservings))
		return -1;
	r->s->servings[r->s->nservings++] = (struct metrics_serving){ pid, *v };
	return 0;
}

static int read_maps(struct daemon *d, struct metrics_snapshot *s)
{
	struct map_read aggs = { d, s, 0 }, pools = { d, s, 0 }, kvs = { d, s, 0 }, serving = { d, s, 0 };
	struct map_read clmems = { d, s, 0 };

	return maps_foreach_agg(&d->s, agg_entry, &aggs) || maps_foreach_pool(&d->s, pool_entry, &pools) ||
	       maps_foreach_kv(&d->s, kv_entry, &kvs) || maps_foreach_serving(&d->s, serving_entry, &serving) ||
	       maps_foreach_clmem(&d->s, clmem_entry, &clmems) ? -1 : 0;
}

static void map_memory_entry(void *ctx, const char *name, uint64_t bytes)
{
	struct map_read *r = ctx;

	if (ARRAY_GROW(r->s->maps, r->cap, r->s->nmaps))
		return; /* the series is missing from this scrape */
	r->s->maps[r->s->nmaps++] = (struct metrics_map_mem){ name, bytes };
}

/* ---- processes: throughput, and forgetting the dead ---- */

static struct proc_track *track(struct daemon *d, uint32_t pid)
{
	for (size_t i = 0; i < d->nprocs; i++)
		if (d->procs[i].pid == pid)
			return &d->procs[i];
	if (ARRAY_GROW(d->procs, d->procs_cap, d->nprocs))
		return NULL;
	d->procs[d->nprocs] = (struct proc_track){ .pid = pid, .alive = 1 };
	return &d->procs[d->nprocs++];
}

static void note_pid(struct daemon *d, uint32_t pid)
{
	size_t before = d->nprocs;
	char err[256];

	if (!track(d, pid)) {
		st_err("out of memory tracking pid %u", pid);
	} else if (d->nprocs > before) {
		st_info("daemon: new process %u", pid);
		if (session_http_watch(&d->s, (pid_t)pid, err, sizeof(err)))
			st_err("daemon: %s", err);
	}
}

static uint64_t tokens_of(const struct metrics_snapshot *s, uint32_t pid)
{
	uint64_t n = 0;
	for (size_t i = 0; i < s->naggs; i++)
		if (s->aggs[i].pid == pid && s->aggs[i].kind == AGG_KIND_TOKEN)
			for (unsigned b = 0; b < HIST_BUCKETS; b++)
				n += s->aggs[i].buckets[b];
	return n;
}

static int pid_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int pid_in(const uint32_t *pids, size_t n, uint32_t pid)
{
	return bsearch(&pid, pids, n, sizeof(pid), pid_cmp) != NULL;
}

/* Keeps the elements of arr (n of them, elem bytes each, the pid first)
 * whose pid is not in pids. */
_Static_assert(offsetof(struct metrics_agg, pid) == 0 && offsetof(struct metrics_pool, pid) == 0 &&
		       offsetof(struct metrics_kv, pid) == 0 && offsetof(struct metrics_serving, pid) == 0 &&
		       offsetof(struct metrics_clmem, pid) == 0,
	       "keep_others reads the pid at the start of each snapshot element");
static size_t keep_others(void *arr, size_t n, size_t elem, const uint32_t *pids, size_t npids)
{
	char *a = arr;
	size_t w = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t pid;
		memcpy(&pid, a + i * elem, sizeof(pid));
		if (pid_in(pids, npids, pid))
			continue;
		if (w != i)
			memcpy(a + w * elem, a + i * elem, elem);
		w++;
	}
	return w;
}

/* Removes long-dead processes' entries (pids sorted) from the maps and the
 * snapshot, all in one pass: a burst of short-lived engines must not cost a
 * walk of the maps per exit. Their span buckets stay in `retired` so
 * percentile windows do not jump. */
static void forget_pids(struct daemon *d, struct metrics_snapshot *s, const uint32_t *pids, size_t n)
{
	if (!n)
		return;
	maps_forget_pids(&d->s, pids, n);
	for (size_t i = 0; i < n; i++)
		session_http_unwatch(&d->s, (pid_t)pids[i]);
	for (size_t i = 0; i < s->naggs; i++) {
		const struct metrics_agg *a = &s->aggs[i];
		if (a->kind < SPAN_KIND_COUNT && pid_in(pids, n, a->pid))
			for (unsigned b = 0; b < HIST_BUCKETS; b++)
				d->retired.b[a->kind][b] += a->buckets[b];
	}
	s->naggs = keep_others(s->aggs, s->naggs, sizeof(*s->aggs), pids, n);
	s->npools = keep_others(s->pools, s->npools, sizeof(*s->pools), pids, n);
	s->nkvs = keep_others(s->kvs, s->nkvs, sizeof(*s->kvs), pids, n);
	s->nservings = keep_others(s->servings, s->nservings, sizeof(*s->servings), pids, n);
	s->nclmems = keep_others(s->clmems, s->nclmems, sizeof(*s->clmems), pids, n);
	for (size_t i = 0; i < n; i++) {
		if (d->host)
			daemon_host_drop(d->host, pids[i]);
		st_info("daemon: process %u exited; its series are gone from /metrics", pids[i]);
	}
}

/* Host mode found a new engine under a pid it had labelled: the old
 * process's series end now, so the two never add up. */
static void forget_reused(void *ctx, uint32_t pid)
{
	struct daemon *d = ctx;
	size_t w = 0;

	pthread_mutex_lock(&d->lock);
	forget_pids(d, &d->snap, &pid, 1);
	pthread_mutex_unlock(&d->lock);
	for (size_t i = 0; i < d->nprocs; i++)
		if (d->procs[i].pid != pid)
			d->procs[w++] = d->procs[i];
	d->nprocs = w;
}

/* The process's RSS, split by what its pools reserve (analysis/rssattr.h). */
static void rss_of(const struct metrics_snapshot *s, struct metrics_proc *pp)
{
	uint64_t reserved[POOL_COUNT] = { 0 };
	struct rss_split sp;

	for (size_t i = 0; i < s->npools; i++)
		if (s->pools[i].pid == pp->pid && s->pools[i].pool < POOL_COUNT)
			reserved[s->pools[i].pool] = s->pools[i].reserved_bytes;
	if (rss_split_read((pid_t)pp->pid, reserved, &sp))
		return;
	pp->rss_ok = 1;
	pp->rss_pools = sp.pools;
	pp->rss_other = sp.other;
}

/* Whether the tracked process still runs, by its start time: kill(pid, 0)
 * alone takes any later process that got the pid for it, and a thousand
 * short-lived engines recycle pids fast. A process gone when first seen is
 * dead (start 0). A different live process under the pid: the old one's
 * series end now rather than merge with the new one's; returns -1 then. */
static int still_running(struct daemon *d, struct metrics_snapshot *s, struct proc_track *p)
{
	uint64_t start = fleet_start_ticks((pid_t)p->pid);

	if (!p->start_seen) {
		p->start_seen = 1;
		p->start_ticks = start;
	}
	if (!start)
		return 0;
	if (start == p->start_ticks)
		return 1;
	if (p->start_ticks)
		st_info("daemon: pid %u was reused by a new process", p->pid);
	forget_pids(d, s, &p->pid, 1);
	return -1;
}

static int update_procs(struct daemon *d, struct metrics_snapshot *s, uint64_t now, double dt)
{
	for (size_t i = 0; i < s->naggs; i++)
		note_pid(d, s->aggs[i].pid);
	for (size_t i = 0; i < s->npools; i++)
		note_pid(d, s->pools[i].pid);
	for (size_t i = 0; i < s->nkvs; i++)
		note_pid(d, s->kvs[i].pid);
	for (size_t i = 0; i < s->nservings; i++)
		note_pid(d, s->servings[i].pid);
	for (size_t i = 0; i < s->nclmems; i++)
		note_pid(d, s->clmems[i].pid);

	size_t w = 0, nexpired = 0;
	uint32_t *expired = malloc((d->nprocs ? d->nprocs : 1) * sizeof(*expired));
	if (!expired)
		return -1;
	for (size_t i = 0; i < d->nprocs; i++) {
		struct proc_track *p = &d->procs[i];
		uint64_t tokens = tokens_of(s, p->pid);
		p->tokens_per_second = dt > 0 && tokens >= p->prev_tokens ? (tokens - p->prev_tokens) / dt : 0;
		p->prev_tokens = tokens;
		int run = still_running(d, s, p);
		if (run < 0)
			continue;   /* its old series are gone; the new process is noted next tick */
		p->alive = run;
		if (p->alive)
			p->dead_since_ns = 0;
		else if (!p->dead_since_ns)
			p->dead_since_ns = now;
		if (!p->alive && now - p->dead_since_ns >= d->dead_grace_ns) {
			expired[nexpired++] = p->pid;
			continue;
		}
		d->procs[w++] = *p;
	}
	d->nprocs = w;
	qsort(expired, nexpired, sizeof(*expired), pid_cmp);
	forget_pids(d, s, expired, nexpired);
	free(expired);

	size_t alive = 0;
	for (size_t i = 0; i < d->nprocs; i++)
		alive += d->procs[i].alive;
	s->procs = calloc(alive ? alive : 1, sizeof(*s->procs));
	if (!s->procs)
		return -1;
	for (size_t i = 0; i < d->nprocs; i++)
		if (d->procs[i].alive) {
			struct metrics_proc *pp = &s->procs[s->nprocs++];
			*pp = (struct metrics_proc){ d->procs[i].pid, d->procs[i].tokens_per_second, 0, 0, 0 };
			rss_of(s, pp);
		}
	return 0;
}

/* ---- one interval ---- */

static void fill_tail(struct daemon *d, struct metrics_snapshot *s)
{
	struct rotate_stats rs;
	s->has_tail = d->rot != NULL;
	if (!d->rot)
		return;
	rotate_get_stats(d->rot, &rs);
	s->tail = (struct metrics_tail){ rs.lines_written, rs.lines_dropped, rs.bytes_written,
				      rs.files_deleted, rs.disk_bytes, { 0 } };
	memcpy(s->tail.slow_ns, d->slow_ns, sizeof(d->slow_ns));
}

static void publish(struct daemon *d, struct metrics_snapshot *fresh)
{
	pthread_mutex_lock(&d->lock);
	struct metrics_snapshot old = d->snap;
	d->snap = *fresh;
	pthread_mutex_unlock(&d->lock);
	metrics_snapshot_free(&old);
}

/* One OTLP metrics request per tick; a failure is counted by otlp.c. */
static void export_otlp(struct daemon *d, const struct metrics_snapshot *s)
{
	uint64_t points = 0;
	char *body;

	if (!d->otlp)
		return;
	body = otlp_metrics_body(s, d->otlp_start_ns, (uint64_t)clock_read_ns(CLOCK_REALTIME), d->hostname, &points);
	otlp_enqueue(d->otlp, body, points);
}

static void tick(struct daemon *d, uint64_t now)
{
	struct metrics_snapshot s = { .binary = d->target.shown };
	int engine = d->target.engine ? d->target.engine : d->s.engine;

	/* host mode labels each process (its meta); else the target's engine */
	if (!d->cfg.all_engines && engine)
		s.engine = engine == ENGINE_NONE ? "http" : engine_name(engine);
	double dt = d->last_tick_ns ? (now - d->last_tick_ns) / 1e9 : 0;
	d->last_tick_ns = now;

	struct map_read mem = { d, &s, 0 };

	maps_foreach_memory(&d->s, map_memory_entry, &mem);
	if (read_maps(d, &s) || update_procs(d, &s, now, dt) || (d->host && daemon_host_labels(d->host, &s))) {
		st_err("out of memory reading the maps; keeping the previous snapshot");
		metrics_snapshot_free(&s);
		return;
	}
	maps_read_counters(&d->s, &s.counters);
	memcpy(s.ringbuf_delivered, d->s.delivered, sizeof(s.ringbuf_delivered));
	if (d->rot && d->cfg.slow_ms < 0)
		update_pct_thresholds(d, &s);
	fill_tail(d, &s);
	export_otlp(d, &s);
	publish(d, &s);
	/* Each tick frees the last snapshot's arrays; without this the freed
	 * pages (and those of the BTF parsed at load) come back into RSS as
	 * the arrays land elsewhere, and a daemon watching many short-lived
	 * processes grows towards its load-time peak. */
	malloc_trim(0);
}

/* The serving gauges are read at the scrape, not at the last tick, so they
 * are the engine's running/waiting as of its latest lifecycle probe. A read
 * that fails keeps the tick's values. */
static void refresh_serving(struct daemon *d)
{
	struct metrics_snapshot fresh = { 0 };
	struct map_read r = { d, &fresh, 0 };

	if (maps_foreach_serving(&d->s, serving_entry, &r)) {
		free(fresh.servings);
		return;
	}
	free(d->snap.servings);
	d->snap.servings = fresh.servings;
	d->snap.nservings = fresh.nservings;
}

/* The socket requests' histograms are read at the scrape too: a request
 * counts as soon as its response has ended, whatever the interval. Only
 * those: the rest of the snapshot stays one tick's, whose figures tests
 * and users add up against each other. */
static int is_http_kind(uint32_t kind)
{
	return kind >= AGG_KIND_HTTP_REQUEST && kind <= AGG_KIND_HTTP_EVENTS;
}

static int http_agg_entry(void *ctx, const struct agg_key *k, const struct agg_val *v)
{
	return is_http_kind(k->kind) ? agg_entry(ctx, k, v) : 0;
}

static void refresh_http(struct daemon *d)
{
	struct metrics_snapshot *s = &d->snap;
	struct map_read r = { d, s, s->naggs };
	size_t w = 0;

	for (size_t i = 0; i < s->naggs; i++)
		if (!is_http_kind(s->aggs[i].kind))
			s->aggs[w++] = s->aggs[i];
	s->naggs = w;
	if (maps_foreach_agg(&d->s, http_agg_entry, &r))
		st_debug("daemon: reading the socket requests at a scrape failed; some are missing from it");
}

static int render_metrics(void *ctx, char **body, size_t *len)
{
	struct daemon *d = ctx;
	pthread_mutex_lock(&d->lock);
	if (d->session_open) {
		refresh_serving(d);
		refresh_http(d);
	}
	int rc = prom_render(&d->snap, body, len);
	pthread_mutex_unlock(&d->lock);
	return rc;
}

/* ---- setup and teardown ---- */

static void describe_listen(const struct httpd *h, const struct listen_addr *a, char *out, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	if (a->ss.ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->ss)->sin6_addr, host, sizeof(host));
		snprintf(out, len, "[%s]:%u", host, httpd_port(h));
	} else {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->ss)->sin_addr, host, sizeof(host));
		snprintf(out, len, "%s:%u", host, httpd_port(h));
	}
}

/* Host mode: the engines running now (and, each scan, new ones). Else the
 * target's probes, the loader's with --opencl, the state of what runs
 * already, and (--binary) the path for replacements. */
static int attach(struct daemon *d, char *err, size_t errlen)
{
	const struct daemon_config *c = &d->cfg;
	pid_t pid = c->pid > 0 ? c->pid : -1;

	if (c->all_engines) {
		if (!(d->host = daemon_host_new(&d->s, forget_reused, d))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		daemon_host_scan(d->host);
		return 0;
	}
	if (session_attach_target(&d->s, &d->target, pid, pid > 0, err, errlen))
		return -1;
	if (d->target.engine != ENGINE_INFER)   /* only our engine dumps its state, or is followed */
		return 0;
	if (pid > 0 && state_request(pid) < 0)
		st_err("cannot ask pid %d for its state: %s", (int)pid, state_request_error(errno));
	if (pid < 0 && state_request_binary(d->target.elf) < 0)
		st_err("cannot ask the running processes of %s for their state: %s", d->target.elf, strerror(errno));
	return pid > 0 ? 0 : session_follow(&d->s, d->target.elf, err, errlen);
}

static int start(struct daemon *d, char *err, size_t errlen)
{
	const struct daemon_config *c = &d->cfg;
	int optional = c->opencl || c->spans;
	int rc = c->all_engines ? 0
		 : c->pid > 0 ? target_resolve_pid(c->pid, c->engine, optional, &d->target, err, errlen)
			      : target_resolve_program(c->binary, 0, c->engine, optional, &d->target, err, errlen);

	if (rc)
		return -1;
	if (c->all_engines)
		snprintf(d->target.shown, sizeof(d->target.shown), "every engine on the host");
	if (c->jsonl_dir) {
		struct rotate_opts ro = { c->jsonl_dir, "spantrace", c->file_max_bytes, c->total_max_bytes,
					  c->retain_files };
		if (!(d->rot = rotate_open(&ro, err, errlen)))
			return -1;
	}
	if (line_buffer_init(&d->line)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (c->otlp) {
		gethostname(d->hostname, sizeof(d->hostname) - 1);
		d->otlp_start_ns = (uint64_t)clock_read_ns(CLOCK_REALTIME);
		if (!(d->otlp = otlp_open(c->otlp, "metrics", err, errlen)))
			return -1;
	}
	/* Bind before loading BPF: a port in use is the commonest mistake. */
	if (!(d->http = httpd_start(&c->listen, render_metrics, d, err, errlen)))
		return -1;
	struct session_opts so = {
		.pid_filter = c->pid > 0 ? (uint32_t)c->pid : 0,
		.level = c->common.level,
		.stream_mode = STREAM_TAIL,
		.ringbuf_kb = DAEMON_RINGBUF_KB,
		.opencl = c->opencl,
		.opencl_binary = c->pid > 0 ? NULL : c->binary,
		.engines = c->all_engines || d->target.engine == ENGINE_LLAMACPP,
		/* our engine's probes only where it may run: without them no
		 * request read is noted for a link no engine will take */
		.no_probes = !c->all_engines && d->target.engine != ENGINE_INFER,
		.http = !c->no_http,
	};
	struct event_sink tail = { &tail_handlers, d };
	if (session_open(&d->s, &so, &tail, 1, err, errlen))
		return -1;
	d->session_open = 1;
	initial_thresholds(d);
	write_thresholds(d);  /* before attaching: the map starts at 0 = stream all */
	return attach(d, err, errlen);
}

static void stop(struct daemon *d)
{
	httpd_stop(d->http);   /* no scrape may run while the snapshot goes */
	d->http = NULL;
	if (d->session_open) {
		session_detach(&d->s);
		session_consume(&d->s);  /* the last slow spans reach the files */
	}
	if (d->rot && rotate_flush(d->rot))
		st_err("flushing the JSONL files: %s", strerror(errno));
	if (d->otlp) {
		struct otlp_stats st;
		char line[256];
		otlp_close(d->otlp, 5, &st);
		d->otlp = NULL;
		otlp_stats_text(&st, "data points", line, sizeof(line));
		st_info("%s", line);
	}
	metrics_snapshot_free(&d->snap);
	daemon_host_free(d->host);
	d->host = NULL;
	if (d->session_open)
		session_close(&d->s);
	rotate_close(d->rot);
	free(d->line.buf);
	free(d->procs);
	pthread_mutex_destroy(&d->lock);
}

static void reopen(void *ctx)
{
	struct daemon *d = ctx;

	if (d->rot && rotate_reopen(d->rot))
		st_err("SIGHUP: cannot reopen the JSONL file: %s", strerror(errno));
	else if (d->rot)
		st_info("SIGHUP: now writing %s", rotate_current_path(d->rot));
}

static enum stop_reason on_tick(void *ctx, uint64_t now)
{
	struct daemon *d = ctx;

	if (d->host)
		daemon_host_scan(d->host);
	/* Host mode ticks at the scan period; the snapshot stays at the interval. */
	if (!d->host || now - d->last_tick_ns + HOST_SCAN_NS / 10 >= (uint64_t)(d->cfg.interval_secs * 1e9))
		tick(d, now);
	return STOP_NONE;
}

/* Until SIGTERM/SIGINT (or --duration): a snapshot every interval. The
 * ring buffer wakes the loop only past a quarter full; slow spans are rare,
 * so the loop takes whatever is waiting every POLL_MS anyway. */
static enum stop_reason run(struct daemon *d)
{
	uint64_t now = mono_now_ns();
	double secs = d->cfg.common.duration_s;
	struct runloop rl = {
		.s = &d->s, .ctx = d, .input_fd = -1, .poll_ms = POLL_MS,
		.tick_ns = (uint64_t)(d->cfg.interval_secs * 1e9), .on_tick = on_tick, .on_hup = reopen,
		.deadline_ns = secs > 0 ? now + (uint64_t)(secs * 1e9) : 0,
	};

	if (d->host && rl.tick_ns > HOST_SCAN_NS)
		rl.tick_ns = HOST_SCAN_NS;
	tick(d, now);   /* /metrics has numbers from the start */
	return runloop_run(&rl);
}

static void final_report(struct daemon *d)
{
	struct counters c;
	struct rotate_stats rs = { 0 };
	maps_read_counters(&d->s, &c);
	if (d->rot)
		rotate_get_stats(d->rot, &rs);
	st_info("daemon stopped: %" PRIu64 " slow spans written, %" PRIu64 " dropped by the disk caps, "
		"%" PRIu64 " lost in the ring buffer",
		rs.lines_written, rs.lines_dropped, (uint64_t)c.dropped[EV_SPAN]);
}

int cmd_daemon(int argc, char **argv)
{
	struct daemon *d = calloc(1, sizeof(*d));
	char err[512] = "";
	int rc = 1;

	if (!d) {
		st_err("out of memory");
		return 1;
	}
	/* The snapshot's arrays (~4 KB a series) and the /metrics text are the
	 * daemon's big allocations, sized by the processes of the moment. A
	 * fixed mmap threshold keeps them in mappings of their own, given back
	 * when freed; glibc's sliding threshold would move them into the heap
	 * and arenas after the first free, where a burst of short-lived engines
	 * leaves RSS at the burst's peak. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	mallopt(M_ARENA_MAX, 1);   /* the scrape threads' arenas too: one heap, trimmed each tick */
	pthread_mutex_init(&d->lock, NULL);
	switch (daemon_config_parse(&d->cfg, argc, argv, environ, err, sizeof(err))) {
	case DAEMON_CONFIG_HELP:
		fputs(daemon_config_usage, stdout);
		rc = 0;
		goto out;
	case DAEMON_CONFIG_ERROR:
		st_err("%s", err);
		rc = 2;
		goto out;
	}
	st_verbose = d->cfg.verbose;
	st_quiet = d->cfg.common.quiet;
	d->dead_grace_ns = (uint64_t)(3 * d->cfg.interval_secs * 1e9);
	if (d->dead_grace_ns < DEAD_GRACE_MIN_NS)
		d->dead_grace_ns = DEAD_GRACE_MIN_NS;
	if (d->cfg.expire_secs > 0)
		d->dead_grace_ns = (uint64_t)(d->cfg.expire_secs * 1e9);
	runloop_install_signals();   /* before attaching: Ctrl-C counts */
	if (session_check_caps(err, sizeof(err)) || start(d, err, sizeof(err))) {
		st_err("%s", err);
		goto out;
	}
	char where[80];
	describe_listen(d->http, &d->cfg.listen, where, sizeof(where));
	st_info("daemon: tracing %s%s, metrics at http://%s/metrics%s%s", d->target.shown,
		d->cfg.all_engines ? "" : d->cfg.pid > 0 ? " (one pid)" : " (all processes)", where,
		d->rot ? ", slow spans to " : "", d->rot ? rotate_current_path(d->rot) : "");
	enum stop_reason why = run(d);
	if (why == STOP_RINGBUF_ERROR)
		st_err("reading the ring buffer failed");
	final_report(d);
	rc = why == STOP_RINGBUF_ERROR;
out:
	stop(d);
	free(d);
	return rc;
}
