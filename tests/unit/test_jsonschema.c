/* test_jsonschema.c - the structured-output recognizer: texts a schema
 * allows are taken and complete exactly at their end; texts it does not
 * allow are refused at the first byte that cannot be part of one; a
 * schema with what the compiler does not support is refused, naming it. */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "serve/jsonschema.h"

/* 1: text taken whole and complete; 0: refused; 2: taken, not complete */
static int run(const char *schema, const char *text)
{
	char err[256];
	JsonSchema *s;
	JsonMatch m;
	int took;

	if (json_schema_compile_text(schema, &s, err, sizeof(err)) < 0) {
		CHECK(0, "compile %s: %s", schema ? schema : "(any object)", err);
		return -1;
	}
	json_match_init(&m, s);
	took = json_match_bytes(&m, s, text, strlen(text));
	json_schema_free(s);
	return !took ? 0 : json_match_done(&m) ? 1 : 2;
}

static const char *named(const char *schema)
{
	return schema ? schema : "any object";
}

#define ALLOWS(schema, text) CHECK(run(schema, text) == 1, "%s allows %s", named(schema), text)
#define REFUSES(schema, text) CHECK(run(schema, text) == 0, "%s refuses %s", named(schema), text)
#define OPEN(schema, text) CHECK(run(schema, text) == 2, "%s: %s is unfinished", named(schema), text)

static void test_any_object(void)
{
	ALLOWS(NULL, "{}");
	ALLOWS(NULL, "{\"a\": 1, \"b\": [true, null, \"x\\u00e9\\n\"], \"c\": {\"d\": -1.5e+3}}");
	ALLOWS(NULL, "{\n  \"k\": \"v\"\n}");
	REFUSES(NULL, "[1]");             /* json_object: an object */
	REFUSES(NULL, "{\"a\": 01}");
	REFUSES(NULL, "{\"a\": tru }");
	REFUSES(NULL, "{\"a\":1,}");
	REFUSES(NULL, "{\"a\":1}x");      /* nothing after the value */
	REFUSES(NULL, "{   \"a\":1}");    /* at most one space in a gap */
	REFUSES(NULL, "{\"a\":\"\x01\"}"); /* a control character in a string */
	OPEN(NULL, "{\"a\": [1, 2");
	REFUSES(NULL, " {}");              /* the text starts with its value */
	ALLOWS(NULL, "{\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x99\x82\":0}"); /* UTF-8 in a key */
	REFUSES(NULL, "{\"\x80\":0}");      /* a continuation byte with no lead */
	REFUSES(NULL, "{\"\xc3\":0}");      /* a lead byte cut short */
	REFUSES(NULL, "{\"\xc0\xaf\":0}"); /* an overlong lead */
}

static const char PERSON[] =
	"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":5},"
	"\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"bc\"]},"
	"\"minItems\":1,\"maxItems\":2},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\"],"
	"\"additionalProperties\":false}";

static void test_object_schema(void)
{
	ALLOWS(PERSON, "{\"name\":\"Ann\",\"age\":30}");
	ALLOWS(PERSON, "{\"name\": \"Ann\", \"age\": -2, \"tags\": [\"bc\", \"a\"], \"ok\": false}");
	ALLOWS(PERSON, "{\"name\":\"\\u00e9t\u00e9\",\"age\":0,\"ok\":true}");
	REFUSES(PERSON, "{\"age\":30,\"name\":\"Ann\"}");       /* the schema's order */
	REFUSES(PERSON, "{\"name\":\"Ann\"}");                  /* age is required */
	REFUSES(PERSON, "{\"name\":\"Annabel\",\"age\":1}");    /* maxLength 5 */
	ALLOWS(PERSON, "{\"name\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\",\"age\":1}"); /* 5 characters, 10 bytes */
	REFUSES(PERSON, "{\"name\":\"A\",\"age\":1.5}");        /* an integer */
	REFUSES(PERSON, "{\"name\":\"A\",\"age\":1,\"tags\":[]}");             /* minItems */
	REFUSES(PERSON, "{\"name\":\"A\",\"age\":1,\"tags\":[\"a\",\"a\",\"a\"]}"); /* maxItems */
	REFUSES(PERSON, "{\"name\":\"A\",\"age\":1,\"tags\":[\"b\"]}");        /* not in the enum */
	REFUSES(PERSON, "{\"name\":\"A\",\"age\":1,\"extra\":1}");
	ALLOWS("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"null\"}}}",
	       "{\"b\":null}");
	ALLOWS("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"null\"}}}", "{}");
}

static void test_literals_and_unions(void)
{
	static const char NUMS[] = "{\"type\":\"object\",\"properties\":{\"n\":{\"enum\":[1,10,\"x\"]}},"
				   "\"required\":[\"n\"]}";
	static const char UNION[] = "{\"type\":\"array\",\"items\":{\"type\":[\"string\",\"integer\",\"null\"]}}";
	static const char ANYOF[] = "{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"object\","
				    "\"properties\":{\"k\":{\"const\":\"v\"}},\"required\":[\"k\"]},{\"type\":\"boolean\"}]}}";

	ALLOWS(NUMS, "{\"n\":1}");
	ALLOWS(NUMS, "{\"n\":10}");
	ALLOWS(NUMS, "{\"n\":\"x\"}");
	REFUSES(NUMS, "{\"n\":100}");
	ALLOWS(UNION, "[\"s\", 3, null]");
	REFUSES(UNION, "[true]");
	ALLOWS(ANYOF, "[{\"k\":\"v\"}, false]");
	REFUSES(ANYOF, "[{\"k\":\"w\"}]");
	ALLOWS("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"x\":1,\"y\":2}");
	REFUSES("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"x\":\"1\"}");
	REFUSES("{\"type\":\"object\",\"additionalProperties\":false}", "{\"x\":1}");
	ALLOWS("{\"type\":\"object\",\"additionalProperties\":false}", "{}");
}

static void expect_refused(const char *schema, const char *word)
{
	char err[256] = "";
	JsonSchema *s = NULL;

	CHECK(json_schema_compile_text(schema, &s, err, sizeof(err)) < 0 && strstr(err, word),
	      "%s: want a refusal naming %s, got '%s'", schema, word, err);
	json_schema_free(s);
}

static void test_refusals(void)
{
	expect_refused("{\"type\":\"string\",\"pattern\":\"a+\"}", "'pattern'");
	expect_refused("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/x\"}}}", "'$ref'");
	expect_refused("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":0}}}",
		       "'minimum'");
	expect_refused("{\"type\":\"string\"}", "root");
	expect_refused("{\"type\":\"object\",\"required\":[\"a\"],\"properties\":{\"b\":{}}}", "'a'");
	expect_refused("{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}}",
		       "'anyOf'");
	expect_refused("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"date\"}}}", "'date'");
	expect_refused("[1", "not JSON");
}

int main(void)
{
	test_any_object();
	test_object_schema();
	test_literals_and_unions();
	test_refusals();
	return check_report();
}
