/* test_daemon_config.c - daemon flags and SPANTRACE_* variables: defaults,
 * precedence (flag beats variable), validation errors and listen
 * addresses. */
#include "commands/daemon_config.h"
#include "check.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define ARGV(...) (char *[]){ "daemon", __VA_ARGS__, NULL }

static char err[256];

static int parse(struct daemon_config *c, char **argv, char **envp)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	err[0] = '\0';
	return daemon_config_parse(c, argc, argv, envp, err, sizeof(err));
}

static void test_defaults(void)
{
	struct daemon_config c;
	char **argv = ARGV("--binary", "/bin/infer");
	CHECK(parse(&c, argv, NULL) == DAEMON_CONFIG_OK, "defaults: %s", err);
	CHECK(!strcmp(c.binary, "/bin/infer"), "binary");
	CHECK(c.pid == 0 && c.jsonl_dir == NULL && c.common.level == LEVEL_COARSE, "pid/dir/level defaults");
	CHECK(!strcmp(c.listen.text, "127.0.0.1:9464"), "default listen %s", c.listen.text);
	struct sockaddr_in *a = (struct sockaddr_in *)&c.listen.ss;
	CHECK(a->sin_family == AF_INET && ntohs(a->sin_port) == 9464 &&
	      a->sin_addr.s_addr == htonl(INADDR_LOOPBACK), "default binds loopback only");
	CHECK(c.slow_ms < 0 && c.slow_pct == 99, "default threshold p99");
	CHECK(c.interval_secs == 5, "interval default");
	CHECK(c.file_max_bytes == 16u << 20 && c.total_max_bytes == 256u << 20 && c.retain_files == 16,
	      "cap defaults");
}

static void test_flags_and_env(void)
{
	struct daemon_config c;
	char *env[] = { "PATH=/usr/bin", "SPANTRACE_BINARY=/env/infer", "SPANTRACE_LISTEN=0.0.0.0:9000",
			"SPANTRACE_INTERVAL_SECS=2.5", "SPANTRACE_SLOW_PCT=95", "SPANTRACE_JSONL_DIR=/var/x",
			"SPANTRACE_FILE_MAX_BYTES=64K", "SPANTRACE_TOTAL_MAX_BYTES=1MiB",
			"SPANTRACE_RETAIN_FILES=3", "SPANTRACE_SLOW_MSX=1", NULL };
	char **argv0 = ARGV("--interval", "1");
	CHECK(parse(&c, argv0, env) == DAEMON_CONFIG_OK, "env: %s", err);
	CHECK(!strcmp(c.binary, "/env/infer"), "binary from env");
	CHECK(!strcmp(c.listen.text, "0.0.0.0:9000"), "listen from env");
	CHECK(c.interval_secs == 1, "flag beats env for interval (%g)", c.interval_secs);
	CHECK(c.slow_pct == 95 && c.slow_ms < 0, "pct from env");
	CHECK(!strcmp(c.jsonl_dir, "/var/x"), "dir from env");
	CHECK(c.file_max_bytes == 65536 && c.total_max_bytes == 1048576 && c.retain_files == 3, "caps from env");

	/* --slow-ms on the command line overrides SPANTRACE_SLOW_PCT, no error. */
	char **argv1 = ARGV("--slow-ms=0", "-p", "42", "--listen", "[::1]:0");
	CHECK(parse(&c, argv1, env) == DAEMON_CONFIG_OK, "ms flag over pct env: %s", err);
	CHECK(c.slow_ms == 0 && c.pid == 42, "slow-ms 0 and pid");
	CHECK(c.listen.ss.ss_family == AF_INET6 && c.listen.len == sizeof(struct sockaddr_in6), "v6 listen");

	/* -p alone is enough; the level comes from the environment. */
	char *env_pid[] = { "SPANTRACE_LEVEL=detail", NULL };
	char **argv3 = ARGV("-p", "7", "-v", "--verbose");
	CHECK(parse(&c, argv3, env_pid) == DAEMON_CONFIG_OK && c.pid == 7 && !c.binary && c.common.level == LEVEL_DETAIL &&
	      c.verbose == 2,
	      "pid only: %s", err);

	/* An empty variable counts as unset. */
	char *env_empty[] = { "SPANTRACE_BINARY=", NULL };
	char **argv2 = ARGV("--interval", "1");
	CHECK(parse(&c, argv2, env_empty) == DAEMON_CONFIG_ERROR && strstr(err, "--binary"),
	      "empty env binary: %s", err);
}

struct bad_case {
	char *args[6];
	const char *env;
	const char *expect_in_err;
};

static void test_errors(void)
{
	static const struct bad_case cases[] = {
		{ { "--binary", "b", "--interval", "-1" }, NULL, "--interval must be" },
		{ { "--binary", "b", "--interval", "0" }, NULL, "--interval" },
		{ { "--binary", "b", "--interval", "nan" }, NULL, "--interval" },
		{ { "--binary", "b", "--interval", "1s" }, NULL, "--interval" },
		{ { "--binary", "b" }, "SPANTRACE_INTERVAL_SECS=abc", "SPANTRACE_INTERVAL_SECS must be" },
		{ { "--binary", "b", "--slow-ms", "5", "--slow-pct", "90" }, NULL, "exclude" },
		{ { "--binary", "b", "--slow-pct", "100" }, NULL, "--slow-pct" },
		{ { "--binary", "b", "--slow-pct", "0" }, NULL, "--slow-pct" },
		{ { "--binary", "b", "--slow-ms", "-3" }, NULL, "--slow-ms" },
		{ { "--binary", "b", "--listen", "localhost:80" }, NULL, "bad listen address" },
		{ { "--binary", "b", "--listen", "127.0.0.1" }, NULL, "bad listen address" },
		{ { "--binary", "b", "--listen", "127.0.0.1:65536" }, NULL, "port" },
		{ { "--binary", "b", "--listen", "127.0.0.1:-1" }, NULL, "port" },
		{ { "--binary", "b", "--listen", "::1:80" }, NULL, "bad listen address" },
		{ { "--binary", "b", "--listen", "[::1]80" }, NULL, "bad listen address" },
		{ { "--binary", "b", "--file-max", "10X" }, NULL, "--file-max" },
		{ { "--binary", "b", "--file-max", "-5" }, NULL, "--file-max" },
		{ { "--binary", "b", "--file-max", "99999999999G" }, NULL, "--file-max" },
		{ { "--binary", "b", "--file-max", "2M", "--total-max", "1M" }, NULL, "below the per-file cap" },
		{ { "--binary", "b", "--retain", "0" }, NULL, "--retain" },
		{ { "--binary", "b", "-p", "0" }, NULL, "--pid" },
		{ { "--binary", "b", "-p", "12x" }, NULL, "--pid" },
		{ { "--binary", "b", "--bogus" }, NULL, "unknown argument" },
		{ { "--binary", "b", "stray" }, NULL, "unknown argument" },
		{ { "--binary" }, NULL, "needs a value" },
		{ { "--interval", "1" }, NULL, "need --binary" },
		{ { "--binary", "b", "--level", "max" }, NULL, "--level must be coarse or detail" },
		{ { "--binary", "b", "--engine", "vllm" }, NULL, "infer, llamacpp or none" },
		{ { "--binary", "b", "--engine", "none" }, NULL, "needs -p PID" },
		{ { "-p", "7", "--engine", "none", "--no-http" }, NULL, "no --no-http" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[8] = { "daemon" };
		int argc = 1;
		for (int k = 0; k < 6 && cases[i].args[k]; k++)
			argv[argc++] = cases[i].args[k];
		char *env[] = { (char *)cases[i].env, NULL };
		struct daemon_config c;
		int rc = parse(&c, argv, cases[i].env ? env : NULL);
		CHECK(rc == DAEMON_CONFIG_ERROR, "case %zu (%s %s) accepted", i, argv[argc - 2], argv[argc - 1]);
		CHECK(strstr(err, cases[i].expect_in_err) && !strchr(err, '\n'),
		      "case %zu: error '%s' lacks '%s'", i, err, cases[i].expect_in_err);
	}
	/* Both thresholds from the environment, no flag to decide: an error. */
	struct daemon_config c;
	char *env[] = { "SPANTRACE_SLOW_MS=1", "SPANTRACE_SLOW_PCT=90", NULL };
	char **argv = ARGV("--binary", "b");
	CHECK(parse(&c, argv, env) == DAEMON_CONFIG_ERROR && strstr(err, "SPANTRACE_SLOW_MS"),
	      "two env thresholds: %s", err);
	char **help = ARGV("--help");
	CHECK(parse(&c, help, NULL) == DAEMON_CONFIG_HELP, "--help");
	char **none = ARGV("-p", "7", "--engine", "none");
	CHECK(parse(&c, none, NULL) == DAEMON_CONFIG_OK && c.engine == ENGINE_NONE && !c.no_http,
	      "--engine none -p PID: %s", err);
	char **off = ARGV("--binary", "b", "--no-http");
	CHECK(parse(&c, off, NULL) == DAEMON_CONFIG_OK && c.no_http, "--no-http: %s", err);
}

int main(void)
{
	test_defaults();
	test_flags_and_env();
	test_errors();
	return check_report();
}
