/* profile.c - sample and counter aggregation for profile mode (see profile.h). */
#include "analysis/profile.h"
#include "core/userspans.h"

#include <stdlib.h>
#include <string.h>

#define FRAME_NAME_MAX 256

int profile_samples_init(struct profile_samples *ps)
{
	memset(ps, 0, sizeof(*ps));
	ps->folded = folded_new();
	ps->sym = sym_new();
	if (!ps->folded || !ps->sym) {
		profile_samples_free(ps);
		return -1;
	}
	return 0;
}

void profile_samples_free(struct profile_samples *ps)
{
	folded_free(ps->folded);
	sym_free(ps->sym);
	ps->folded = NULL;
	ps->sym = NULL;
}

/* Frames up to the first zero address (stack maps pad with zeros). */
static size_t stack_len(const __u64 *ips, size_t n)
{
	size_t len = 0;
	while (ips && len < n && len < PROFILE_MAX_FRAMES && ips[len])
		len++;
	return len;
}

/* A frame of a thread pool's wait for work: libgomp's (unsymbolized, or
 * gomp_*), or ggml's threadpool poll and barrier. */
static int pool_wait_frame(const char *f)
{
	static const char *const pools[] = { "libgomp.", "gomp_", "ggml_graph_compute_poll_for_work",
					     "ggml_graph_compute_secondary_thread", "ggml_barrier" };

	for (size_t i = 0; i < sizeof(pools) / sizeof(pools[0]); i++)
		if (!strncmp(f, pools[i], strlen(pools[i])))
			return 1;
	return 0;
}

int profile_samples_add(struct profile_samples *ps, pid_t pid, const char *span,
			const __u64 *kips, size_t nk, const __u64 *uips, size_t nu,
			uint64_t count)
{
	size_t klen = stack_len(kips, nk), ulen = stack_len(uips, nu);
	/* One buffer holds every name; frames[] points into it. */
	char *names = malloc((klen + ulen + 1) * FRAME_NAME_MAX);
	const char **frames = malloc((klen + ulen + 1) * sizeof(*frames));
	if (!names || !frames) {
		free(names);
		free(frames);
		return -1;
	}
	size_t n = 0;
	for (size_t i = 0; i < klen; i++, n++) {
		char *buf = names + n * FRAME_NAME_MAX;
		sym_kernel(ps->sym, kips[i], buf, FRAME_NAME_MAX - sizeof(PROFILE_KERNEL_SUFFIX));
		strcat(buf, PROFILE_KERNEL_SUFFIX);
		frames[n] = buf;
	}
	for (size_t i = 0; i < ulen; i++, n++) {
		char *buf = names + n * FRAME_NAME_MAX;
		sym_user(ps->sym, pid, uips[i], buf, FRAME_NAME_MAX);
		frames[n] = buf;
	}
	/* frames[klen] is the innermost user frame */
	int idle = !span && ulen && pool_wait_frame(frames[klen]);
	int rc = folded_add(ps->folded, span ? span : idle ? PROFILE_POOL_IDLE : PROFILE_NO_SPAN,
			    frames, n, count);
	free(names);
	free(frames);
	if (rc)
		return -1;
	ps->samples += count;
	if (idle)
		ps->pool_idle += count;
	else if (!span)
		ps->no_span += count;
	if (!uips)
		ps->no_user_stack += count;
	return 0;
}

void profile_counters_init(struct profile_counters *pc, const char *const *names, unsigned n)
{
	memset(pc, 0, sizeof(*pc));
	pc->ncounters = n < PERF_COUNTERS_MAX ? n : PERF_COUNTERS_MAX;
	for (unsigned i = 0; i < pc->ncounters; i++)
		pc->names[i] = names[i];
}

void profile_counters_add(struct profile_counters *pc, const struct span_event *ev)
{
	if (!span_kind_known(ev->kind))
		return;
	struct span_counter_totals *t = &pc->kinds[ev->kind];
	t->spans++;
	if (pc->ncounters == 0 || ev->ncounters < pc->ncounters)
		return;
	t->measured++;
	for (unsigned i = 0; i < pc->ncounters; i++)
		t->sum[i] += ev->counters[i];
}

static double mean_of(const struct span_counter_totals *t, unsigned i)
{
	return t->measured ? (double)t->sum[i] / (double)t->measured : 0.0;
}

int profile_counters_write(const struct profile_counters *pc, FILE *out)
{
	fprintf(out, "%-12s %10s %10s", "span", "spans", "measured");
	for (unsigned i = 0; i < pc->ncounters; i++)
		fprintf(out, " %18s %14s", pc->names[i], "mean");
	fputc('\n', out);
	for (unsigned k = 0; k < SPAN_KINDS; k++) {
		const struct span_counter_totals *t = &pc->kinds[k];
		if (!t->spans)
			continue;
		fprintf(out, "%-12s %10llu %10llu", span_kind_name(k),
			(unsigned long long)t->spans, (unsigned long long)t->measured);
		for (unsigned i = 0; i < pc->ncounters; i++)
			fprintf(out, " %18llu %14.1f", (unsigned long long)t->sum[i], mean_of(t, i));
		fputc('\n', out);
	}
	return ferror(out) ? -1 : 0;
}

/* Adds key -> value to obj; frees value and fails if either fails. */
static int put(json_object *obj, const char *key, json_object *value)
{
	if (!value || json_object_object_add(obj, key, value)) {
		json_object_put(value);
		return -1;
	}
	return 0;
}

static json_object *counter_json(const struct span_counter_totals *t, unsigned i)
{
	json_object *c = json_object_new_object();
	if (c && (put(c, "total", json_object_new_uint64(t->sum[i])) ||
		  put(c, "mean", json_object_new_double(mean_of(t, i))))) {
		json_object_put(c);
		return NULL;
	}
	return c;
}

static json_object *kind_json(const struct profile_counters *pc, const struct span_counter_totals *t)
{
	json_object *o = json_object_new_object();
	if (!o || put(o, "spans", json_object_new_uint64(t->spans)) ||
	    put(o, "measured", json_object_new_uint64(t->measured)))
		goto fail;
	for (unsigned i = 0; i < pc->ncounters; i++)
		if (put(o, pc->names[i], counter_json(t, i)))
			goto fail;
	return o;
fail:
	json_object_put(o);
	return NULL;
}

json_object *profile_counters_json(const struct profile_counters *pc)
{
	json_object *all = json_object_new_object();
	if (!all)
		return NULL;
	for (unsigned k = 0; k < SPAN_KINDS; k++) {
		if (!pc->kinds[k].spans)
			continue;
		if (put(all, span_kind_name(k), kind_json(pc, &pc->kinds[k]))) {
			json_object_put(all);
			return NULL;
		}
	}
	return all;
}

static int on_span(void *ctx, const struct span_event *e)
{
	profile_counters_add(ctx, e);
	return 0;
}

const struct event_handlers profile_counters_handlers = { .span = on_span };
