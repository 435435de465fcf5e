/* fuzz_infer_cli.c - the engine CLI's argument parsing (parse_args in
 * inference/cmd/main.c), which is static: main.c is included here with its main
 * renamed to an unused static function, so nothing past parsing is linked.
 * The input is NUL-separated words, argv[0] first.
 * fuzz-sources: inference/base/error.c inference/text/chat.c
 */
#include "fuzz_common.h"

#define main static __attribute__((unused)) infer_cli_main_unused
#include "../../inference/cmd/main.c"
#undef main

#define MAX_WORDS 64

/* What a successful parse promises: a model, and a tokenizer unless --ids
 * or --http (which takes token-id prompts without one). */
static void check_args(const Args *a)
{
	FUZZ_CHECK(a->eng.model_path != NULL);
	FUZZ_CHECK(a->ids || a->eng.tokenizer_path || a->http);
	FUZZ_CHECK(!(a->http && (a->serve || a->prompt)));
	FUZZ_CHECK(!(a->serve && a->prompt));
	FUZZ_CHECK(a->eng.steps >= 0);
	FUZZ_CHECK(a->eng.temperature >= 0 && isfinite(a->eng.temperature));
	FUZZ_CHECK(a->eng.topp >= 0 && a->eng.topp <= 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = fuzz_strdup(data, size), *argv[MAX_WORDS + 1];
	int argc;
	Args a;

	if (!buf)
		return 0;
	argc = fuzz_split(buf, size, argv, MAX_WORDS);
	argv[argc] = NULL;
	if (parse_args(&a, argc, argv) == 0)
		check_args(&a);
	free(buf);
	return 0;
}
