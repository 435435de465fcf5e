/* test_devjoin.c - the join of spans and kernel records: a forward whose
 * kernel records all arrived gives each op span its own kernels' device
 * time, its layer span the layer's and itself all of them; one that lost
 * some gives every device span DEVICE_NS_LOST; spans held at the end whose
 * forward's kernel records were all dropped are lost too (they launched
 * kernels: this thread's forwards do), never "launched nothing"; spans of
 * a thread that launched no kernel, and sample, carry none. */
#include <string.h>
#include "check.h"
#include "core/devjoin.h"

#define MAXOUT 64

struct out {
	struct span_event spans[MAXOUT];
	size_t nspans, nkernels;
};

static int deliver(void *ctx, const void *data, size_t size)
{
	struct out *o = ctx;
	const struct event_header *h = data;

	(void)size;
	if (h->type == EV_SPAN && o->nspans < MAXOUT)
		memcpy(&o->spans[o->nspans++], data, sizeof(struct span_event));
	if (h->type == EV_KERNEL)
		o->nkernels++;
	return 0;
}

static void span(struct devjoin *j, uint32_t tid, unsigned kind, int layer, uint32_t depth,
		 uint32_t pos, uint64_t ts, uint64_t dur)
{
	struct span_event e;

	memset(&e, 0, sizeof(e));
	e.h.type = EV_SPAN;
	e.h.pid = 10;
	e.h.tid = tid;
	e.h.ts_ns = ts;
	e.dur_ns = dur;
	e.kind = kind;
	e.layer = layer;
	e.depth = depth;
	e.req = 1;
	e.pos = pos;
	e.device_ns = DEVICE_NS_NONE;
	if (kind == SPAN_FORWARD)
		e.flags = LAUNCH_PHASES << SPAN_F_LAUNCH_SHIFT;
	CHECK(devjoin_feed(j, &e, sizeof(e)) == 0, "feed span");
}

static void kernel(struct devjoin *j, unsigned id, int layer, uint32_t pos, uint64_t ts,
		   uint64_t dur, uint32_t forward_kernels)
{
	struct kernel_event k;

	memset(&k, 0, sizeof(k));
	k.h.type = EV_KERNEL;
	k.h.pid = 10;
	k.h.tid = 11;
	k.h.ts_ns = ts;
	k.kernel_id = id;
	k.layer = layer;
	k.start_ns = 1000;
	k.end_ns = 1000 + dur;
	k.req = 1;
	k.pos = pos;
	k.forward_kernels = forward_kernels;
	CHECK(devjoin_feed(j, &k, sizeof(k)) == 0, "feed kernel");
}

/* One forward at pos from t0: a qkv and an ffn span in layer 0 and a
 * sample span; with_kernels of its 3 kernel records arrive (qkv 7 ns,
 * ffn_up 20 ns, ffn_down 30 ns); with_forward: its span ends it. */
static void forward(struct devjoin *j, uint32_t pos, uint64_t t0, int with_kernels, int with_forward)
{
	span(j, 11, SPAN_QKV, 0, 2, pos, t0 + 10, 5);
	span(j, 11, SPAN_FFN, 0, 2, pos, t0 + 20, 5);
	span(j, 11, SPAN_LAYER, 0, 1, pos, t0 + 5, 30);
	const unsigned ids[3] = { KERNEL_QKV, KERNEL_FFN_UP, KERNEL_FFN_DOWN };
	const uint64_t durs[3] = { 7, 20, 30 };
	for (int i = 0; i < with_kernels; i++)
		kernel(j, ids[i], 0, pos, t0 + 50 + i, durs[i], 3);
	span(j, 11, SPAN_SAMPLE, -1, 1, pos, t0 + 60, 2);
	if (with_forward)
		span(j, 11, SPAN_FORWARD, -1, 0, pos, t0, 100);
}

static const struct span_event *find(const struct out *o, unsigned kind, uint32_t pos)
{
	for (size_t i = 0; i < o->nspans; i++)
		if (o->spans[i].kind == kind && o->spans[i].pos == pos)
			return &o->spans[i];
	return NULL;
}

static uint64_t dev(const struct out *o, unsigned kind, uint32_t pos)
{
	const struct span_event *s = find(o, kind, pos);

	CHECK(s != NULL, "span kind %u at pos %u delivered", kind, pos);
	return s ? s->device_ns : 0;
}

static void test_whole_partial_and_dropped(void)
{
	struct devjoin j;
	struct out o = { 0 };

	devjoin_init(&j, 1, deliver, &o);
	forward(&j, 0, 1000, 3, 1);  /* whole */
	forward(&j, 1, 2000, 2, 1);  /* lost ffn_down */
	forward(&j, 2, 3000, 0, 0);  /* its kernels and its forward dropped */
	CHECK(devjoin_flush(&j) == 0, "flush");
	CHECK(o.nkernels == 5, "kernel records handed on: %zu", o.nkernels);
	CHECK(o.nspans == 14, "every span handed on (5 + 5 + 4): %zu", o.nspans);
	CHECK(dev(&o, SPAN_QKV, 0) == 7, "qkv: its kernel");
	CHECK(dev(&o, SPAN_FFN, 0) == 50, "ffn: ffn_up + ffn_down");
	CHECK(dev(&o, SPAN_LAYER, 0) == 57, "layer: all its layer's");
	CHECK(dev(&o, SPAN_FORWARD, 0) == 57, "forward: all of them");
	CHECK(dev(&o, SPAN_SAMPLE, 0) == DEVICE_NS_NONE, "sample launched nothing");
	CHECK(dev(&o, SPAN_QKV, 1) == DEVICE_NS_LOST, "partial forward: qkv lost, not 7");
	CHECK(dev(&o, SPAN_FFN, 1) == DEVICE_NS_LOST, "partial forward: ffn lost, not 20");
	CHECK(dev(&o, SPAN_FORWARD, 1) == DEVICE_NS_LOST, "partial forward: forward lost");
	CHECK(dev(&o, SPAN_SAMPLE, 1) == DEVICE_NS_NONE, "partial forward: sample still none");
	CHECK(dev(&o, SPAN_QKV, 2) == DEVICE_NS_LOST, "all kernels dropped: qkv lost, not none");
	CHECK(dev(&o, SPAN_FFN, 2) == DEVICE_NS_LOST, "all kernels dropped: ffn lost, not none");
	CHECK(dev(&o, SPAN_LAYER, 2) == DEVICE_NS_LOST, "all kernels dropped: layer lost");
	CHECK(dev(&o, SPAN_SAMPLE, 2) == DEVICE_NS_NONE, "all kernels dropped: sample none");
	CHECK(j.forwards_joined == 1 && j.forwards_lost == 1, "joined %llu lost %llu",
	      (unsigned long long)j.forwards_joined, (unsigned long long)j.forwards_lost);
	devjoin_free(&j);
}

/* A thread that never launched a kernel (a CPU backend beside a traced
 * device): its held spans carry no device time, even with kernels traced. */
static void test_host_thread(void)
{
	struct devjoin j;
	struct out o = { 0 };

	devjoin_init(&j, 1, deliver, &o);
	span(&j, 12, SPAN_QKV, 0, 2, 0, 100, 5);
	span(&j, 12, SPAN_LAYER, 0, 1, 0, 90, 30);
	CHECK(devjoin_flush(&j) == 0, "flush");
	CHECK(o.nspans == 2, "spans handed on: %zu", o.nspans);
	CHECK(dev(&o, SPAN_QKV, 0) == DEVICE_NS_NONE, "host thread: qkv none");
	CHECK(dev(&o, SPAN_LAYER, 0) == DEVICE_NS_NONE, "host thread: layer none");
	devjoin_free(&j);
}

int main(void)
{
	test_whole_partial_and_dropped();
	test_host_thread();
	return check_report();
}
