/* procs.c - per-process memory and KV state from the records (see procs.h). */
#include "analysis/procs.h"
#include "core/grow.h"

#include <stdlib.h>
#include <string.h>

const struct proc_state *proc_table_find(const struct proc_table *t, __u32 pid)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->procs[i].pid == pid)
			return &t->procs[i];
	return NULL;
}

struct proc_state *proc_table_get(struct proc_table *t, __u32 pid)
{
	struct proc_state *p = (struct proc_state *)proc_table_find(t, pid);

	if (p)
		return p;
	if (t->max && t->n >= t->max)
		goto untracked;
	if (ARRAY_GROW(t->procs, t->cap, t->n))
		goto untracked;
	p = &t->procs[t->n++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
untracked:
	t->untracked++;
	return NULL;
}

uint64_t proc_live_total(const struct proc_state *p)
{
	uint64_t n = 0;

	for (int i = 0; p && i < POOL_COUNT; i++)
		n += p->live[i];
	return n;
}

void proc_table_free(struct proc_table *t)
{
	free(t->procs);
	memset(t, 0, sizeof(*t));
}

static int on_pool_event(void *ctx, const struct alloc_event *e)
{
	struct proc_state *p = proc_table_get(ctx, e->h.pid);

	if (p && e->unknown != 1) {   /* an unknown free carries no pool state */
		p->live[e->pool] = e->live_bytes;
		p->peak[e->pool] = e->peak_bytes;
		p->reserved[e->pool] = e->reserved_bytes;
	}
	return 0;
}

static int on_kv(void *ctx, const struct kv_event *e)
{
	struct proc_state *p = proc_table_get(ctx, e->h.pid);

	if (p) {
		p->kv_used = e->used_bytes;
		p->kv_cap = e->capacity_bytes;
		p->kv_seen = 1;
	}
	return 0;
}

const struct event_handlers proc_table_handlers = {
	.alloc = on_pool_event,
	.free = on_pool_event,
	.kv = on_kv,
};
