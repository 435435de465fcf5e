/* fuzz_daemon_config.c - `spantrace daemon` flags and SPANTRACE_* variables.
 * The input is NUL-separated words: words that look like SPANTRACE_X=V go to
 * envp, the rest to argv (argv[0] first). Every word is also tried as a SIZE.
 * fuzz-cflags: -DSPANTRACE_USER_SPANS
 * fuzz-sources: user/commands/daemon_config.c user/core/userspans.c user/output/httpd.c user/core/numparse.c user/core/options.c user/core/log.c user/core/events.c
 * fuzz-libs: -lmicrohttpd
 */
#include "fuzz_common.h"
#include "commands/daemon_config.h"
#include "core/numparse.h"

#define MAX_WORDS 64

/* What a successful parse promises (see daemon_config.h). */
static void check_config(const struct daemon_config *c)
{
	FUZZ_CHECK(c->binary || c->pid > 0);
	FUZZ_CHECK(c->pid >= 0);
	FUZZ_CHECK(c->slow_ms >= 0 || (c->slow_pct > 0 && c->slow_pct < 100));
	FUZZ_CHECK(c->interval_secs >= 0.05 && c->interval_secs <= 86400);
	FUZZ_CHECK(c->file_max_bytes > 0 && c->total_max_bytes >= c->file_max_bytes);
	FUZZ_CHECK(c->retain_files >= 1 && c->retain_files <= 1000000);
	FUZZ_CHECK(c->listen.len > 0 && memchr(c->listen.text, 0, sizeof(c->listen.text)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = fuzz_strdup(data, size), *words[MAX_WORDS];
	char *argv[MAX_WORDS + 1], *envp[MAX_WORDS + 1], err[256];
	int n, argc = 0, envc = 0, rc;
	struct daemon_config c;
	uint64_t bytes;

	if (!buf)
		return 0;
	n = fuzz_split(buf, size, words, MAX_WORDS);
	for (int i = 0; i < n; i++) {
		if (!strncmp(words[i], "SPANTRACE_", 10) && strchr(words[i], '='))
			envp[envc++] = words[i];
		else
			argv[argc++] = words[i];
		if (parse_size(words[i], &bytes) == 0)
			FUZZ_CHECK(words[i][0] >= '0' && words[i][0] <= '9');
	}
	argv[argc] = NULL;
	envp[envc] = NULL;
	if (argc == 0)
		argv[argc++] = "daemon";
	err[0] = '\0';
	rc = daemon_config_parse(&c, argc, argv, envp, err, sizeof(err));
	FUZZ_CHECK(rc == DAEMON_CONFIG_OK || rc == DAEMON_CONFIG_HELP || rc == DAEMON_CONFIG_ERROR);
	if (rc == DAEMON_CONFIG_OK)
		check_config(&c);
	if (rc == DAEMON_CONFIG_ERROR)
		FUZZ_CHECK(err[0] != '\0' && memchr(err, 0, sizeof(err)));
	free(buf);
	return 0;
}
