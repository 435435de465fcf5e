/* reqparse.c - parsing completion requests with json-c (see reqparse.h). */
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve/jsonschema.h"
#include "base/error.h"
#include "serve/reqparse.h"


/* A copy of a JSON string, refusing embedded NULs (the engine's strings
 * are C strings). */
static int copy_string(json_object *v, const char *field, char **out, char *err, size_t errlen)
{
	const char *s = json_object_get_string(v);
	int len = json_object_get_string_len(v);

	if (memchr(s, '\0', (size_t)len))
		return infer_failn(err, errlen, "'%s' contains a NUL character", field);
	*out = strndup(s, (size_t)len);
	return *out ? 0 : infer_failn(err, errlen, "out of memory");
}

static int parse_prompt_ids(json_object *arr, CompletionRequest *r, char *err, size_t errlen)
{
	size_t n = json_object_array_length(arr);

	if (n > REQ_MAX_PROMPT_IDS)
		return infer_failn(err, errlen, "'prompt' has %zu token ids (at most %d)", n,
			   REQ_MAX_PROMPT_IDS);
	r->prompt_ids = malloc((n ? n : 1) * sizeof(int));
	if (!r->prompt_ids)
		return infer_failn(err, errlen, "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_object *v = json_object_array_get_idx(arr, i);
		int64_t id;

		if (!json_object_is_type(v, json_type_int))
			return infer_failn(err, errlen, "'prompt' must be a string or a list of token ids: "
				   "element %zu is not an integer", i);
		id = json_object_get_int64(v);
		if (id < 0 || id > INT32_MAX)
			return infer_failn(err, errlen, "'prompt': token id %lld is out of range",
				   (long long)id);
		r->prompt_ids[i] = (int)id;
	}
	r->n_prompt_ids = (int)n;
	return 0;
}

static int parse_prompt(json_object *v, CompletionRequest *r, char *err, size_t errlen)
{
	json_object *first;

	if (!v)
		return infer_failn(err, errlen, "'prompt' is required");
	if (json_object_is_type(v, json_type_string))
		return copy_string(v, "prompt", &r->prompt_text, err, errlen);
	if (!json_object_is_type(v, json_type_array))
		return infer_failn(err, errlen, "'prompt' must be a string or a list of token ids");
	first = json_object_array_length(v) > 0 ? json_object_array_get_idx(v, 0) : NULL;
	if (first && json_object_is_type(first, json_type_string)) {
		if (json_object_array_length(v) != 1)
			return infer_failn(err, errlen, "'prompt': only one prompt per request is supported");
		return copy_string(first, "prompt", &r->prompt_text, err, errlen);
	}
	return parse_prompt_ids(v, r, err, errlen);
}

/* An integer field in [lo, hi]; absent or null leaves *out alone. */
static int get_int(json_object *o, const char *field, int64_t lo, int64_t hi, int64_t *out,
		   int *present, char *err, size_t errlen)
{
	json_object *v;
	int64_t x;

	if (!json_object_object_get_ex(o, field, &v) || !v)
		return 0;
	if (!json_object_is_type(v, json_type_int))
		return infer_failn(err, errlen, "'%s' must be an integer", field);
	x = json_object_get_int64(v);
	/* json-c saturates out-of-range integers at INT64_MIN/MAX */
	if (x < lo || x > hi)
		return infer_failn(err, errlen, "'%s' is %lld; it must be between %lld and %lld", field,
			   (long long)x, (long long)lo, (long long)hi);
	*out = x;
	if (present)
		*present = 1;
	return 0;
}

static int get_number(json_object *o, const char *field, double lo, double hi, double *out,
		      char *err, size_t errlen)
{
	json_object *v;
	double x;

	if (!json_object_object_get_ex(o, field, &v) || !v)
		return 0;
	if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
		return infer_failn(err, errlen, "'%s' must be a number", field);
	x = json_object_get_double(v);
	if (!isfinite(x) || x < lo || x > hi)
		return infer_failn(err, errlen, "'%s' must be between %g and %g", field, lo, hi);
	*out = x;
	return 0;
}

static int get_bool(json_object *o, const char *field, int *out, char *err, size_t errlen)
{
	json_object *v;

	if (!json_object_object_get_ex(o, field, &v) || !v)
		return 0;
	if (!json_object_is_type(v, json_type_boolean))
		return infer_failn(err, errlen, "'%s' must be a boolean", field);
	*out = json_object_get_boolean(v);
	return 0;
}

static int add_stop(json_object *v, CompletionRequest *r, char *err, size_t errlen)
{
	if (!json_object_is_type(v, json_type_string))
		return infer_failn(err, errlen, "'stop' must be a string or a list of strings");
	if (json_object_get_string_len(v) == 0)
		return infer_failn(err, errlen, "'stop' strings must not be empty");
	if (r->n_stop == SERVE_MAX_STOP)
		return infer_failn(err, errlen, "'stop' takes at most %d strings", SERVE_MAX_STOP);
	return copy_string(v, "stop", &r->stop[r->n_stop++], err, errlen);
}

static int parse_stop(json_object *o, CompletionRequest *r, char *err, size_t errlen)
{
	json_object *v;

	if (!json_object_object_get_ex(o, "stop", &v) || !v)
		return 0;
	if (!json_object_is_type(v, json_type_array))
		return add_stop(v, r, err, errlen);
	for (size_t i = 0; i < json_object_array_length(v); i++)
		if (add_stop(json_object_array_get_idx(v, i), r, err, errlen) < 0)
			return -1;
	return 0;
}

/* n: choices of one request, each its own sequence (1..REQ_MAX_N). */
static int parse_n(json_object *o, CompletionRequest *r, char *err, size_t errlen)
{
	int64_t n = 1;

	if (get_int(o, "n", 1, REQ_MAX_N, &n, NULL, err, errlen) < 0)
		return -1;
	r->n = (int)n;
	return 0;
}

/* Fields this engine supports only at OpenAI's defaults. */
static int check_defaults(json_object *o, char *err, size_t errlen)
{
	int64_t one = 1;
	int flag = 0;
	json_object *v;

	if (get_int(o, "best_of", 1, 1, &one, NULL, err, errlen) < 0 ||
	    get_bool(o, "echo", &flag, err, errlen) < 0)
		return -1;
	if (flag)
		return infer_failn(err, errlen, "'echo' is not supported");
	if (json_object_object_get_ex(o, "suffix", &v) && v)
		return infer_failn(err, errlen, "'suffix' is not supported");
	return 0;
}

/* logit_bias: {"ID": BIAS, ...}, ids as decimal strings, biases in
 * -100..100 (OpenAI's range; -100 all but bans a token). */
static int parse_bias(json_object *o, CompletionRequest *r, char *err, size_t errlen)
{
	json_object *v;
	size_t n;
	int i = 0;

	if (!json_object_object_get_ex(o, "logit_bias", &v) || !v)
		return 0;
	if (!json_object_is_type(v, json_type_object))
		return infer_failn(err, errlen, "'logit_bias' must be an object of token ids and biases");
	n = (size_t)json_object_object_length(v);
	if (n > SERVE_MAX_BIAS)
		return infer_failn(err, errlen, "'logit_bias' has %zu entries (at most %d)", n, SERVE_MAX_BIAS);
	r->bias_ids = malloc((n ? n : 1) * sizeof(int));
	r->bias = malloc((n ? n : 1) * sizeof(float));
	if (!r->bias_ids || !r->bias)
		return infer_failn(err, errlen, "out of memory");
	json_object_object_foreach(v, key, val) {
		char *end;
		long id;
		double b;

		errno = 0;
		id = strtol(key, &end, 10);
		if (errno || end == key || *end || id < 0 || id > INT32_MAX)
			return infer_failn(err, errlen, "'logit_bias': '%.40s' is not a token id", key);
		if (!json_object_is_type(val, json_type_int) && !json_object_is_type(val, json_type_double))
			return infer_failn(err, errlen, "'logit_bias': the bias of %ld must be a number", id);
		b = json_object_get_double(val);
		if (!isfinite(b) || b < -100 || b > 100)
			return infer_failn(err, errlen, "'logit_bias': the bias of %ld must be between -100 and 100", id);
		r->bias_ids[i] = (int)id;
		r->bias[i++] = (float)b;
	}
	r->n_bias = i;
	return 0;
}

/* max_tokens, or llama.cpp's n_predict where it is absent: -1 is the rest
 * of the context (0 here), as llama-server takes it; 0 asks for nothing. */
static int parse_limit(json_object *o, int64_t *max_tokens, char *err, size_t errlen)
{
	static const char *const names[2] = { "max_tokens", "n_predict" };
	int64_t v = 0;

	for (int i = 0; i < 2; i++) {
		int present = 0;

		if (get_int(o, names[i], -1, REQ_MAX_MAX_TOKENS, &v, &present, err, errlen) < 0)
			return -1;
		if (!present)
			continue;
		if (v == 0)
			return infer_failn(err, errlen, "'%s' is 0; it must be at least 1, or -1 for the "
				   "rest of the context", names[i]);
		*max_tokens = v < 0 ? 0 : v;
		return 0;
	}
	return 0;
}

/* The penalties, top-k and min-p: OpenAI's and llama.cpp's names. */
static int parse_sampling(json_object *o, CompletionRequest *r, char *err, size_t errlen)
{
	int64_t last_n = r->repeat_last_n, top_k = 0;

	if (get_number(o, "frequency_penalty", -2, 2, &r->frequency_penalty, err, errlen) < 0 ||
	    get_number(o, "presence_penalty", -2, 2, &r->presence_penalty, err, errlen) < 0 ||
	    get_number(o, "repeat_penalty", 0, 10, &r->repeat_penalty, err, errlen) < 0 ||
	    get_int(o, "repeat_last_n", -1, INT32_MAX, &last_n, NULL, err, errlen) < 0 ||
	    get_int(o, "top_k", 0, INT32_MAX, &top_k, NULL, err, errlen) < 0 ||
	    get_number(o, "min_p", 0, 1, &r->min_p, err, errlen) < 0)
		return -1;
	if (r->repeat_penalty <= 0)
		return infer_failn(err, errlen, "'repeat_penalty' must be above 0 (1 is off)");
	r->repeat_last_n = (int)last_n;
	r->top_k = (int)top_k;
	return 0;
}

/* The schema a structured reply must satisfy, compiled once to refuse
 * what cannot be, and kept as text for the server. */
static int take_schema(json_object *schema, const char *field, CompletionRequest *r, char *err,
		       size_t errlen)
{
	char why[200];
	JsonSchema *s;

	if (json_schema_compile(schema, &s, why, sizeof(why)) < 0)
		return infer_failn(err, errlen, "'%s': %s", field, why);
	json_schema_free(s);
	r->structured = 1;
	if (!schema)
		return 0;
	r->json_schema = strdup(json_object_to_json_string_ext(schema, JSON_C_TO_STRING_PLAIN));
	return r->json_schema ? 0 : infer_failn(err, errlen, "out of memory");
}

/* OpenAI's response_format (text, json_object, json_schema with its
 * schema), llama-server's json_object with a schema, and its json_schema
 * field. */
static int parse_format(json_object *o, CompletionRequest *r, char *err, size_t errlen)
{
	json_object *v, *type, *js = NULL, *schema = NULL;
	const char *t;

	if (json_object_object_get_ex(o, "json_schema", &v) && v)
		return take_schema(v, "json_schema", r, err, errlen);
	if (!json_object_object_get_ex(o, "response_format", &v) || !v)
		return 0;
	if (!json_object_object_get_ex(v, "type", &type) || !json_object_is_type(type, json_type_string))
		return infer_failn(err, errlen, "'response_format.type' must be text, json_object or json_schema");
	t = json_object_get_string(type);
	if (!strcmp(t, "text"))
		return 0;
	if (!strcmp(t, "json_object")) {
		json_object_object_get_ex(v, "schema", &schema);
		return take_schema(schema, "response_format.schema", r, err, errlen);
	}
	if (strcmp(t, "json_schema"))
		return infer_failn(err, errlen, "'response_format.type' is '%s': text, json_object or "
			   "json_schema", t);
	if (!json_object_object_get_ex(v, "json_schema", &js) || !json_object_is_type(js, json_type_object) ||
	    !json_object_object_get_ex(js, "schema", &schema) || !schema)
		return infer_failn(err, errlen, "'response_format.json_schema.schema' is required");
	return take_schema(schema, "response_format.json_schema.schema", r, err, errlen);
}

/* Completions' logprobs: how many alternatives each token lists (0..20;
 * OpenAI's API stops at 5, llama-server's n_probs does not). */
static int parse_logprobs_n(json_object *o, CompletionRequest *r, char *err, size_t errlen)
{
	int64_t n = -1;

	if (get_int(o, "logprobs", 0, REQ_MAX_TOP_LOGPROBS, &n, NULL, err, errlen) < 0)
		return -1;
	r->logprobs = (int)n;
	return 0;
}

/* Chat's logprobs (a boolean) and top_logprobs (0..20, with it). */
static int parse_logprobs_chat(json_object *o, CompletionRequest *r, char *err, size_t errlen)
{
	int64_t top = 0;
	int on = 0, has_top = 0;

	if (get_bool(o, "logprobs", &on, err, errlen) < 0 ||
	    get_int(o, "top_logprobs", 0, REQ_MAX_TOP_LOGPROBS, &top, &has_top, err, errlen) < 0)
		return -1;
	if (has_top && !on)
		return infer_failn(err, errlen, "'top_logprobs' needs 'logprobs': true");
	r->logprobs = on ? (int)top : -1;
	return 0;
}

/* What completions and chat share: sampling, limits, stop, streaming. */
static int parse_common(json_object *o, CompletionRequest *r, int64_t *max_tokens, char *err,
			size_t errlen)
{
	int64_t seed = 0;
	json_object *v;

	if (parse_limit(o, max_tokens, err, errlen) < 0 ||
	    parse_n(o, r, err, errlen) < 0 ||
	    parse_sampling(o, r, err, errlen) < 0 ||
	    parse_format(o, r, err, errlen) < 0 ||
	    get_number(o, "temperature", 0, 2, &r->temperature, err, errlen) < 0 ||
	    get_number(o, "top_p", 0, 1, &r->top_p, err, errlen) < 0 ||
	    get_int(o, "seed", INT64_MIN, INT64_MAX, &seed, &r->has_seed, err, errlen) < 0 ||
	    parse_stop(o, r, err, errlen) < 0 ||
	    parse_bias(o, r, err, errlen) < 0 ||
	    get_bool(o, "stream", &r->stream, err, errlen) < 0 ||
	    get_bool(o, "cache_prompt", &r->cache_prompt, err, errlen) < 0)
		return -1;
	if (json_object_object_get_ex(o, "stream_options", &v) && v) {
		if (!json_object_is_type(v, json_type_object))
			return infer_failn(err, errlen, "'stream_options' must be an object");
		if (get_bool(v, "include_usage", &r->include_usage, err, errlen) < 0)
			return infer_failn(err, errlen, "'stream_options.include_usage' must be a boolean");
	}
	if (json_object_object_get_ex(o, "model", &v) && v && !json_object_is_type(v, json_type_string))
		return infer_failn(err, errlen, "'model' must be a string"); /* any name: one model is served */
	r->seed = (uint64_t)seed;
	return 0;
}

static int parse_fields(json_object *o, CompletionRequest *r, char *err, size_t errlen)
{
	int64_t max_tokens = REQ_DEFAULT_MAX_TOKENS;
	json_object *prompt = NULL;

	json_object_object_get_ex(o, "prompt", &prompt);
	if (parse_prompt(prompt, r, err, errlen) < 0 ||
	    parse_common(o, r, &max_tokens, err, errlen) < 0 ||
	    parse_logprobs_n(o, r, err, errlen) < 0 ||
	    check_defaults(o, err, errlen) < 0)
		return -1;
	r->max_tokens = (int)max_tokens;
	return 0;
}

/* ---- chat ---- */

static int parse_role(json_object *m, int i, ChatRole *role, char *err, size_t errlen)
{
	json_object *v;
	const char *s;

	if (!json_object_object_get_ex(m, "role", &v) || !json_object_is_type(v, json_type_string))
		return infer_failn(err, errlen, "'messages[%d].role' must be a string", i);
	s = json_object_get_string(v);
	if (!strcmp(s, "system") || !strcmp(s, "developer"))
		*role = CHAT_ROLE_SYSTEM;
	else if (!strcmp(s, "user"))
		*role = CHAT_ROLE_USER;
	else if (!strcmp(s, "assistant"))
		*role = CHAT_ROLE_ASSISTANT;
	else if (!strcmp(s, "tool") || !strcmp(s, "function"))
		return infer_failn(err, errlen, "'messages[%d].role' is '%s': tools are not supported", i, s);
	else
		return infer_failn(err, errlen, "'messages[%d].role' is '%s': want system, developer, user "
			   "or assistant", i, s);
	return 0;
}

/* One part of an array content: text is appended to f, the rest refused. */
static int add_part(json_object *part, int i, int j, FILE *f, int *n_text, char *err,
		    size_t errlen)
{
	json_object *type, *text;
	const char *t;

	if (!json_object_is_type(part, json_type_object) ||
	    !json_object_object_get_ex(part, "type", &type) ||
	    !json_object_is_type(type, json_type_string))
		return infer_failn(err, errlen, "'messages[%d].content[%d]' must be an object with a 'type'", i, j);
	t = json_object_get_string(type);
	if (!strcmp(t, "image_url") || !strcmp(t, "image"))
		return infer_failn(err, errlen, "'messages[%d].content[%d]': images are not supported", i, j);
	if (!strcmp(t, "input_audio") || !strcmp(t, "audio"))
		return infer_failn(err, errlen, "'messages[%d].content[%d]': audio is not supported", i, j);
	if (strcmp(t, "text"))
		return infer_failn(err, errlen, "'messages[%d].content[%d]': type '%s' is not supported "
			   "(only text)", i, j, t);
	if (!json_object_object_get_ex(part, "text", &text) ||
	    !json_object_is_type(text, json_type_string))
		return infer_failn(err, errlen, "'messages[%d].content[%d].text' must be a string", i, j);
	if (memchr(json_object_get_string(text), '\0', (size_t)json_object_get_string_len(text)))
		return infer_failn(err, errlen, "'messages[%d].content[%d].text' contains a NUL character", i, j);
	if ((*n_text)++ && json_object_get_string_len(text) > 0)
		fputc('\n', f);
	fputs(json_object_get_string(text), f);
	return 0;
}

/* Text parts joined with "\n" (where the text so far is not empty). */
static int parse_parts(json_object *c, int i, char **out, char *err, size_t errlen)
{
	size_t len = 0;
	FILE *f = open_memstream(out, &len);
	int n_text = 0, rc = 0;

	if (!f)
		return infer_failn(err, errlen, "out of memory");
	for (size_t j = 0; j < json_object_array_length(c) && rc == 0; j++)
		rc = add_part(json_object_array_get_idx(c, j), i, (int)j, f, &n_text, err, errlen);
	if (fclose(f) != 0 && rc == 0)
		rc = infer_failn(err, errlen, "out of memory");
	if (rc < 0) {
		free(*out);
		*out = NULL;
	}
	return rc;
}

static int parse_content(json_object *m, int i, ChatRole role, char **out, char *err,
			 size_t errlen)
{
	json_object *c, *calls;

	if (json_object_object_get_ex(m, "tool_calls", &calls) && calls &&
	    !(json_object_is_type(calls, json_type_array) && json_object_array_length(calls) == 0))
		return infer_failn(err, errlen, "'messages[%d].tool_calls': tools are not supported", i);
	if (!json_object_object_get_ex(m, "content", &c) || !c) {
		if (role != CHAT_ROLE_ASSISTANT)
			return infer_failn(err, errlen, "'messages[%d].content' is required", i);
		*out = strdup("");
		return *out ? 0 : infer_failn(err, errlen, "out of memory");
	}
	if (json_object_is_type(c, json_type_string)) {
		char field[48];

		snprintf(field, sizeof(field), "messages[%d].content", i);
		return copy_string(c, field, out, err, errlen);
	}
	if (json_object_is_type(c, json_type_array))
		return parse_parts(c, i, out, err, errlen);
	return infer_failn(err, errlen, "'messages[%d].content' must be a string or a list of parts", i);
}

static int parse_messages(json_object *o, CompletionRequest *r, char *err, size_t errlen)
{
	json_object *v;
	size_t n;

	if (!json_object_object_get_ex(o, "messages", &v) || !v)
		return infer_failn(err, errlen, "'messages' is required");
	if (!json_object_is_type(v, json_type_array))
		return infer_failn(err, errlen, "'messages' must be a list of messages");
	n = json_object_array_length(v);
	if (n == 0)
		return infer_failn(err, errlen, "'messages' must not be empty");
	if (n > REQ_MAX_MESSAGES)
		return infer_failn(err, errlen, "'messages' has %zu messages (at most %d)", n, REQ_MAX_MESSAGES);
	r->messages = calloc(n, sizeof(*r->messages));
	if (!r->messages)
		return infer_failn(err, errlen, "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_object *m = json_object_array_get_idx(v, i);
		char *content = NULL;

		if (!json_object_is_type(m, json_type_object))
			return infer_failn(err, errlen, "'messages[%zu]' must be an object", i);
		if (parse_role(m, (int)i, &r->messages[i].role, err, errlen) < 0 ||
		    parse_content(m, (int)i, r->messages[i].role, &content, err, errlen) < 0)
			return -1;
		r->messages[i].content = content;
		r->n_messages = (int)i + 1;
	}
	return 0;
}

/* A field the engine has no use for that changes the answer's meaning. */
static int refuse_if_set(json_object *o, const char *field, const char *why, char *err,
			 size_t errlen)
{
	json_object *v;

	if (!json_object_object_get_ex(o, field, &v) || !v)
		return 0;
	if (json_object_is_type(v, json_type_array) && json_object_array_length(v) == 0)
		return 0;
	return infer_failn(err, errlen, "'%s' %s", field, why);
}

static int check_chat_unsupported(json_object *o, char *err, size_t errlen)
{
	json_object *v;

	if (refuse_if_set(o, "tools", "is not supported: this engine does not call tools", err, errlen) < 0 ||
	    refuse_if_set(o, "functions", "is not supported: this engine does not call tools", err, errlen) < 0 ||
	    refuse_if_set(o, "function_call", "is not supported: this engine does not call tools", err, errlen) < 0)
		return -1;
	/* with no tools (none, or []), "none" and "auto" both mean a plain reply */
	if (json_object_object_get_ex(o, "tool_choice", &v) && v &&
	    !(json_object_is_type(v, json_type_string) && (!strcmp(json_object_get_string(v), "none") ||
							    !strcmp(json_object_get_string(v), "auto"))))
		return infer_failn(err, errlen, "'tool_choice' is not supported: this engine does not call tools");
	return 0;
}

static int parse_chat_fields(json_object *o, CompletionRequest *r, char *err, size_t errlen)
{
	int64_t max_tokens = 0; /* the rest of the context */
	int64_t max_completion = 0;
	int has_completion = 0;

	if (parse_messages(o, r, err, errlen) < 0 ||
	    parse_common(o, r, &max_tokens, err, errlen) < 0 ||
	    parse_logprobs_chat(o, r, err, errlen) < 0 ||
	    get_int(o, "max_completion_tokens", 1, REQ_MAX_MAX_TOKENS, &max_completion,
		    &has_completion, err, errlen) < 0 ||
	    check_chat_unsupported(o, err, errlen) < 0)
		return -1;
	/* OpenAI's newer name wins where both are given */
	r->max_tokens = (int)(has_completion ? max_completion : max_tokens);
	return 0;
}

/* The body as a JSON object, or NULL with err saying why. */
static json_object *parse_object(const char *body, size_t len, char *err, size_t errlen)
{
	json_tokener *tok;
	json_object *o;

	if (len > INT32_MAX)
		return infer_failn(err, errlen, "request body too large"), NULL;
	tok = json_tokener_new();
	if (!tok)
		return infer_failn(err, errlen, "out of memory"), NULL;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	o = json_tokener_parse_ex(tok, body, (int)len);
	if (!o || json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != len) {
		enum json_tokener_error e = json_tokener_get_error(tok);

		infer_failn(err, errlen, "the body is not valid JSON: %s",
		    o ? "trailing bytes after the object"
		      : e == json_tokener_continue ? "it ends before the JSON does"
						   : json_tokener_error_desc(e));
		json_object_put(o);
		o = NULL;
	} else if (!json_object_is_type(o, json_type_object)) {
		infer_failn(err, errlen, "the body must be a JSON object");
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

typedef int (*FieldsFn)(json_object *o, CompletionRequest *r, char *err, size_t errlen);

static int parse_body(const char *body, size_t len, CompletionRequest *out, FieldsFn fields,
		      char *err, size_t errlen)
{
	json_object *o;
	int rc;

	memset(out, 0, sizeof(*out));
	out->temperature = 1.0;
	out->top_p = 1.0;
	out->cache_prompt = 1;
	out->repeat_penalty = 1.0;
	out->logprobs = -1;
	out->n = 1;
	out->repeat_last_n = 64;  /* llama-server's default */
	if (!(o = parse_object(body, len, err, errlen)))
		return -1;
	rc = fields(o, out, err, errlen);
	json_object_put(o);
	if (rc < 0)
		completion_request_free(out);
	return rc;
}

int completion_request_parse(const char *body, size_t len, CompletionRequest *out,
			     char *err, size_t errlen)
{
	return parse_body(body, len, out, parse_fields, err, errlen);
}

int tokenize_request_parse(const char *body, size_t len, TokenizeRequest *out, char *err,
			   size_t errlen)
{
	json_object *o = parse_object(body, len, err, errlen), *v;
	int rc = -1;

	*out = (TokenizeRequest){ NULL, 0, 1 };
	if (!o)
		return -1;
	if (!json_object_object_get_ex(o, "content", &v) || !json_object_is_type(v, json_type_string))
		infer_failn(err, errlen, "'content' must be a string");
	else if (get_bool(o, "add_special", &out->add_special, err, errlen) == 0 &&
		 get_bool(o, "parse_special", &out->parse_special, err, errlen) == 0)
		rc = copy_string(v, "content", &out->content, err, errlen);
	json_object_put(o);
	return rc;
}

int chat_request_parse(const char *body, size_t len, CompletionRequest *out, char *err,
		       size_t errlen)
{
	return parse_body(body, len, out, parse_chat_fields, err, errlen);
}

void completion_request_free(CompletionRequest *r)
{
	free(r->prompt_text);
	free(r->prompt_ids);
	for (int i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	free(r->bias_ids);
	free(r->bias);
	free(r->json_schema);
	for (int i = 0; i < r->n_messages; i++)
		free((char *)r->messages[i].content);
	free(r->messages);
	memset(r, 0, sizeof(*r));
}

void completion_request_params(const CompletionRequest *r, ServeParams *p)
{
	memset(p, 0, sizeof(*p));
	p->prompt_text = r->prompt_text;
	p->prompt_ids = r->prompt_ids;
	p->n_prompt_ids = r->n_prompt_ids;
	p->max_tokens = r->max_tokens;
	p->temperature = (float)r->temperature;
	p->top_p = (float)r->top_p;
	p->seed = r->seed;
	p->has_seed = r->has_seed;
	for (int i = 0; i < r->n_stop; i++)
		p->stop[i] = r->stop[i];
	p->n_stop = r->n_stop;
	p->no_prefix_cache = !r->cache_prompt;
	p->chat = r->messages != NULL;
	p->bias_ids = r->bias_ids;
	p->bias = r->bias;
	p->n_bias = r->n_bias;
	p->frequency_penalty = (float)r->frequency_penalty;
	p->presence_penalty = (float)r->presence_penalty;
	p->repeat_penalty = (float)r->repeat_penalty;
	p->repeat_last_n = r->repeat_last_n;
	p->top_k = r->top_k;
	p->min_p = (float)r->min_p;
	p->structured = r->structured;
	p->json_schema = r->json_schema;
	p->logprobs = r->logprobs + 1; /* 0: none */
}
