/* devjoin.c - spans joined to their kernels' device time (see devjoin.h). */
#include "core/devjoin.h"

#include <stdlib.h>
#include <string.h>
#include "core/events.h"
#include "core/grow.h"

/* A thread holds at most this many spans or kernel records; past it the
 * oldest go on unjoined (a forward is ~5 spans and 5 kernels a layer). */
#define HELD_MAX 16384

struct joined_kernel {
	uint64_t ts_ns, dur_ns, req;
	uint32_t span_kind, pos, forward_kernels;
	int32_t layer;
};

struct devjoin_thread {
	uint32_t pid, tid;
	struct span_event *spans;   /* held, in arrival order */
	size_t nspans, cap_spans;
	struct joined_kernel *kernels; /* since the last forward */
	size_t nkernels, cap_kernels;
	int launches;               /* its forwards launch kernels: one was seen */
};

void devjoin_init(struct devjoin *j, int kernels_traced, devjoin_deliver_fn deliver, void *ctx)
{
	memset(j, 0, sizeof(*j));
	j->kernels_traced = kernels_traced;
	j->deliver = deliver;
	j->ctx = ctx;
}

static struct devjoin_thread *thread_of(struct devjoin *j, uint32_t pid, uint32_t tid, int create)
{
	for (size_t i = 0; i < j->nthreads; i++)
		if (j->threads[i].tid == tid && j->threads[i].pid == pid)
			return &j->threads[i];
	if (!create || ARRAY_GROW(j->threads, j->cap_threads, j->nthreads))
		return NULL;
	j->threads[j->nthreads] = (struct devjoin_thread){ .pid = pid, .tid = tid };
	return &j->threads[j->nthreads++];
}

static int deliver_span(struct devjoin *j, const struct span_event *e)
{
	return j->deliver(j->ctx, e, sizeof(*e));
}

static int device_kind(uint32_t kind);

static uint64_t sum_for(const struct span_event *s, const struct joined_kernel *k, size_t n);

/* A held span whose forward's record never arrived: its device time is
 * still whole when every kernel record of its (request, position) did
 * (forward_kernels of them); else it existed and was lost. */
static uint64_t device_without_forward(const struct devjoin_thread *t, const struct span_event *s)
{
	size_t n = 0, want = 0;

	for (size_t i = 0; i < t->nkernels; i++)
		if (t->kernels[i].req == s->req && t->kernels[i].pos == s->pos) {
			want = t->kernels[i].forward_kernels;
			n++;
		}
	if (!n || n != want)
		return DEVICE_NS_LOST;
	return sum_for(s, t->kernels, t->nkernels);
}

/* Hands on held spans [0, n) of t without their forward, and keeps the
 * rest. Where kernels are traced and this thread launches them, a device
 * span gets its kernels' time if they all arrived, else it is lost: also
 * when none of its forward's arrived (they were dropped, not absent). */
static int release_held(struct devjoin *j, struct devjoin_thread *t, size_t n)
{
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		struct span_event *s = &t->spans[i];

		if (j->kernels_traced && t->launches && device_kind(s->kind))
			s->device_ns = device_without_forward(t, s);
		j->spans_unjoined++;
		rc = deliver_span(j, s);
	}
	memmove(t->spans, t->spans + n, (t->nspans - n) * sizeof(*t->spans));
	t->nspans -= n;
	return rc;
}

/* Could a span of this kind carry device time: it launches kernels. */
static int device_kind(uint32_t kind)
{
	if (kind == SPAN_FORWARD || kind == SPAN_LAYER)
		return 1;
	for (unsigned k = 0; k < KERNEL_COUNT; k++)
		if (cl_kernel_span_kind(k) == kind)
			return 1;
	return 0;
}

/* The device time of s from the forward's kernels: its own kernels (by
 * span kind and layer), its layer's, or all of them. */
static uint64_t sum_for(const struct span_event *s, const struct joined_kernel *k, size_t n)
{
	uint64_t sum = 0;
	int any = 0;

	for (size_t i = 0; i < n; i++) {
		int mine = s->kind == SPAN_FORWARD ||
			   (k[i].layer == s->layer && k[i].req == s->req && k[i].pos == s->pos &&
			    (s->kind == SPAN_LAYER || k[i].span_kind == s->kind));
		if (mine) {
			sum += k[i].dur_ns;
			any = 1;
		}
	}
	return any ? sum : DEVICE_NS_NONE;
}

/* The kernels of the forward f: those whose batch fired inside it. Older
 * ones belonged to a forward whose span never arrived. */
static size_t forward_kernels(struct devjoin_thread *t, const struct span_event *f, size_t *first)
{
	size_t i = 0, n = 0;

	while (i < t->nkernels && t->kernels[i].ts_ns < f->h.ts_ns)
		i++;
	*first = i;
	while (i + n < t->nkernels && t->kernels[i + n].ts_ns <= f->h.ts_ns + f->dur_ns)
		n++;
	return n;
}

static void set_device(struct span_event *s, int lost, const struct joined_kernel *k, size_t n)
{
	if (!device_kind(s->kind))
		return;
	s->device_ns = lost ? DEVICE_NS_LOST : sum_for(s, k, n);
}

/* f is a forward: join its held descendants and itself, hand them on. */
static int join_forward(struct devjoin *j, struct devjoin_thread *t, struct span_event *f)
{
	unsigned launch = span_launch_of(f->flags);
	int device = j->kernels_traced && (launch == LAUNCH_FORWARD || launch == LAUNCH_PHASES);
	size_t first, n = forward_kernels(t, f, &first), mine = 0;
	const struct joined_kernel *k = t->kernels ? t->kernels + first : NULL;
	int lost = n == 0 || k[0].forward_kernels != n;
	int rc = 0;

	/* held spans from before f began had no forward of their own */
	while (mine < t->nspans && t->spans[mine].h.ts_ns < f->h.ts_ns)
		mine++;
	rc = release_held(j, t, mine);
	t->launches |= device;
	if (device) {
		for (size_t i = 0; i < t->nspans; i++)
			set_device(&t->spans[i], lost, k, n);
		set_device(f, lost, k, n);
		if (lost)
			j->forwards_lost++;
		else
			j->forwards_joined++;
	}
	for (size_t i = 0; i < t->nspans && !rc; i++)
		rc = deliver_span(j, &t->spans[i]);
	t->nspans = 0;
	if (t->nkernels > first + n)   /* none held: kernels may still be NULL */
		memmove(t->kernels, t->kernels + first + n, (t->nkernels - first - n) * sizeof(*k));
	t->nkernels -= first + n;
	return rc ? rc : deliver_span(j, f);
}

static int on_span(struct devjoin *j, const struct span_event *e)
{
	struct devjoin_thread *t = thread_of(j, e->h.pid, e->h.tid, e->depth > 0);
	struct span_event copy = *e;

	if (e->kind == SPAN_FORWARD && t)
		return join_forward(j, t, &copy);
	if (e->depth == 0 || !t) {
		/* an outermost span: nothing held on this thread can join now */
		int rc = t ? release_held(j, t, t->nspans) : 0;
		return rc ? rc : deliver_span(j, e);
	}
	if (t->nspans >= HELD_MAX) {
		int rc = release_held(j, t, 1);
		if (rc)
			return rc;
	}
	if (ARRAY_GROW(t->spans, t->cap_spans, t->nspans)) {
		j->spans_unjoined++;
		return deliver_span(j, e);
	}
	t->spans[t->nspans++] = copy;
	return 0;
}

static void on_kernel(struct devjoin *j, const struct kernel_event *e)
{
	struct devjoin_thread *t = thread_of(j, e->h.pid, e->h.tid, 1);

	if (!t)
		return;
	t->launches = 1;
	if (t->nkernels >= HELD_MAX) {
		memmove(t->kernels, t->kernels + 1, (t->nkernels - 1) * sizeof(*t->kernels));
		t->nkernels--;
	}
	if (ARRAY_GROW(t->kernels, t->cap_kernels, t->nkernels))
		return; /* its forward then counts as lost: its count falls short */
	t->kernels[t->nkernels++] = (struct joined_kernel){
		.ts_ns = e->h.ts_ns,
		.dur_ns = e->end_ns > e->start_ns ? e->end_ns - e->start_ns : 0,
		.req = e->req,
		.span_kind = cl_kernel_span_kind(e->kernel_id),
		.pos = e->pos,
		.forward_kernels = e->forward_kernels,
		.layer = e->layer,
	};
}

int devjoin_feed(struct devjoin *j, const void *data, size_t size)
{
	const struct event_header *h = data;

	if (event_check(data, size) != EVENT_OK)
		return j->deliver(j->ctx, data, size); /* the dispatch counts it */
	if (h->type == EV_SPAN)
		return on_span(j, data);
	if (h->type == EV_KERNEL)
		on_kernel(j, data);
	return j->deliver(j->ctx, data, size);
}

int devjoin_flush(struct devjoin *j)
{
	int rc = 0;

	for (size_t i = 0; i < j->nthreads; i++) {
		int r = release_held(j, &j->threads[i], j->threads[i].nspans);
		if (r && !rc)
			rc = r;
		j->threads[i].nkernels = 0;
	}
	return rc;
}

void devjoin_free(struct devjoin *j)
{
	for (size_t i = 0; i < j->nthreads; i++) {
		free(j->threads[i].spans);
		free(j->threads[i].kernels);
	}
	free(j->threads);
	memset(j, 0, sizeof(*j));
}
