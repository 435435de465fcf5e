/* test_prom.c - the Prometheus exposition: escaping, bucket bounds,
 * cumulative buckets, one HELP/TYPE per family, stable sorted output; and
 * OTLP's metrics from the same model: the same families, in order, with
 * the same help strings.
 * With PROM_SAMPLE_OUT=PATH it also writes the rendered sample there, so
 * tests/t_prom_format.sh can run promtool on it. */
#include "output/httpd.h"
#include "output/otlp_metrics.h"
#include "output/prom.h"

#include <json-c/json.h>

#include <arpa/inet.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; \
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static void test_escape(void)
{
	char buf[64];
	size_t n = prom_escape_label(buf, sizeof(buf), "a\\b\"c\nd");
	CHECK(strcmp(buf, "a\\\\b\\\"c\\nd") == 0, "escape gave %s", buf);
	CHECK(n == strlen(buf), "length %zu", n);
	/* Too small: never half an escape, always terminated. */
	n = prom_escape_label(buf, 3, "a\"b");
	CHECK(strcmp(buf, "a") == 0 && n == 4, "truncated escape gave '%s' n=%zu", buf, n);
}

static void test_bounds(void)
{
	CHECK(prom_bucket_le_seconds(0) == 0, "bucket 0 holds 0 ns");
	CHECK(prom_bucket_le_seconds(7) == 7e-9, "bucket 7 holds 7 ns");
	CHECK(prom_bucket_le_seconds(hist_bucket(1023)) == 1023e-9, "1023 ns ends a bucket");
	CHECK(prom_bucket_le_seconds(hist_bucket(1100)) == 1151e-9, "1100 ns: bucket 1024..1151");
	for (unsigned i = 1; i < HIST_BUCKETS; i++)
		CHECK(prom_bucket_le_seconds(i) > prom_bucket_le_seconds(i - 1), "bounds increase at %u", i);
}

/* Two processes, given in reverse order so the renderer must sort. */
static void fill_sample(struct metrics_snapshot *s)
{
	static struct metrics_agg aggs[5];
	static struct metrics_pool pools[2];
	static struct metrics_kv kvs[1];
	static struct metrics_proc procs[2];
	static struct metrics_map_mem maps[2] = { { "pools", 4096 }, { "agg", 1 << 20 } };
	memset(aggs, 0, sizeof(aggs));
	aggs[0] = (struct metrics_agg){ .pid = 200, .kind = SPAN_QKV, .layer = 1, .count = 3, .sum_ns = 1800 };
	aggs[0].buckets[hist_bucket(600)] = 3;
	aggs[1] = (struct metrics_agg){ .pid = 100, .kind = SPAN_QKV, .layer = 0, .count = 4,
				     .sum_ns = 1500000001, .max_ns = 1500000000, .errors = 2 };
	aggs[1].buckets[hist_bucket(0)] = 1;
	aggs[1].buckets[hist_bucket(1100)] = 2;
	aggs[1].buckets[hist_bucket(1500000000)] = 1;
	aggs[2] = (struct metrics_agg){ .pid = 100, .kind = AGG_KIND_TOKEN, .layer = LAYER_NONE,
				     .count = 7, .sum_ns = 21000000 };
	aggs[2].buckets[hist_bucket(3000000)] = 7;
	aggs[3] = (struct metrics_agg){ .pid = 100, .kind = AGG_KIND_KERNEL_BASE + KERNEL_MATVEC,
				     .layer = 2, .count = 1, .sum_ns = 5000 };
	aggs[3].buckets[hist_bucket(5000)] = 1;
	aggs[4] = (struct metrics_agg){ .pid = 100, .kind = SPAN_FORWARD, .layer = LAYER_NONE,
				     .count = 1, .sum_ns = 2000000 };
	aggs[4].buckets[hist_bucket(2000000)] = 1;
	pools[0] = (struct metrics_pool){ .pid = 200, .pool = POOL_WEIGHTS, .live_bytes = 10, .peak_bytes = 20 };
	pools[1] = (struct metrics_pool){ .pid = 100, .pool = POOL_KV_CACHE, .live_bytes = 30,
				       .peak_bytes = 40, .allocs = 5, .frees = 4, .reserved_bytes = 36 };
	kvs[0] = (struct metrics_kv){ .pid = 100, .used_bytes = 1024, .capacity_bytes = 4096 };
	procs[0] = (struct metrics_proc){ .pid = 200, .tokens_per_second = 0 };
	procs[1] = (struct metrics_proc){ .pid = 100, .tokens_per_second = 331.5 };
	*s = (struct metrics_snapshot){
		.binary = "/opt/my \"infer\"\\bin",
		.aggs = aggs, .naggs = 5, .pools = pools, .npools = 2, .kvs = kvs, .nkvs = 1,
		.procs = procs, .nprocs = 2, .maps = maps, .nmaps = 2, .has_tail = 1,
	};
	s->counters.fired[EV_SPAN] = 12;
	s->counters.dropped[EV_SPAN] = 2;
	s->ringbuf_delivered[EV_SPAN] = 10;
	s->counters.span_errors = 2;
	for (unsigned k = 0; k < SPAN_KIND_COUNT; k++)
		s->tail.slow_ns[k] = UINT64_MAX;
	s->tail.slow_ns[SPAN_QKV] = 2500000;
	s->tail.spans_dropped = 3;
}

static int count_lines_starting(const char *text, const char *prefix)
{
	int n = 0;
	size_t plen = strlen(prefix);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, prefix, plen) == 0)
			n++;
	return n;
}

static int has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return 1;
	return 0;
}

/* Every _bucket series must be non-decreasing and end at +Inf == _count. */
static void check_histograms(const char *text)
{
	uint64_t prev = 0;
	int in_series = 0;
	char *copy = strdup(text);
	CHECK(copy, "strdup");
	if (!copy)
		return;
	for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(line, ' ');
		if (line[0] == '#' || !sp)
			continue;
		uint64_t v = strtoull(sp + 1, NULL, 10);
		if (strstr(line, "_bucket{")) {
			CHECK(!in_series || v >= prev, "bucket decreased: %s", line);
			prev = v;
			in_series = !strstr(line, "le=\"+Inf\"");
		} else if (strstr(line, "_count{")) {
			CHECK(v == prev, "_count %" PRIu64 " != +Inf bucket %" PRIu64 ": %s", v, prev, line);
			prev = 0;
		}
	}
	free(copy);
}

static void test_render(void)
{
	struct metrics_snapshot s;
	char *a = NULL, *b = NULL;
	size_t alen = 0, blen = 0;
	fill_sample(&s);
	CHECK(prom_render(&s, &a, &alen) == 0 && a, "render");
	if (!a)
		return;
	CHECK(strlen(a) == alen, "length");

	const char *families[] = {
		"spantrace_up", "spantrace_span_duration_seconds", "spantrace_token_duration_seconds",
		"spantrace_request_duration_seconds", "spantrace_kernel_duration_seconds",
		"spantrace_span_max_seconds", "spantrace_tokens_total", "spantrace_pool_live_bytes",
		"spantrace_kv_cache_used_bytes", "spantrace_tokens_per_second",
		"spantrace_events_dropped_total", "spantrace_tail_spans_dropped_total",
		"spantrace_bpf_map_bytes",
	};
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
		char prefix[128];
		snprintf(prefix, sizeof(prefix), "# TYPE %s ", families[i]);
		CHECK(count_lines_starting(a, prefix) == 1, "one TYPE for %s", families[i]);
		snprintf(prefix, sizeof(prefix), "# HELP %s ", families[i]);
		CHECK(count_lines_starting(a, prefix) == 1, "one HELP for %s", families[i]);
	}
	CHECK(has_line(a, "# TYPE spantrace_span_duration_seconds histogram"), "histogram type");

#define BIN "binary=\"/opt/my \\\"infer\\\"\\\\bin\""
	const char *expect[] = {
		"spantrace_up{" BIN "} 1",
		"spantrace_span_duration_seconds_bucket{span=\"qkv\",layer=\"0\",pid=\"100\"," BIN ",le=\"0\"} 1",
		"spantrace_span_duration_seconds_bucket{span=\"qkv\",layer=\"0\",pid=\"100\"," BIN ",le=\"1.023e-06\"} 1",
		"spantrace_span_duration_seconds_bucket{span=\"qkv\",layer=\"0\",pid=\"100\"," BIN ",le=\"1.151e-06\"} 3",
		"spantrace_span_duration_seconds_bucket{span=\"qkv\",layer=\"1\",pid=\"200\"," BIN ",le=\"1.476395007\"} 3",
		"spantrace_span_duration_seconds_bucket{span=\"qkv\",layer=\"1\",pid=\"200\"," BIN ",le=\"1.610612735\"} 3",
		"spantrace_span_duration_seconds_bucket{span=\"forward\",layer=\"none\",pid=\"100\"," BIN ",le=\"0.001966079\"} 0",
		"spantrace_span_duration_seconds_bucket{span=\"forward\",layer=\"none\",pid=\"100\"," BIN ",le=\"0.002097151\"} 1",
		"spantrace_span_duration_seconds_bucket{span=\"qkv\",layer=\"0\",pid=\"100\"," BIN ",le=\"+Inf\"} 4",
		"spantrace_span_duration_seconds_sum{span=\"qkv\",layer=\"0\",pid=\"100\"," BIN "} 1.500000001",
		"spantrace_span_duration_seconds_count{span=\"qkv\",layer=\"0\",pid=\"100\"," BIN "} 4",
		"spantrace_span_duration_seconds_count{span=\"forward\",layer=\"none\",pid=\"100\"," BIN "} 1",
		"spantrace_span_max_seconds{span=\"qkv\",layer=\"0\",pid=\"100\"," BIN "} 1.5",
		"spantrace_span_mismatched_ends_total{span=\"qkv\",layer=\"0\",pid=\"100\"," BIN "} 2",
		"spantrace_token_duration_seconds_count{pid=\"100\"," BIN "} 7",
		"spantrace_tokens_total{pid=\"100\"," BIN "} 7",
		"spantrace_kernel_duration_seconds_count{kernel=\"matvec\",layer=\"2\",pid=\"100\"," BIN "} 1",
		"spantrace_pool_live_bytes{pool=\"kv_cache\",pid=\"100\"," BIN "} 30",
		"spantrace_pool_allocs_total{pool=\"kv_cache\",pid=\"100\"," BIN "} 5",
		"spantrace_pool_reserved_bytes{pool=\"kv_cache\",pid=\"100\"," BIN "} 36",
		"spantrace_kv_cache_capacity_bytes{pid=\"100\"," BIN "} 4096",
		"spantrace_tokens_per_second{pid=\"100\"," BIN "} 331.5",
		"spantrace_traced_processes 2",
		"spantrace_events_fired_total{event=\"span\"} 12",
		"spantrace_events_dropped_total{event=\"span\"} 2",
		"spantrace_events_delivered_total{event=\"span\"} 10",
		"spantrace_span_errors_total 2",
		"spantrace_tail_spans_dropped_total 3",
		"spantrace_tail_threshold_seconds{span=\"qkv\"} 0.0025",
		"spantrace_bpf_map_bytes{map=\"agg\"} 1048576",
	};
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++)
		CHECK(has_line(a, expect[i]), "missing line: %s", expect[i]);
	CHECK(!strstr(a, "spantrace_tail_threshold_seconds{span=\"forward\""), "threshold off must not show");
	/* A kind's series share their edges: every bucket from 0 ns up to the one
	 * holding 1.5 s, for both processes, plus +Inf. */
	int qkv_edges = (int)hist_bucket(1500000000) + 1 + 1;
	CHECK(count_lines_starting(a, "spantrace_span_duration_seconds_bucket{span=\"qkv\",layer=\"0\"")
		      == qkv_edges, "qkv layer 0: %d bucket lines", qkv_edges);
	CHECK(count_lines_starting(a, "spantrace_span_duration_seconds_bucket{span=\"qkv\",layer=\"1\"")
		      == qkv_edges, "qkv layer 1 has the same edges as layer 0");
	/* One value: its bucket, the edge below it, +Inf. */
	CHECK(count_lines_starting(a, "spantrace_span_duration_seconds_bucket{span=\"forward\"") == 3,
	      "forward: 3 bucket lines");

	/* Sorted: pid 100's series precede pid 200's. */
	const char *p100 = strstr(a, "spantrace_span_duration_seconds_bucket{span=\"qkv\",layer=\"0\",pid=\"100\"");
	const char *p200 = strstr(a, "spantrace_span_duration_seconds_bucket{span=\"qkv\",layer=\"1\",pid=\"200\"");
	CHECK(p100 && p200 && p100 < p200, "series sorted by pid");
	check_histograms(a);

	/* Stable: the same data renders byte-identically. */
	fill_sample(&s);
	CHECK(prom_render(&s, &b, &blen) == 0 && b && blen == alen && memcmp(a, b, alen) == 0,
	      "render is stable");

	const char *path = getenv("PROM_SAMPLE_OUT");
	if (path) {
		FILE *f = fopen(path, "w");
		CHECK(f && fwrite(a, 1, alen, f) == alen && fclose(f) == 0, "write %s", path);
	}
	free(a);
	free(b);
}

static void test_empty(void)
{
	struct metrics_snapshot s = { 0 };
	char *a = NULL;
	size_t n = 0;
	CHECK(prom_render(&s, &a, &n) == 0 && a, "empty render");
	CHECK(a && has_line(a, "spantrace_up{binary=\"\"} 1"), "empty snapshot still says up");
	CHECK(a && !strstr(a, "spantrace_tail_"), "no tail families without tail capture");
	free(a);
}

/* ---- OTLP: the same families from the same model ---- */

/* Each "# HELP name help" line of the exposition whose family has samples
 * (OTLP leaves empty families out), as "name help". */
static size_t prom_helps(const char *text, char lines[][512], size_t max)
{
	size_t n = 0;

	for (const char *p = text; (p = strstr(p, "# HELP ")) && n < max; p++) {
		const char *eol = strchr(p, '\n'), *name = p + 7;
		size_t namelen = strcspn(name, " ");
		char sample[160];

		/* a sample line follows the TYPE line when the family has points */
		const char *type_eol = eol ? strchr(eol + 1, '\n') : NULL;
		snprintf(sample, sizeof(sample), "%.*s", (int)namelen, name);
		if (!eol || !type_eol || strncmp(type_eol + 1, sample, namelen))
			continue;
		snprintf(lines[n++], sizeof(lines[0]), "%.*s", (int)(eol - name), name);
	}
	return n;
}

static void test_otlp_same_families(void)
{
	static char want[128][512];
	struct metrics_snapshot s;
	char *text = NULL, *body;
	size_t len = 0, nwant;
	uint64_t points = 0;
	json_object *root, *metrics = NULL, *rms, *sms;

	fill_sample(&s);
	CHECK(prom_render(&s, &text, &len) == 0, "prom render");
	body = otlp_metrics_body(&s, 1, 2, "host", &points);
	CHECK(body && points > 0, "otlp body");
	if (!text || !body)
		goto out;
	nwant = prom_helps(text, want, 128);
	CHECK(nwant >= 30, "the sample fills %zu families", nwant);
	root = json_tokener_parse(body);
	if (root && json_object_object_get_ex(root, "resourceMetrics", &rms) &&
	    (sms = json_object_array_get_idx(rms, 0)) && json_object_object_get_ex(sms, "scopeMetrics", &sms) &&
	    (sms = json_object_array_get_idx(sms, 0)))
		json_object_object_get_ex(sms, "metrics", &metrics);
	CHECK(metrics && json_object_array_length(metrics) == nwant,
	      "OTLP metrics %zu = Prometheus families with samples %zu",
	      metrics ? json_object_array_length(metrics) : 0, nwant);
	for (size_t i = 0; metrics && i < nwant && i < json_object_array_length(metrics); i++) {
		json_object *m = json_object_array_get_idx(metrics, i), *name, *desc;
		char got[512];

		json_object_object_get_ex(m, "name", &name);
		json_object_object_get_ex(m, "description", &desc);
		snprintf(got, sizeof(got), "%s %s", json_object_get_string(name), json_object_get_string(desc));
		CHECK(!strcmp(got, want[i]), "family %zu: OTLP '%s', Prometheus '%s'", i, got, want[i]);
	}
	/* every loss counter in both: 3 per-event families and 10 totals */
	CHECK(strstr(body, "\"spantrace_events_dropped_total\"") && strstr(body, "\"spantrace_kernel_records_truncated_total\""),
	      "OTLP has the loss counters");
	json_object_put(root);
out:
	free(text);
	free(body);
}

/* ---- the HTTP endpoint ---- */

static int render_calls;

static int render_sample(void *ctx, char **body, size_t *len)
{
	struct metrics_snapshot s = { .binary = ctx };
	render_calls++;
	return prom_render(&s, body, len);
}

/* One HTTP/1.0 exchange; returns the whole response (malloc'd) or NULL. */
static char *http(unsigned port, const char *request)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    write(fd, request, strlen(request)) != (ssize_t)strlen(request)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	ssize_t n;
	while (buf && (n = read(fd, buf + len, cap - len - 1)) > 0)
		len += (size_t)n;
	close(fd);
	if (buf)
		buf[len] = '\0';
	return buf;
}

static int status_of(const char *response)
{
	const char *sp = strchr(response, ' ');
	return sp ? atoi(sp + 1) : -1;
}

static void test_httpd(void)
{
	struct listen_addr la;
	char err[256];
	CHECK(listen_addr_parse("127.0.0.1:0", &la, err, sizeof(err)) == 0, "parse: %s", err);
	struct httpd *h = httpd_start(&la, render_sample, "/bin/x", err, sizeof(err));
	CHECK(h, "httpd_start: %s", err);
	if (!h)
		return;
	unsigned port = httpd_port(h);
	CHECK(port > 0, "bound a port");

	char *r = http(port, "GET /metrics HTTP/1.0\r\n\r\n");
	CHECK(r && status_of(r) == 200, "metrics 200: %.40s", r ? r : "(null)");
	CHECK(r && strstr(r, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), "content type");
	CHECK(r && strstr(r, "\r\n\r\n# HELP spantrace_up ") && strstr(r, "spantrace_up{binary=\"/bin/x\"} 1\n"),
	      "metrics body");
	CHECK(render_calls == 1, "rendered once per scrape");
	free(r);
	r = http(port, "GET /healthz HTTP/1.0\r\n\r\n");
	CHECK(r && status_of(r) == 200 && strstr(r, "\r\n\r\nok\n"), "healthz");
	free(r);
	r = http(port, "GET /other HTTP/1.0\r\n\r\n");
	CHECK(r && status_of(r) == 404, "404: %.40s", r ? r : "(null)");
	free(r);
	r = http(port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
	CHECK(r && status_of(r) == 405 && strstr(r, "Allow: GET, HEAD"), "405: %.40s",
	      r ? r : "(null)");
	free(r);

	/* The same port again: a clear "in use" error, not a silent failure. */
	char in_use[64];
	snprintf(in_use, sizeof(in_use), "127.0.0.1:%u", port);
	struct listen_addr la2;
	listen_addr_parse(in_use, &la2, err, sizeof(err));
	struct httpd *h2 = httpd_start(&la2, render_sample, NULL, err, sizeof(err));
	CHECK(!h2 && strstr(err, "Address already in use") && strstr(err, in_use), "in use: %s", err);
	httpd_stop(h2);
	httpd_stop(h);

	/* An address this host does not have. */
	listen_addr_parse("192.0.2.1:9464", &la2, err, sizeof(err));
	CHECK(!httpd_start(&la2, render_sample, NULL, err, sizeof(err)) && strstr(err, "192.0.2.1:9464"),
	      "foreign address: %s", err);
}

int main(void)
{
	test_escape();
	test_bounds();
	test_render();
	test_empty();
	test_otlp_same_families();
	test_httpd();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("test_prom: all checks passed\n");
	return 0;
}
