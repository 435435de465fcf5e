/* fuzz_perfev_list.c - the tracer's --events list ("a,b,c": perfev_parse_list)
 * and -p PID text (parse_pid in user/core/target.c, included for it). The input's
 * first byte picks the list's maximum length (0..PERF_COUNTERS_MAX).
 * fuzz-cflags: -DSPANTRACE_USER_SPANS
 * fuzz-sources: user/analysis/perfev.c user/core/stapsdt.c user/core/numparse.c
 * fuzz-libs: -lbpf -lelf
 */
#include "fuzz_common.h"
#include "analysis/perfev.h"
#include "../../user/core/target.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct perf_event_desc *out[PERF_COUNTERS_MAX];
	unsigned max, n = 12345;
	char err[256], *list;
	pid_t pid;

	if (size < 1)
		return 0;
	max = data[0] % (PERF_COUNTERS_MAX + 1);
	list = fuzz_strdup(data + 1, size - 1);
	if (!list)
		return 0;
	err[0] = '\0';
	if (perfev_parse_list(list, out, max, &n, err, sizeof(err)) == 0) {
		/* every name listed once, known, and within max */
		FUZZ_CHECK(n >= 1 && n <= max);
		for (unsigned i = 0; i < n; i++) {
			FUZZ_CHECK(out[i] && perfev_lookup(out[i]->name) == out[i]);
			FUZZ_CHECK(strstr(list, out[i]->name) != NULL);
			for (unsigned j = 0; j < i; j++)
				FUZZ_CHECK(out[j] != out[i]);
		}
	} else {
		FUZZ_CHECK(err[0] != '\0' && memchr(err, 0, sizeof(err)));
	}
	pid = parse_pid(list);
	FUZZ_CHECK(pid == -1 || (pid > 0 && pid <= 0x3fffffff));
	free(list);
	return 0;
}
