/* maps.c - typed access to a session's BPF maps (see maps.h). */
#include "core/maps.h"
#include "core/grow.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "spantrace.skel.h"

/* ---- one map walk for every reader ---- */

typedef int (*entry_fn)(void *ctx, const void *key, const void *value);

/* Walks map with key and value buffers of its own sizes, calling fn for
 * each entry still present when it is read. */
static int walk(const struct bpf_map *map, entry_fn fn, void *ctx)
{
	size_t ksize = bpf_map__key_size(map), vsize = bpf_map__value_size(map);
	char *key = malloc(ksize), *next = malloc(ksize), *value = malloc(vsize);
	int fd = bpf_map__fd(map), rc = 0, have_prev = 0;

	if (!key || !next || !value) {
		rc = -1;
		goto out;
	}
	while (bpf_map_get_next_key(fd, have_prev ? key : NULL, next) == 0) {
		memcpy(key, next, ksize);
		have_prev = 1;
		if (bpf_map_lookup_elem(fd, key, value))
			continue; /* deleted meanwhile */
		rc = fn(ctx, key, value);
		if (rc)
			break;
	}
out:
	free(key);
	free(next);
	free(value);
	return rc;
}

/* ---- counters ---- */

int maps_read_counters(const struct session *s, struct counters *out)
{
	int ncpu = libbpf_num_possible_cpus();
	struct counters *per;
	__u32 zero = 0;

	memset(out, 0, sizeof(*out));
	if (ncpu <= 0 || !(per = calloc((size_t)ncpu, sizeof(*per))))
		return -1;
	if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.counters), &zero, per)) {
		free(per);
		return -1;
	}
	/* struct counters is all __u64: sum it field by field, whatever it holds. */
	for (int c = 0; c < ncpu; c++) {
		const __u64 *from = (const __u64 *)&per[c];
		__u64 *to = (__u64 *)out;
		for (size_t i = 0; i < sizeof(*out) / sizeof(__u64); i++)
			to[i] += from[i];
	}
	free(per);
	return 0;
}

/* ---- typed walks ---- */

struct typed_walk {
	void *fn;
	void *ctx;
};

static int agg_entry(void *ctx, const void *key, const void *value)
{
	struct typed_walk *w = ctx;
	return ((maps_agg_fn)w->fn)(w->ctx, key, value);
}

int maps_foreach_agg(const struct session *s, maps_agg_fn fn, void *ctx)
{
	struct typed_walk w = { (void *)fn, ctx };
	return walk(s->skel->maps.agg, agg_entry, &w);
}

static int pool_entry(void *ctx, const void *key, const void *value)
{
	struct typed_walk *w = ctx;
	return ((maps_pool_fn)w->fn)(w->ctx, key, value);
}

int maps_foreach_pool(const struct session *s, maps_pool_fn fn, void *ctx)
{
	struct typed_walk w = { (void *)fn, ctx };
	return walk(s->skel->maps.pools, pool_entry, &w);
}

static int clmem_entry(void *ctx, const void *key, const void *value)
{
	struct typed_walk *w = ctx;
	return ((maps_clmem_fn)w->fn)(w->ctx, key, value);
}

int maps_foreach_clmem(const struct session *s, maps_clmem_fn fn, void *ctx)
{
	struct typed_walk w = { (void *)fn, ctx };
	return walk(s->skel->maps.cl_ctxmem, clmem_entry, &w);
}

static int kv_entry(void *ctx, const void *key, const void *value)
{
	struct typed_walk *w = ctx;
	return ((maps_kv_fn)w->fn)(w->ctx, *(const __u32 *)key, value);
}

int maps_foreach_kv(const struct session *s, maps_kv_fn fn, void *ctx)
{
	struct typed_walk w = { (void *)fn, ctx };
	return walk(s->skel->maps.kv, kv_entry, &w);
}

/* The map's value starts with a struct serving_val (the BPF side keeps
 * more after it). */
static int serving_entry(void *ctx, const void *key, const void *value)
{
	struct typed_walk *w = ctx;
	return ((maps_serving_fn)w->fn)(w->ctx, *(const __u32 *)key, value);
}

int maps_foreach_serving(const struct session *s, maps_serving_fn fn, void *ctx)
{
	struct typed_walk w = { (void *)fn, ctx };
	return walk(s->skel->maps.serving, serving_entry, &w);
}

/* ---- forgetting a process ---- */

/* The keys of the processes being forgotten (pids sorted), collected
 * in one walk before any is deleted: deleting the key a walk stands on would
 * restart it from the first key, and a walk per process would make a burst
 * of exits cost (exits x map size) reads. */
struct pid_set {
	const __u32 *pids;
	size_t npids;
};

static int pid_cmp(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return x < y ? -1 : x > y;
}

static int pid_in(const struct pid_set *set, __u32 pid)
{
	return bsearch(&pid, set->pids, set->npids, sizeof(pid), pid_cmp) != NULL;
}

struct agg_keys {
	struct pid_set set;
	struct agg_key *keys;
	size_t n, cap;
};

static int collect_agg_key(void *ctx, const struct agg_key *k, const struct agg_val *v)
{
	struct agg_keys *ak = ctx;

	(void)v;
	if (!pid_in(&ak->set, k->pid))
		return 0;
	if (ARRAY_GROW(ak->keys, ak->cap, ak->n))
		return -1;
	ak->keys[ak->n++] = *k;
	return 0;
}

struct cl_keys {
	struct pid_set set;
	struct cl_ctx_key *keys;
	size_t n, cap;
};

static int collect_cl_key(void *ctx, const struct cl_ctx_key *k, const struct cl_ctx_val *v)
{
	struct cl_keys *ck = ctx;

	(void)v;
	if (!pid_in(&ck->set, k->pid))
		return 0;
	if (ARRAY_GROW(ck->keys, ck->cap, ck->n))
		return -1;
	ck->keys[ck->n++] = *k;
	return 0;
}

static void forget_per_pid(const struct session *s, __u32 pid)
{
	for (__u32 p = 0; p < POOL_COUNT; p++) {
		struct pool_key k = { .pid = pid, .pool = p };
		bpf_map_delete_elem(bpf_map__fd(s->skel->maps.pools), &k);
	}
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.kv), &pid);
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.serving), &pid);
}

void maps_forget_pids(const struct session *s, const __u32 *pids, size_t n)
{
	struct agg_keys ak = { .set = { pids, n } };
	struct cl_keys ck = { .set = { pids, n } };

	if (!n)
		return;
	maps_foreach_agg(s, collect_agg_key, &ak);
	for (size_t i = 0; i < ak.n; i++)
		bpf_map_delete_elem(bpf_map__fd(s->skel->maps.agg), &ak.keys[i]);
	free(ak.keys);
	maps_foreach_clmem(s, collect_cl_key, &ck);
	for (size_t i = 0; i < ck.n; i++)
		bpf_map_delete_elem(bpf_map__fd(s->skel->maps.cl_ctxmem), &ck.keys[i]);
	free(ck.keys);
	for (size_t i = 0; i < n; i++)
		forget_per_pid(s, pids[i]);
}

/* ---- tables userspace writes or reads by key ---- */

int maps_set_slow_thresholds(const struct session *s, const uint64_t slow_ns[SPAN_KIND_COUNT])
{
	int fd = bpf_map__fd(s->skel->maps.slow_ns);

	for (__u32 k = 0; k < SPAN_KIND_COUNT; k++) {
		__u64 v = slow_ns[k];
		if (bpf_map_update_elem(fd, &k, &v, BPF_ANY))
			return -1;
	}
	return 0;
}

int maps_read_stack(const struct session *s, int32_t id, __u64 *ips)
{
	if (id < 0)
		return -1;
	memset(ips, 0, PROFILE_STACK_DEPTH * sizeof(*ips));
	return bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.stacks), &id, ips) ? -1 : 0;
}

int maps_perf_counters_fd(const struct session *s)
{
	return bpf_map__fd(s->skel->maps.perf_counters);
}

/* ---- memory ---- */

/* The kernel's own account of a map's memory, from /proc/self/fdinfo. */
static uint64_t map_memlock(int fd)
{
	char path[64], line[128];
	uint64_t bytes = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "memlock:", 8)) {
			char *end;
			unsigned long long v = strtoull(line + 8, &end, 10);
			if (end != line + 8)
				bytes = v;
		}
	fclose(f);
	return bytes;
}

void maps_foreach_memory(const struct session *s, maps_memory_fn fn, void *ctx)
{
	struct bpf_map *m;

	bpf_object__for_each_map(m, s->skel->obj)
		fn(ctx, bpf_map__name(m), map_memlock(bpf_map__fd(m)));
}
