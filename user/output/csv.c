/* csv.c - span and kernel rows (see csv.h). */
#include "output/csv.h"

/* timestamp as epoch seconds with microseconds */
static void csv_time(struct outbuf *ob, int64_t wall_ns)
{
	ob_fixed(ob, wall_ns > 0 ? (uint64_t)wall_ns / 1000 : 0, 6);
}

/* The columns after timestamp and device, shared by both row kinds. */
static void row_tail(struct outbuf *ob, const struct csv_writer *w, const struct event_header *h,
		     uint64_t dur_ns, uint32_t pos, int32_t layer, const char *prefix, const char *op,
		     int failed)
{
	ob_u64(ob, h->tid);
	ob_lit(ob, ",");
	ob_fixed(ob, dur_ns, 6);
	ob_lit(ob, ",");
	ob_u64(ob, pos);
	ob_lit(ob, ",");
	ob_s64(ob, layer);
	ob_lit(ob, ",");
	ob_lit(ob, prefix);
	ob_lit(ob, op);
	ob_lit(ob, failed ? ",0," : ",1,");
	/* MB = 10^6 bytes */
	ob_fixed(ob, proc_live_total(w->procs ? proc_table_find(w->procs, h->pid) : NULL) / 1000, 3);
	ob_lit(ob, failed ? ",mismatched" : ",");
	ob_end(ob);
}

static int on_span(void *ctx, const struct span_event *e)
{
	struct csv_writer *w = ctx;

	if (w->ob->error)
		return 0; /* reported once, as jsonl.c */
	if (ob_begin(w->ob))
		return -1;
	csv_time(w->ob, (int64_t)e->h.ts_ns + w->clk.mono_to_wall);
	ob_lit(w->ob, ",cpu,");
	row_tail(w->ob, w, &e->h, e->dur_ns, e->pos, e->layer, "", span_kind_name(e->kind),
		 e->flags & SPAN_F_MISMATCH);
	return 0;
}

static int on_kernel(void *ctx, const struct kernel_event *e)
{
	struct csv_writer *w = ctx;

	if (w->ob->error)
		return 0;
	if (ob_begin(w->ob))
		return -1;
	csv_time(w->ob, (int64_t)e->start_ns + w->clk.raw_to_wall);
	ob_lit(w->ob, ",opencl,");
	row_tail(w->ob, w, &e->h, e->end_ns > e->start_ns ? e->end_ns - e->start_ns : 0, e->pos, e->layer,
		 "cl_", cl_kernel_name(e->kernel_id), 0);
	return 0;
}

const struct event_handlers csv_handlers = {
	.span = on_span,
	.kernel = on_kernel,
};
