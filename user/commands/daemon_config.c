/* daemon_config.c - flags + SPANTRACE_* variables -> struct daemon_config.
 * Every value is collected as text first (variable, then flag on top), then
 * validated once, so an error names where the bad value came from. */
#include "commands/daemon_config.h"
#include "core/numparse.h"
#include "core/userspans.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum opt {
	OPT_BINARY, OPT_PID, OPT_LISTEN, OPT_JSONL_DIR, OPT_SLOW_MS, OPT_SLOW_PCT,
	OPT_INTERVAL, OPT_FILE_MAX, OPT_TOTAL_MAX, OPT_RETAIN, OPT_LEVEL, OPT_DURATION, OPT_OTLP, OPT_EXPIRE, OPT_ENGINE, OPT_COUNT
};

static const struct {
	const char *flag, *short_flag, *env;
} opts[OPT_COUNT] = {
	[OPT_BINARY] = { "--binary", NULL, "SPANTRACE_BINARY" },
	[OPT_PID] = { "--pid", "-p", NULL },
	[OPT_LISTEN] = { "--listen", NULL, "SPANTRACE_LISTEN" },
	[OPT_JSONL_DIR] = { "--jsonl-dir", NULL, "SPANTRACE_JSONL_DIR" },
	[OPT_SLOW_MS] = { "--slow-ms", NULL, "SPANTRACE_SLOW_MS" },
	[OPT_SLOW_PCT] = { "--slow-pct", NULL, "SPANTRACE_SLOW_PCT" },
	[OPT_INTERVAL] = { "--interval", NULL, "SPANTRACE_INTERVAL_SECS" },
	[OPT_FILE_MAX] = { "--file-max", NULL, "SPANTRACE_FILE_MAX_BYTES" },
	[OPT_TOTAL_MAX] = { "--total-max", NULL, "SPANTRACE_TOTAL_MAX_BYTES" },
	[OPT_RETAIN] = { "--retain", NULL, "SPANTRACE_RETAIN_FILES" },
	[OPT_LEVEL] = { "--level", NULL, "SPANTRACE_LEVEL" },
	[OPT_DURATION] = { "--duration", NULL, NULL },
	[OPT_OTLP] = { "--otlp", NULL, "SPANTRACE_OTLP_ENDPOINT" },
	[OPT_EXPIRE] = { "--expire", NULL, "SPANTRACE_EXPIRE_SECS" },
	[OPT_ENGINE] = { "--engine", NULL, NULL },
};

const char daemon_config_usage[] =
	"usage: spantrace daemon {--binary PATH [-p PID] | --all-engines} [--listen ADDR:PORT] [--jsonl-dir DIR]\n"
	"                        [--slow-ms X | --slow-pct P] [--interval SEC]\n"
	"                        [--file-max SIZE] [--total-max SIZE] [--retain N]\n"
	"                        [--level coarse|detail] [--expire SEC] [--duration SEC] [--otlp URL] [--opencl]\n"
	"                        [--span SPEC]... [--engine infer|llamacpp|none] [--no-http] [-q] [-v]\n"
	"Traces every current and future process of PATH (or only PID), or with --all-engines every\n"
	"process on the host that maps a file with `infer` probes, whatever its path, mount namespace\n"
	"or container (series get ns_pid and cgroup labels); serves Prometheus metrics on\n"
	"http://ADDR:PORT/metrics (default 127.0.0.1:9464) and writes spans at least as slow\n"
	"as the threshold (default: the running p99 of their kind) to rotating JSONL files.\n"
	"Each flag has a variable that it overrides: SPANTRACE_BINARY, SPANTRACE_LISTEN,\n"
	"SPANTRACE_JSONL_DIR, SPANTRACE_SLOW_MS, SPANTRACE_SLOW_PCT, SPANTRACE_INTERVAL_SECS,\n"
	"SPANTRACE_FILE_MAX_BYTES, SPANTRACE_TOTAL_MAX_BYTES, SPANTRACE_RETAIN_FILES,\n"
	"SPANTRACE_LEVEL, SPANTRACE_OTLP_ENDPOINT. --otlp also sends the metrics, each interval, as\n"
	"OTLP/HTTP JSON to URL/v1/metrics (cumulative). SIZE takes a K, M or G suffix. Defaults: --interval 5, --file-max 16M,\n"
	"--total-max 256M, --retain 16, --level coarse (forward/layer spans, tokens, requests,\n"
	"memory; detail adds every op and OpenCL kernel, with device times, at more probe hits per\n"
	"token, and makes the OpenCL engine launch a kernel per phase: 0.65-0.76x its tok/s).\n"
	"--expire SEC (SPANTRACE_EXPIRE_SECS): an exited process's series leave /metrics, and its\n"
	"entries the kernel maps, SEC seconds after it exits (default: 3 intervals, at least 30).\n"
	"--duration stops it after SEC seconds; -q logs nothing but errors; -v more.\n"
	"Each traced process's HTTP/1.x requests are timed from its sockets (spantrace_http_*:\n"
	"arrival to first SSE event and to the response's end; --no-http: not); --engine none -p PID\n"
	"traces only that, for a server spantrace knows no engine of.\n"
	"--opencl also times the target's calls into the OpenCL ICD loader (libOpenCL.so.1; any\n"
	"OpenCL program, no restart): spantrace_opencl_* histograms. --span uprobe:PATH:FUNCTION[:NAME]\n"
	"or usdt:PATH:PROVIDER:BEGIN,END[:NAME] adds a span of any program (a span label).\n"
	"SIGHUP reopens the JSONL file; SIGTERM and SIGINT flush and exit.\n";

struct raw_value {
	const char *text;
	int from_flag;
};

/* ---- collecting text values ---- */

static const char *source_name(enum opt o, const struct raw_value *r)
{
	return r->from_flag || !opts[o].env ? opts[o].flag : opts[o].env;
}

static void collect_env(struct raw_value *raw, char **envp)
{
	for (char **e = envp; e && *e; e++) {
		for (int o = 0; o < OPT_COUNT; o++) {
			size_t n = opts[o].env ? strlen(opts[o].env) : 0;
			/* An empty variable counts as unset, as shells make it easy to export one. */
			if (n && !strncmp(*e, opts[o].env, n) && (*e)[n] == '=' && (*e)[n + 1])
				raw[o] = (struct raw_value){ *e + n + 1, 0 };
		}
	}
}

static int find_flag(const char *arg, size_t len)
{
	for (int o = 0; o < OPT_COUNT; o++) {
		if (strlen(opts[o].flag) == len && !strncmp(arg, opts[o].flag, len))
			return o;
		if (opts[o].short_flag && strlen(opts[o].short_flag) == len &&
		    !strncmp(arg, opts[o].short_flag, len))
			return o;
	}
	return -1;
}

static int collect_flags(struct daemon_config *c, struct raw_value *raw, int argc, char **argv,
			 char *err, size_t errlen)
{
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (!strcmp(arg, "-h") || !strcmp(arg, "--help"))
			return DAEMON_CONFIG_HELP;
		if (!strcmp(arg, "-v") || !strcmp(arg, "--verbose")) {
			c->verbose++;
			continue;
		}
		if (!strcmp(arg, "--all-engines")) {
			c->all_engines = 1;
			continue;
		}
		if (!strcmp(arg, "-q") || !strcmp(arg, "--quiet")) {
			c->common.quiet = 1;
			continue;
		}
		if (!strcmp(arg, "--opencl")) {
			c->opencl = 1;
			continue;
		}
		if (!strcmp(arg, "--no-http")) {
			c->no_http = 1;
			continue;
		}
		if (!strcmp(arg, "--span")) {   /* repeatable: straight into the table */
			if (i + 1 >= argc) {
				snprintf(err, errlen, "daemon: --span needs a value");
				return DAEMON_CONFIG_ERROR;
			}
			if (user_span_add(argv[++i], err, errlen))
				return DAEMON_CONFIG_ERROR;
			c->spans++;
			continue;
		}
		const char *eq = !strncmp(arg, "--", 2) ? strchr(arg, '=') : NULL;
		int o = find_flag(arg, eq ? (size_t)(eq - arg) : strlen(arg));
		if (o < 0) {
			snprintf(err, errlen, "daemon: unknown argument '%s' (see --help)", arg);
			return DAEMON_CONFIG_ERROR;
		}
		const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
		if (!value || !*value) {
			snprintf(err, errlen, "daemon: %s needs a value", opts[o].flag);
			return DAEMON_CONFIG_ERROR;
		}
		raw[o] = (struct raw_value){ value, 1 };
	}
	return DAEMON_CONFIG_OK;
}

/* --slow-ms and --slow-pct exclude each other at the same level; a flag of
 * either kind overrides both variables. */
static int resolve_slow(struct raw_value *raw, char *err, size_t errlen)
{
	struct raw_value *ms = &raw[OPT_SLOW_MS], *pct = &raw[OPT_SLOW_PCT];
	if (ms->from_flag && !pct->from_flag)
		pct->text = NULL;
	else if (pct->from_flag && !ms->from_flag)
		ms->text = NULL;
	if (ms->text && pct->text) {
		snprintf(err, errlen, "daemon: %s and %s exclude each other", source_name(OPT_SLOW_MS, ms),
			 source_name(OPT_SLOW_PCT, pct));
		return -1;
	}
	return 0;
}

/* ---- validation ---- */

static int bad(char *err, size_t errlen, enum opt o, const struct raw_value *r, const char *want)
{
	snprintf(err, errlen, "daemon: %s must be %s, got '%s'", source_name(o, r), want, r->text);
	return -1;
}

static int apply_numbers(struct daemon_config *c, const struct raw_value *raw, char *err, size_t errlen)
{
	uint64_t u;
	const struct raw_value *r;

	if ((r = &raw[OPT_PID])->text) {
		if (parse_uint(r->text, 1, INT_MAX, &u) < 0)
			return bad(err, errlen, OPT_PID, r, "a process id > 0");
		c->pid = (int)u;
	}
	if ((r = &raw[OPT_SLOW_MS])->text) {
		if (parse_real(r->text, 0, 1e9, &c->slow_ms) < 0)
			return bad(err, errlen, OPT_SLOW_MS, r, "milliseconds >= 0");
		c->slow_pct = 0;
	}
	if ((r = &raw[OPT_SLOW_PCT])->text) {
		if (parse_real_above(r->text, 0, 100, &c->slow_pct) < 0 || c->slow_pct == 100)
			return bad(err, errlen, OPT_SLOW_PCT, r, "a percentile strictly between 0 and 100");
		c->slow_ms = -1;
	}
	if ((r = &raw[OPT_EXPIRE])->text &&
	    parse_real(r->text, 0.1, 86400 * 7, &c->expire_secs) < 0)
		return bad(err, errlen, OPT_EXPIRE, r, "seconds between 0.1 and 604800");
	if ((r = &raw[OPT_INTERVAL])->text) {
		if (parse_real(r->text, 0.05, 86400, &c->interval_secs) < 0)
			return bad(err, errlen, OPT_INTERVAL, r, "seconds between 0.05 and 86400");
	}
	if ((r = &raw[OPT_FILE_MAX])->text) {
		if (parse_size(r->text, &c->file_max_bytes) < 0 || c->file_max_bytes == 0)
			return bad(err, errlen, OPT_FILE_MAX, r, "a size > 0 (bytes, K, M or G)");
	}
	if ((r = &raw[OPT_TOTAL_MAX])->text) {
		if (parse_size(r->text, &c->total_max_bytes) < 0 || c->total_max_bytes == 0)
			return bad(err, errlen, OPT_TOTAL_MAX, r, "a size > 0 (bytes, K, M or G)");
	}
	if ((r = &raw[OPT_DURATION])->text) {
		if (duration_parse(r->text, &c->common.duration_s) < 0)
			return bad(err, errlen, OPT_DURATION, r, "seconds > 0");
	}
	if ((r = &raw[OPT_RETAIN])->text) {
		if (parse_uint(r->text, 1, 1000000, &u) < 0)
			return bad(err, errlen, OPT_RETAIN, r, "a file count between 1 and 1000000");
		c->retain_files = (unsigned)u;
	}
	if (c->total_max_bytes < c->file_max_bytes) {
		snprintf(err, errlen, "daemon: total cap (%llu bytes) is below the per-file cap (%llu bytes)",
			 (unsigned long long)c->total_max_bytes, (unsigned long long)c->file_max_bytes);
		return -1;
	}
	return 0;
}

static void set_defaults(struct daemon_config *c)
{
	char ignored[8];
	memset(c, 0, sizeof(*c));
	listen_addr_parse(HTTPD_DEFAULT_LISTEN, &c->listen, ignored, sizeof(ignored));
	c->slow_ms = -1;
	c->slow_pct = 99;
	c->interval_secs = 5;
	c->file_max_bytes = 16ull << 20;
	c->total_max_bytes = 256ull << 20;
	c->retain_files = 16;
	c->common.level = LEVEL_COARSE;
}

int daemon_config_parse(struct daemon_config *c, int argc, char **argv, char **envp,
			char *err, size_t errlen)
{
	struct raw_value raw[OPT_COUNT] = { { 0 } };

	set_defaults(c);
	collect_env(raw, envp);
	int rc = collect_flags(c, raw, argc, argv, err, errlen);
	if (rc != DAEMON_CONFIG_OK)
		return rc;
	if (resolve_slow(raw, err, errlen) < 0)
		return DAEMON_CONFIG_ERROR;
	if (!raw[OPT_BINARY].text && !raw[OPT_PID].text && !c->all_engines) {
		snprintf(err, errlen, "daemon: need --binary PATH (or SPANTRACE_BINARY), -p PID or --all-engines");
		return DAEMON_CONFIG_ERROR;
	}
	if (c->all_engines && (raw[OPT_BINARY].text || raw[OPT_PID].text)) {
		snprintf(err, errlen, "daemon: --all-engines traces every engine; it takes no --binary or -p");
		return DAEMON_CONFIG_ERROR;
	}
	if (raw[OPT_LEVEL].text && trace_level_parse(raw[OPT_LEVEL].text, &c->common.level))
		return bad(err, errlen, OPT_LEVEL, &raw[OPT_LEVEL], "coarse or detail");
	if (raw[OPT_ENGINE].text && (engine_parse(raw[OPT_ENGINE].text, &c->engine) || c->engine == ENGINE_AUTO))
		return bad(err, errlen, OPT_ENGINE, &raw[OPT_ENGINE], "infer, llamacpp or none");
	if (c->engine == ENGINE_NONE && (c->no_http || !raw[OPT_PID].text)) {
		snprintf(err, errlen, "daemon: --engine none traces only one process's sockets: it needs -p PID, "
			 "and no --no-http");
		return DAEMON_CONFIG_ERROR;
	}
	c->binary = raw[OPT_BINARY].text;
	c->jsonl_dir = raw[OPT_JSONL_DIR].text;
	c->otlp = raw[OPT_OTLP].text;
	if (c->otlp && strncmp(c->otlp, "http://", 7) && strncmp(c->otlp, "https://", 8))
		return bad(err, errlen, OPT_OTLP, &raw[OPT_OTLP], "an http:// or https:// URL");
	if (raw[OPT_LISTEN].text) {
		char why[160];
		if (listen_addr_parse(raw[OPT_LISTEN].text, &c->listen, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "daemon: %s: %s", source_name(OPT_LISTEN, &raw[OPT_LISTEN]), why);
			return DAEMON_CONFIG_ERROR;
		}
	}
	return apply_numbers(c, raw, err, errlen) < 0 ? DAEMON_CONFIG_ERROR : DAEMON_CONFIG_OK;
}
