/* fuzz_completion_request.c - the HTTP engine's request parsers
 * (inference/serve/reqparse.c) on any bytes as a POST /v1/completions body and
 * as a /v1/chat/completions body. A body it accepts must keep its
 * promises: a prompt (text without NULs, or ids), or messages with roles
 * and contents; fields in their ranges; and every template family renders
 * the messages or refuses them with a reason (inference/text/chat.c).
 * fuzz-sources: inference/serve/reqparse.c inference/serve/jsonschema.c inference/text/chat.c inference/base/error.c
 * fuzz-libs: -ljson-c
 */
#include <math.h>
#include "fuzz_common.h"
#include "serve/reqparse.h"

static void check_fields(const CompletionRequest *r)
{
	FUZZ_CHECK(isfinite(r->temperature) && r->temperature >= 0 && r->temperature <= 2);
	FUZZ_CHECK(isfinite(r->top_p) && r->top_p >= 0 && r->top_p <= 1);
	FUZZ_CHECK(r->n_stop >= 0 && r->n_stop <= SERVE_MAX_STOP);
	for (int i = 0; i < r->n_stop; i++)
		FUZZ_CHECK(r->stop[i] && r->stop[i][0] != '\0');
	FUZZ_CHECK(r->stream == 0 || r->stream == 1);
	FUZZ_CHECK(r->frequency_penalty >= -2 && r->frequency_penalty <= 2);
	FUZZ_CHECK(r->presence_penalty >= -2 && r->presence_penalty <= 2);
	FUZZ_CHECK(r->repeat_penalty > 0 && r->repeat_penalty <= 10);
	FUZZ_CHECK(r->repeat_last_n >= -1 && r->top_k >= 0 && r->min_p >= 0 && r->min_p <= 1);
	FUZZ_CHECK(r->max_tokens >= 0);
	FUZZ_CHECK(!r->json_schema || r->structured); /* a schema only with structured output */
}

static void check_chat(const CompletionRequest *r)
{
	ServeParams p;

	FUZZ_CHECK(r->messages && r->n_messages >= 1 && r->n_messages <= REQ_MAX_MESSAGES);
	FUZZ_CHECK(!r->prompt_text && !r->prompt_ids);
	FUZZ_CHECK(r->max_tokens >= 0 && r->max_tokens <= REQ_MAX_MAX_TOKENS);
	check_fields(r);
	for (int i = 0; i < r->n_messages; i++)
		FUZZ_CHECK(r->messages[i].content && r->messages[i].role >= CHAT_ROLE_SYSTEM &&
			   r->messages[i].role <= CHAT_ROLE_ASSISTANT);
	for (int f = 0; f < CHAT_FAMILIES; f++)
		for (int v = 0; v < 2; v++) {
			char err[256] = "";
			char *text = chat_render((ChatFormat){ f, v }, r->messages, r->n_messages, "<s>",
						 "</s>", err, sizeof(err));

			FUZZ_CHECK(text || err[0] != '\0');
			free(text);
		}
	completion_request_params(r, &p);
	FUZZ_CHECK(p.chat == 1);
}

static void check_request(const CompletionRequest *r)
{
	ServeParams p;

	FUZZ_CHECK((r->prompt_text != NULL) != (r->prompt_ids != NULL));
	FUZZ_CHECK(r->n_prompt_ids >= 0 && r->n_prompt_ids <= REQ_MAX_PROMPT_IDS);
	for (int i = 0; i < r->n_prompt_ids; i++)
		FUZZ_CHECK(r->prompt_ids[i] >= 0);
	FUZZ_CHECK(r->max_tokens >= 0 && r->max_tokens <= REQ_MAX_MAX_TOKENS); /* 0: to the context */
	check_fields(r);
	completion_request_params(r, &p);
	FUZZ_CHECK(p.max_tokens == r->max_tokens && p.n_stop == r->n_stop);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	CompletionRequest r;
	char err[256];

	if (completion_request_parse((const char *)data, size, &r, err, sizeof(err)) == 0) {
		check_request(&r);
		completion_request_free(&r);
	} else {
		FUZZ_CHECK(err[0] != '\0');
	}
	err[0] = '\0';
	if (chat_request_parse((const char *)data, size, &r, err, sizeof(err)) == 0) {
		check_chat(&r);
		completion_request_free(&r);
	} else {
		FUZZ_CHECK(err[0] != '\0');
	}
	return 0;
}
