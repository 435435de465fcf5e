/* logprobs_json.h - a request's logprobs (serve.h's lp, lp_ids) in
 * OpenAI's two shapes, for generated tokens [from, to):
 *   completions: {"tokens", "token_logprobs", "top_logprobs": [{text:
 *     logprob}], "text_offset"};
 *   chat: {"content": [{"token", "logprob", "bytes", "top_logprobs":
 *     [{"token", "logprob", "bytes"}]}], "refusal": null}, without control
 *     tokens (an end of turn is no part of the reply).
 * A token's text is its piece after the token before it; NULL t: none. */
#ifndef INFER_LOGPROBS_JSON_H
#define INFER_LOGPROBS_JSON_H

#include <json-c/json.h>
#include "serve/serve.h"
#include "text/tokenizer.h"

json_object *logprobs_completion(const ServeRequest *r, const Tokenizer *t, int from, int to,
				 size_t text_offset);
json_object *logprobs_chat(const ServeRequest *r, const Tokenizer *t, int from, int to);

#endif
