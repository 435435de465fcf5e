/* topview_model.h - the calls between the files of `spantrace top`'s
 * model (topview.c, topview_refresh.c, topview_tree.c), and for nothing
 * else. They call downward only: topview.c's refresh tick computes the
 * rows (topview_refresh.c) and lays the tree out (topview_tree.c); the
 * tree asks the refresh where a kind's row goes, and recomputes the rows
 * after a reset. */
#ifndef SPANTRACE_TOPVIEW_MODEL_H
#define SPANTRACE_TOPVIEW_MODEL_H

#include "top/topview_impl.h"

/* topview_refresh.c: every row's numbers at now, from its window. */
void tv_compute_rows(struct topview *tv, uint64_t now);

/* topview_refresh.c: a kind outside any layer that runs outside forward
 * (mostly with no parent span): its row goes at the root, beside forward,
 * with no %FWD. */
int tv_runs_outside_forward(const struct topview *tv, unsigned k);

/* topview_tree.c: rebuilds the visible rows and keeps the selection on
 * the same row. */
void tv_layout(struct topview *tv);

#endif
