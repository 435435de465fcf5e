/* folded.c - folded-stack aggregation (see folded.h). */
#include "analysis/folded.h"

#include <stdlib.h>
#include <string.h>

#define NO_STACK_LEAF "[unknown]"

struct folded_line {
	char *line;        /* "span;outer;...;inner", sanitized */
	size_t span_len;   /* bytes of the span name at the start of line */
	size_t leaf_off;   /* offset of the innermost frame, 0 if no frames */
	uint64_t count;
};

struct folded {
	struct folded_line *slots;      /* open addressing; line == NULL is empty */
	size_t cap, used;
	uint64_t total;
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

struct folded *folded_new(void)
{
	struct folded *fd = calloc(1, sizeof(*fd));
	if (!fd)
		return NULL;
	fd->cap = 256;
	fd->slots = calloc(fd->cap, sizeof(*fd->slots));
	if (!fd->slots) {
		free(fd);
		return NULL;
	}
	return fd;
}

void folded_free(struct folded *fd)
{
	if (!fd)
		return;
	for (size_t i = 0; i < fd->cap; i++)
		free(fd->slots[i].line);
	free(fd->slots);
	free(fd);
}

static struct folded_line *find_slot(struct folded_line *slots, size_t cap, const char *line)
{
	size_t i = hash_str(line) & (cap - 1);
	while (slots[i].line && strcmp(slots[i].line, line))
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static int grow(struct folded *fd)
{
	size_t cap = fd->cap * 2;
	struct folded_line *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -1;
	for (size_t i = 0; i < fd->cap; i++)
		if (fd->slots[i].line)
			*find_slot(slots, cap, fd->slots[i].line) = fd->slots[i];
	free(fd->slots);
	fd->slots = slots;
	fd->cap = cap;
	return 0;
}

/* Appends name with the format's separators neutralized. */
static char *append_name(char *p, const char *name)
{
	for (; *name; name++) {
		char c = *name;
		*p++ = c == ';' ? ':' : (c == '\n' || c == '\r') ? ' ' : c;
	}
	return p;
}

/* Builds the line; *leaf_off gets where the innermost frame starts. */
static char *build_line(const char *span, const char *const *frames, size_t nframes,
			size_t *span_len, size_t *leaf_off)
{
	size_t len = strlen(span) + 1;
	for (size_t i = 0; i < nframes; i++)
		len += strlen(frames[i]) + 1;
	char *line = malloc(len), *p = line;
	if (!line)
		return NULL;
	p = append_name(p, span);
	*span_len = (size_t)(p - line);
	*leaf_off = 0;
	for (size_t i = nframes; i-- > 0;) {
		*p++ = ';';
		if (i == 0)
			*leaf_off = (size_t)(p - line);
		p = append_name(p, frames[i]);
	}
	*p = '\0';
	return line;
}

int folded_add(struct folded *fd, const char *span, const char *const *frames,
	       size_t nframes, uint64_t count)
{
	size_t span_len, leaf_off;
	char *line = build_line(span, frames, nframes, &span_len, &leaf_off);
	if (!line)
		return -1;
	if ((fd->used + 1) * 4 > fd->cap * 3 && grow(fd)) {
		free(line);
		return -1;
	}
	struct folded_line *e = find_slot(fd->slots, fd->cap, line);
	if (e->line) {
		free(line);
	} else {
		*e = (struct folded_line){ .line = line, .span_len = span_len, .leaf_off = leaf_off };
		fd->used++;
	}
	e->count += count;
	fd->total += count;
	return 0;
}

uint64_t folded_total(const struct folded *fd)
{
	return fd->total;
}

size_t folded_stacks(const struct folded *fd)
{
	return fd->used;
}

/* The occupied slots as an array of pointers (caller frees). */
static const struct folded_line **entries(const struct folded *fd)
{
	const struct folded_line **v = malloc((fd->used ? fd->used : 1) * sizeof(*v));
	if (!v)
		return NULL;
	size_t n = 0;
	for (size_t i = 0; i < fd->cap; i++)
		if (fd->slots[i].line)
			v[n++] = &fd->slots[i];
	return v;
}

static int by_line(const void *a, const void *b)
{
	return strcmp((*(const struct folded_line *const *)a)->line, (*(const struct folded_line *const *)b)->line);
}

int folded_write(const struct folded *fd, FILE *out)
{
	const struct folded_line **v = entries(fd);
	if (!v)
		return -1;
	qsort(v, fd->used, sizeof(*v), by_line);
	for (size_t i = 0; i < fd->used; i++)
		fprintf(out, "%s %llu\n", v[i]->line, (unsigned long long)v[i]->count);
	free(v);
	return ferror(out) ? -1 : 0;
}

static int same_span(const struct folded_line *e, const char *span, size_t span_len)
{
	return e->span_len == span_len && !memcmp(e->line, span, span_len);
}

static const char *leaf_of(const struct folded_line *e)
{
	return e->leaf_off ? e->line + e->leaf_off : NO_STACK_LEAF;
}

static int by_function(const void *a, const void *b)
{
	return strcmp(((const struct folded_top_entry *)a)->function, ((const struct folded_top_entry *)b)->function);
}

static int by_self_desc(const void *a, const void *b)
{
	const struct folded_top_entry *x = a, *y = b;
	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	return strcmp(x->function, y->function);
}

void folded_top_free(struct folded_top_entry *top, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(top[i].function);
}

/* Self counts per innermost frame of one span, merged by name. The span
 * name is compared after the same sanitizing folded_add applies. */
int folded_top(const struct folded *fd, const char *span, struct folded_top_entry *out, size_t max,
	       uint64_t *span_total)
{
	char *key = malloc(strlen(span) + 1);
	struct folded_top_entry *all = malloc((fd->used ? fd->used : 1) * sizeof(*all));
	if (!key || !all) {
		free(key);
		free(all);
		return -1;
	}
	size_t key_len = (size_t)(append_name(key, span) - key), n = 0;
	uint64_t total = 0;
	for (size_t i = 0; i < fd->cap; i++) {
		const struct folded_line *e = &fd->slots[i];
		if (!e->line || !same_span(e, key, key_len))
			continue;
		all[n++] = (struct folded_top_entry){ .function = (char *)leaf_of(e), .self = e->count };
		total += e->count;
	}
	free(key);
	qsort(all, n, sizeof(*all), by_function);
	size_t merged = 0;
	for (size_t i = 0; i < n; i++) {
		if (merged && !strcmp(all[merged - 1].function, all[i].function))
			all[merged - 1].self += all[i].self;
		else
			all[merged++] = all[i];
	}
	qsort(all, merged, sizeof(*all), by_self_desc);
	size_t k = merged < max ? merged : max;
	for (size_t i = 0; i < k; i++) {
		out[i] = all[i];
		out[i].share = total ? 100.0 * (double)all[i].self / (double)total : 0.0;
		out[i].function = strdup(all[i].function);
		if (!out[i].function) {
			folded_top_free(out, i);
			free(all);
			return -1;
		}
	}
	free(all);
	*span_total = total;
	return (int)k;
}

struct span_samples {
	char *name;
	uint64_t samples;
};

static int by_samples_desc(const void *a, const void *b)
{
	const struct span_samples *x = a, *y = b;
	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Distinct spans with their sample counts, most samples first. */
static struct span_samples *span_totals(const struct folded *fd, size_t *count)
{
	const struct folded_line **v = entries(fd);
	struct span_samples *spans = calloc(fd->used ? fd->used : 1, sizeof(*spans));
	if (!v || !spans) {
		free(v);
		free(spans);
		return NULL;
	}
	qsort(v, fd->used, sizeof(*v), by_line);
	size_t n = 0;
	for (size_t i = 0; i < fd->used; i++) {
		if (n && same_span(v[i], spans[n - 1].name, strlen(spans[n - 1].name))) {
			spans[n - 1].samples += v[i]->count;
			continue;
		}
		spans[n].name = strndup(v[i]->line, v[i]->span_len);
		if (!spans[n].name) {
			while (n-- > 0)
				free(spans[n].name);
			free(spans);
			free(v);
			return NULL;
		}
		spans[n++].samples = v[i]->count;
	}
	free(v);
	qsort(spans, n, sizeof(*spans), by_samples_desc);
	*count = n;
	return spans;
}

int folded_write_top(const struct folded *fd, FILE *out, size_t top_n)
{
	size_t nspans;
	struct span_samples *spans = span_totals(fd, &nspans);
	struct folded_top_entry *top = calloc(top_n ? top_n : 1, sizeof(*top));
	int rc = spans && top ? 0 : -1;
	for (size_t s = 0; rc == 0 && s < nspans; s++) {
		uint64_t total;
		int k = folded_top(fd, spans[s].name, top, top_n, &total);
		if (k < 0) {
			rc = -1;
			break;
		}
		fprintf(out, "span %s: %llu samples (%.1f%% of %llu)\n", spans[s].name,
			(unsigned long long)total,
			fd->total ? 100.0 * (double)total / (double)fd->total : 0.0,
			(unsigned long long)fd->total);
		fprintf(out, "  %10s %7s  %s\n", "self", "share", "function");
		for (int i = 0; i < k; i++)
			fprintf(out, "  %10llu %6.1f%%  %s\n", (unsigned long long)top[i].self,
				top[i].share, top[i].function);
		folded_top_free(top, (size_t)k);
	}
	for (size_t s = 0; spans && s < nspans; s++)
		free(spans[s].name);
	free(spans);
	free(top);
	return rc || ferror(out) ? -1 : 0;
}
