/* fuzz_jsonschema.c - the structured-output recognizer
 * (inference/serve/jsonschema.c) on any bytes: the input up to its first
 * NUL is a schema's JSON text, the rest a reply fed byte by byte. A schema
 * compiles or is refused with a reason; a reply the recognizer finishes
 * parses as JSON (json-c), and nothing is taken after it finishes.
 * fuzz-sources: inference/serve/jsonschema.c inference/base/error.c
 * fuzz-libs: -ljson-c
 */
#include <json-c/json.h>
#include <string.h>
#include "fuzz_common.h"
#include "serve/jsonschema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nul = memchr(data, '\0', size);
	size_t slen = nul ? (size_t)(nul - (const char *)data) : size;
	char *schema = strndup((const char *)data, slen);
	const char *reply = nul ? nul + 1 : "";
	size_t rlen = nul ? size - slen - 1 : 0, i;
	char err[256] = "";
	JsonSchema *s = NULL;
	JsonMatch m;

	if (!schema)
		return 0;
	if (json_schema_compile_text(schema, &s, err, sizeof(err)) < 0) {
		FUZZ_CHECK(err[0] != '\0');
		free(schema);
		return 0;
	}
	json_match_init(&m, s);
	for (i = 0; i < rlen && !json_match_done(&m); i++)
		if (!json_match_bytes(&m, s, reply + i, 1))
			break;
	if (json_match_done(&m)) {
		char *text = strndup(reply, i), c = 'x';
		json_object *o = text ? json_tokener_parse(text) : NULL;

		FUZZ_CHECK(!text || o != NULL); /* what it finished is JSON */
		json_object_put(o);
		free(text);
		FUZZ_CHECK(!json_match_bytes(&m, s, &c, 1)); /* and nothing follows */
	}
	json_schema_free(s);
	free(schema);
	return 0;
}
