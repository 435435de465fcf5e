/* jsonschema.h - structured output (issue 58): a JSON schema compiled to
 * a byte-level recognizer of the JSON texts that satisfy it, which the
 * sampler consults to mask tokens (constrain.h).
 *
 * Supported: type (one, or a list whose types start with different
 * characters), object (properties, required, additionalProperties: a
 * schema of values for an object without properties, else no other
 * keys), array (items, minItems, maxItems), string (minLength,
 * maxLength, counted in characters), integer, number, boolean, null,
 * enum, const, anyOf/oneOf whose alternatives start with different
 * characters. Annotations (title, description, default, examples,
 * $schema, $id, $comment, strict) constrain nothing and are skipped;
 * anything else is refused by name. The root is an object or an array.
 *
 * Generated objects give their properties in the schema's order,
 * optional ones possibly left out, as llama.cpp's json-schema-to-grammar
 * does; whitespace between tokens is at most one space, or a newline and
 * up to 20 spaces or tabs. NULL compiles "any JSON object" (json_object). */
#ifndef INFER_JSONSCHEMA_H
#define INFER_JSONSCHEMA_H

#include <stddef.h>
#include <stdint.h>

struct json_object;
typedef struct JsonSchema JsonSchema;

/* -1 with err (errlen bytes) naming what is not supported. */
int json_schema_compile(struct json_object *schema, JsonSchema **out, char *err, size_t errlen);
/* The same from JSON text ("" or NULL: any JSON object). */
int json_schema_compile_text(const char *text, JsonSchema **out, char *err, size_t errlen);
void json_schema_free(JsonSchema *s);

#define JSON_MATCH_DEPTH 32

typedef struct {
	uint8_t kind, phase, ws;  /* ws: whitespace bytes in the current gap */
	int32_t node;
	int32_t idx;              /* object: next property that may come; array:
				   * items so far; string: characters; number: digits */
	int32_t pos;              /* literal or key: bytes matched */
	int32_t cur;              /* object: the property being read */
	uint64_t cand;            /* literal or key: candidates still matching */
} JsonFrame;

/* Where a JSON text stands; a plain struct, copied to try a token. */
typedef struct {
	JsonFrame f[JSON_MATCH_DEPTH];
	int depth;  /* frames in use; 0 and done: the value is complete */
	int done;
} JsonMatch;

void json_match_init(JsonMatch *m, const JsonSchema *s);
/* 1: the bytes extend a text the schema allows (m advanced); 0: refused
 * (m then holds no meaning). */
int json_match_bytes(JsonMatch *m, const JsonSchema *s, const char *p, size_t n);
/* The value is complete: nothing may follow. */
static inline int json_match_done(const JsonMatch *m) { return m->done; }

#endif
