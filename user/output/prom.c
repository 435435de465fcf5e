/* prom.c - Prometheus text exposition (0.0.4) of the daemon's metric set
 * (metricset.h, which decides every family, label and value).
 *
 * Families appear once each with # HELP and # TYPE, in the set's order, so
 * two renders of the same data are byte-identical. Histograms are the
 * kernel's own log-linear buckets (bpf/hist.h); a bucket's inclusive `le`
 * is its largest value in ns, in seconds. */
#include "output/prom.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/grow.h"

/* ---- a growable output buffer; the first failure sticks ---- */
struct textbuf {
	char *data;
	size_t len, cap;
	int failed;
};

static void out_reserve(struct textbuf *b, size_t more)
{
	if (!b->failed && ARRAY_GROW(b->data, b->cap, b->len + more))
		b->failed = 1;
}

__attribute__((format(printf, 2, 3)))
static void out_printf(struct textbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = 1;
		return;
	}
	out_reserve(b, (size_t)n);
	if (b->failed)
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* ---- numbers and labels ---- */

/* Shortest decimal that reads back as the same double (so le bounds and
 * sums are exact and stable), "+Inf"/"NaN" per the format. */
static void fmt_double(char *dst, size_t len, double v)
{
	if (isnan(v)) {
		snprintf(dst, len, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(dst, len, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(dst, len, "%.*g", prec, v);
		if (strtod(dst, NULL) == v)
			return;
	}
}

double prom_bucket_le_seconds(unsigned b)
{
	return (double)hist_bucket_high(b) / 1e9;
}

size_t prom_escape_label(char *dst, size_t dstlen, const char *value)
{
	size_t need = 0, copied = 0;
	for (const char *p = value ? value : ""; *p; p++) {
		const char *rep = NULL;
		if (*p == '\\')
			rep = "\\\\";
		else if (*p == '"')
			rep = "\\\"";
		else if (*p == '\n')
			rep = "\\n";
		size_t k = rep ? 2 : 1;
		/* Never split an escape: stop copying at the first that won't fit. */
		if (copied == need && copied + k < dstlen) {
			memcpy(dst + copied, rep ? rep : p, k);
			copied += k;
		}
		need += k;
	}
	if (dstlen)
		dst[copied] = '\0';
	return need;
}

/* Label sets are built in a fixed buffer; a binary path longer than this
 * is truncated (PATH_MAX-sized paths escape to at most twice their size). */
#define LABELS_MAX 8400

struct labels {
	char text[LABELS_MAX];
	size_t len;
};

static void labels_add(struct labels *l, const char *name, const char *value)
{
	char esc[LABELS_MAX / 2];
	prom_escape_label(esc, sizeof(esc), value);
	int n = snprintf(l->text + l->len, sizeof(l->text) - l->len, "%s%s=\"%s\"",
			 l->len ? "," : "", name, esc);
	if (n > 0)
		l->len += (size_t)n < sizeof(l->text) - l->len ? (size_t)n
							       : sizeof(l->text) - l->len - 1;
}

static void labels_of(struct labels *l, const struct metric_point *p)
{
	char num[32];

	l->len = 0;
	l->text[0] = '\0';
	for (unsigned i = 0; i < p->nlabels; i++)
		labels_add(l, p->labels[i].name, metric_label_text(&p->labels[i], num, sizeof(num)));
}

/* ---- samples ---- */

static void sample(struct textbuf *b, const char *name, const struct labels *l, const struct metric_point *p)
{
	char num[40];

	if (p->is_double)
		fmt_double(num, sizeof(num), p->d);
	else
		snprintf(num, sizeof(num), "%" PRIu64, p->u);
	if (l->len)
		out_printf(b, "%s{%s} %s\n", name, l->text, num);
	else
		out_printf(b, "%s %s\n", name, num);
}

/* Cumulative buckets between the kind's edges, then +Inf (= _count, as
 * the format requires), _sum and _count. */
static void histogram(struct textbuf *b, const char *name, const struct labels *l, const struct metric_hist *h)
{
	const char *sep = l->len ? "," : "";
	char le[40], sum[40];
	uint64_t cum = 0;

	for (unsigned k = 0; k <= h->e.hi && k < HIST_BUCKETS; k++) {
		cum += h->buckets[k];
		if (k < h->e.lo)
			continue;
		fmt_double(le, sizeof(le), (double)hist_bucket_high(k) / h->unit_div);
		out_printf(b, "%s_bucket{%s%sle=\"%s\"} %" PRIu64 "\n", name, l->text, sep, le, cum);
	}
	out_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, l->text, sep, h->count);
	fmt_double(sum, sizeof(sum), (double)h->sum / h->unit_div);
	out_printf(b, "%s_sum{%s} %s\n", name, l->text, sum);
	out_printf(b, "%s_count{%s} %" PRIu64 "\n", name, l->text, h->count);
}

static const char *const type_names[] = {
	[METRIC_GAUGE] = "gauge", [METRIC_COUNTER] = "counter", [METRIC_HISTOGRAM] = "histogram",
};

static void render_family(struct textbuf *b, const struct metric_family *f, struct labels *l)
{
	out_printf(b, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, type_names[f->type]);
	for (size_t i = 0; i < f->npoints; i++) {
		labels_of(l, &f->points[i]);
		if (f->type == METRIC_HISTOGRAM)
			histogram(b, f->name, l, &f->points[i].h);
		else
			sample(b, f->name, l, &f->points[i]);
	}
}

int prom_render(const struct metrics_snapshot *s, char **out, size_t *len)
{
	struct textbuf b = { 0 };
	struct metric_set set;
	struct labels *l = malloc(sizeof(*l));

	if (!l || metric_set_build(s, &set)) {
		free(l);
		errno = ENOMEM;
		return -1;
	}
	for (size_t f = 0; f < set.n; f++)
		render_family(&b, &set.families[f], l);
	metric_set_free(&set);
	free(l);
	if (b.failed || !b.data) {
		free(b.data);
		errno = ENOMEM;
		return -1;
	}
	*out = b.data;
	*len = b.len;
	return 0;
}
