/* reqparse.c - parsing completion requests with json-c (see reqparse.h). */
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "reqparse.h"

static int bad(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* A copy of a JSON string, refusing embedded NULs (the engine's strings
 * are C strings). */
static int copy_string(json_object *v, const char *field, char **out, char *err, size_t errlen)
{
	const char *s = json_object_get_string(v);
	int len = json_object_get_string_len(v);

	if (memchr(s, '\0', (size_t)len))
		return bad(err, errlen, "'%s' contains a NUL character", field);
	*out = strndup(s, (size_t)len);
	return *out ? 0 : bad(err, errlen, "out of memory");
}

static int parse_prompt_ids(json_object *arr, CompletionRequest *r, char *err, size_t errlen)
{
	size_t n = json_object_array_length(arr);

	if (n > REQ_MAX_PROMPT_IDS)
		return bad(err, errlen, "'prompt' has %zu token ids (at most %d)", n,
			   REQ_MAX_PROMPT_IDS);
	r->prompt_ids = malloc((n ? n : 1) * sizeof(int));
	if (!r->prompt_ids)
		return bad(err, errlen, "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_object *v = json_object_array_get_idx(arr, i);
		int64_t id;

		if (!json_object_is_type(v, json_type_int))
			return bad(err, errlen, "'prompt' must be a string or a list of token ids: "
				   "element %zu is not an integer", i);
		id = json_object_get_int64(v);
		if (id < 0 || id > INT32_MAX)
			return bad(err, errlen, "'prompt': token id %lld is out of range",
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
		return bad(err, errlen, "'prompt' is required");
	if (json_object_is_type(v, json_type_string))
		return copy_string(v, "prompt", &r->prompt_text, err, errlen);
	if (!json_object_is_type(v, json_type_array))
		return bad(err, errlen, "'prompt' must be a string or a list of token ids");
	first = json_object_array_length(v) > 0 ? json_object_array_get_idx(v, 0) : NULL;
	if (first && json_object_is_type(first, json_type_string)) {
		if (json_object_array_length(v) != 1)
			return bad(err, errlen, "'prompt': only one prompt per request is supported");
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
		return bad(err, errlen, "'%s' must be an integer", field);
	x = json_object_get_int64(v);
	/* json-c saturates out-of-range integers at INT64_MIN/MAX */
	if (x < lo || x > hi)
		return bad(err, errlen, "'%s' is %lld; it must be between %lld and %lld", field,
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
		return bad(err, errlen, "'%s' must be a number", field);
	x = json_object_get_double(v);
	if (!isfinite(x) || x < lo || x > hi)
		return bad(err, errlen, "'%s' must be between %g and %g", field, lo, hi);
	*out = x;
	return 0;
}

static int get_bool(json_object *o, const char *field, int *out, char *err, size_t errlen)
{
	json_object *v;

	if (!json_object_object_get_ex(o, field, &v) || !v)
		return 0;
	if (!json_object_is_type(v, json_type_boolean))
		return bad(err, errlen, "'%s' must be a boolean", field);
	*out = json_object_get_boolean(v);
	return 0;
}

static int add_stop(json_object *v, CompletionRequest *r, char *err, size_t errlen)
{
	if (!json_object_is_type(v, json_type_string))
		return bad(err, errlen, "'stop' must be a string or a list of strings");
	if (json_object_get_string_len(v) == 0)
		return bad(err, errlen, "'stop' strings must not be empty");
	if (r->n_stop == SERVE_MAX_STOP)
		return bad(err, errlen, "'stop' takes at most %d strings", SERVE_MAX_STOP);
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

/* Fields this engine supports only at OpenAI's defaults. */
static int check_defaults(json_object *o, char *err, size_t errlen)
{
	int64_t one = 1;
	int flag = 0;
	json_object *v;

	if (get_int(o, "n", 1, 1, &one, NULL, err, errlen) < 0 ||
	    get_int(o, "best_of", 1, 1, &one, NULL, err, errlen) < 0 ||
	    get_bool(o, "echo", &flag, err, errlen) < 0)
		return -1;
	if (flag)
		return bad(err, errlen, "'echo' is not supported");
	if (json_object_object_get_ex(o, "logprobs", &v) && v)
		return bad(err, errlen, "'logprobs' is not supported");
	if (json_object_object_get_ex(o, "suffix", &v) && v)
		return bad(err, errlen, "'suffix' is not supported");
	if (json_object_object_get_ex(o, "model", &v) && v && !json_object_is_type(v, json_type_string))
		return bad(err, errlen, "'model' must be a string");
	return 0;
}

static int parse_fields(json_object *o, CompletionRequest *r, char *err, size_t errlen)
{
	int64_t max_tokens = REQ_DEFAULT_MAX_TOKENS, seed = 0;
	json_object *prompt = NULL;

	json_object_object_get_ex(o, "prompt", &prompt);
	if (parse_prompt(prompt, r, err, errlen) < 0 ||
	    get_int(o, "max_tokens", 1, REQ_MAX_MAX_TOKENS, &max_tokens, NULL, err, errlen) < 0 ||
	    get_number(o, "temperature", 0, 2, &r->temperature, err, errlen) < 0 ||
	    get_number(o, "top_p", 0, 1, &r->top_p, err, errlen) < 0 ||
	    get_int(o, "seed", INT64_MIN, INT64_MAX, &seed, &r->has_seed, err, errlen) < 0 ||
	    parse_stop(o, r, err, errlen) < 0 ||
	    get_bool(o, "stream", &r->stream, err, errlen) < 0 ||
	    get_bool(o, "cache_prompt", &r->cache_prompt, err, errlen) < 0 ||
	    check_defaults(o, err, errlen) < 0)
		return -1;
	r->max_tokens = (int)max_tokens;
	r->seed = (uint64_t)seed;
	return 0;
}

int completion_request_parse(const char *body, size_t len, CompletionRequest *out,
			     char *err, size_t errlen)
{
	json_tokener *tok;
	json_object *o;
	int rc;

	memset(out, 0, sizeof(*out));
	out->temperature = 1.0;
	out->top_p = 1.0;
	out->cache_prompt = 1;
	if (len > INT32_MAX)
		return bad(err, errlen, "request body too large");
	tok = json_tokener_new();
	if (!tok)
		return bad(err, errlen, "out of memory");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	o = json_tokener_parse_ex(tok, body, (int)len);
	if (!o || json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != len) {
		rc = bad(err, errlen, "the body is not valid JSON: %s",
			 o ? "trailing bytes after the object"
			   : json_tokener_error_desc(json_tokener_get_error(tok)));
		json_object_put(o);
		json_tokener_free(tok);
		return rc;
	}
	json_tokener_free(tok);
	if (!json_object_is_type(o, json_type_object))
		rc = bad(err, errlen, "the body must be a JSON object");
	else
		rc = parse_fields(o, out, err, errlen);
	json_object_put(o);
	if (rc < 0)
		completion_request_free(out);
	return rc;
}

void completion_request_free(CompletionRequest *r)
{
	free(r->prompt_text);
	free(r->prompt_ids);
	for (int i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
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
}
