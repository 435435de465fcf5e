/* daemon_host.c - the daemon's host mode (see daemon_host.h). */
#include "commands/daemon_host.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/engines.h"
#include "core/fleet.h"
#include "core/grow.h"
#include "core/log.h"
#include "core/statereq.h"
#include "core/target.h"

/* Every process is re-read this often (in passes), for libraries loaded late. */
#define FULL_SCAN_EVERY 20

struct host_meta {
	struct metrics_proc_meta m;
	uint64_t start_ticks;
};

struct daemon_host {
	struct session *s;
	struct fleet *fleet;
	struct host_meta *metas;
	size_t nmetas, cap;
	unsigned inodes;
	void (*forget)(void *ctx, uint32_t pid);
	void *ctx;
};

struct daemon_host *daemon_host_new(struct session *s, void (*forget)(void *ctx, uint32_t pid), void *ctx)
{
	struct daemon_host *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->fleet = fleet_new(INFER_PROVIDER);
	if (!h->fleet) {
		free(h);
		return NULL;
	}
	h->s = s;
	h->forget = forget;
	h->ctx = ctx;
	return h;
}

void daemon_host_free(struct daemon_host *h)
{
	if (!h)
		return;
	fleet_free(h->fleet);
	free(h->metas);
	free(h);
}

/* llama.cpp's profile on the inode p maps, for every process that maps it. */
static int attach_llamacpp(struct daemon_host *h, const struct fleet_proc *p, char *err, size_t errlen)
{
	struct target t;

	memset(&t, 0, sizeof(t));
	if (engine_llamacpp_in_pid(p->pid, &t)) {
		snprintf(err, errlen, "llama.cpp is gone from pid %d", (int)p->pid);
		return -1;
	}
	return session_attach_engine(h->s, &t, -1, err, errlen);
}

static int on_inode(void *ctx, const char *open_path, const struct fleet_proc *p)
{
	struct daemon_host *h = ctx;
	char err[PATH_MAX + 128];

	if (p->engine == ENGINE_LLAMACPP ? attach_llamacpp(h, p, err, sizeof(err))
					 : session_attach(h->s, open_path, -1, err, sizeof(err))) {
		if (fleet_proc_gone(p, open_path)) {
			st_info("host mode: pid %d exited before its %s could be attached; the next process to map it gets it",
			       (int)p->pid, p->path);
			return FLEET_RETRY;
		}
		st_err("host mode: cannot attach to %s of pid %d: %s", p->path, (int)p->pid, err);
		return -1;
	}
	h->inodes++;
	st_info("host mode: attached to %s (as pid %d maps it; ns pid %d, cgroup %s)", p->path,
		(int)p->pid, (int)p->ns_pid, p->cgroup[0] ? p->cgroup : "-");
	return 0;
}

static struct host_meta *meta_find(struct daemon_host *h, uint32_t pid)
{
	for (size_t i = 0; i < h->nmetas; i++)
		if (h->metas[i].m.pid == pid)
			return &h->metas[i];
	return NULL;
}

static void on_engine(void *ctx, const struct fleet_proc *p)
{
	struct daemon_host *h = ctx;
	struct host_meta *m = meta_find(h, (uint32_t)p->pid);
	char err[256];

	if (m && m->start_ticks != p->start_ticks) {
		st_info("host mode: pid %d was reused by a new engine; the old one's series end", (int)p->pid);
		h->forget(h->ctx, (uint32_t)p->pid);
		m = meta_find(h, (uint32_t)p->pid);   /* forget may have dropped it */
	}
	if (!m) {
		if (ARRAY_GROW(h->metas, h->cap, h->nmetas)) {
			st_err("host mode: out of memory labelling pid %d", (int)p->pid);
			return;
		}
		m = &h->metas[h->nmetas++];
	}
	m->start_ticks = p->start_ticks;
	m->m.pid = (uint32_t)p->pid;
	m->m.ns_pid = (uint32_t)p->ns_pid;
	snprintf(m->m.cgroup, sizeof(m->m.cgroup), "%s", p->cgroup);
	snprintf(m->m.binary, sizeof(m->m.binary), "%s", p->path);
	snprintf(m->m.engine, sizeof(m->m.engine), "%s", engine_name(p->engine));
	st_info("host mode: engine pid %d (ns pid %d, cgroup %s, %s)", (int)p->pid, (int)p->ns_pid,
		p->cgroup[0] ? p->cgroup : "-", p->path);
	if (session_http_watch(h->s, p->pid, err, sizeof(err)))
		st_err("host mode: %s", err);
	if (p->engine == ENGINE_INFER && state_request(p->pid) < 0)
		st_err("host mode: cannot ask pid %d for its state: %s", (int)p->pid, state_request_error(errno));
}

void daemon_host_scan(struct daemon_host *h)
{
	static const struct fleet_callbacks cb = { on_inode, on_engine };

	if (fleet_scan(h->fleet, &cb, h, FULL_SCAN_EVERY))
		st_err("host mode: scanning /proc: %s", strerror(errno));
}

int daemon_host_labels(const struct daemon_host *h, struct metrics_snapshot *s)
{
	s->metas = calloc(h->nmetas ? h->nmetas : 1, sizeof(*s->metas));
	if (!s->metas)
		return -1;
	for (size_t i = 0; i < h->nmetas; i++)
		s->metas[i] = h->metas[i].m;
	s->nmetas = h->nmetas;
	return 0;
}

void daemon_host_drop(struct daemon_host *h, uint32_t pid)
{
	size_t w = 0;

	for (size_t i = 0; i < h->nmetas; i++)
		if (h->metas[i].m.pid != pid)
			h->metas[w++] = h->metas[i];
	h->nmetas = w;
}

unsigned daemon_host_inodes(const struct daemon_host *h)
{
	return h ? h->inodes : 0;
}
