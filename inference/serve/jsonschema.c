/* jsonschema.c - JSON schemas compiled to a byte recognizer (see jsonschema.h). */
#include "base/error.h"
#include "serve/jsonschema.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum jkind { JK_ANY, JK_OBJECT, JK_ARRAY, JK_STRING, JK_INTEGER, JK_NUMBER, JK_LITERALS, JK_UNION };

typedef struct {
	uint8_t kind;
	int32_t first, count; /* object: props; literals: lits; union: alts */
	int32_t item;         /* array: the items' node; object: the values' node of a
			       * map (no properties), -1: no other keys */
	int32_t min, max;     /* array: items; string: characters; -1: no bound */
	uint64_t required;    /* object: bit i, props[first + i] is required */
} JNode;

typedef struct {
	char *text; /* a key JSON-escaped without its quotes, or a literal's JSON text */
	int len;
	int node;   /* a key's value */
} JText;

struct JsonSchema {
	JNode *nodes;
	int nn, capn;
	JText *texts;  /* keys and literals */
	int nt, capt;
	int *alts;
	int na, capa;
	int root;
};

/* Nodes every schema has: what json_object and an unconstrained value use. */
enum { N_ANY, N_KEYWORDS, N_FREE_STRING, N_ANY_OBJECT, N_ANY_ARRAY, N_BUILTIN };
#define MAX_SET 64    /* properties of an object, literals of an enum: bit sets */
#define MAX_NEST 24   /* schema nesting compiled */
#define MAX_DIGITS 15 /* digits of a number's part: a runaway number is refused */


static int grow(void **p, int *cap, int n, size_t size)
{
	int c = *cap ? *cap * 2 : 16;
	void *q;

	if (n < *cap)
		return 0;
	q = realloc(*p, (size_t)c * size);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

static int new_node(JsonSchema *s, enum jkind kind)
{
	if (grow((void **)&s->nodes, &s->capn, s->nn, sizeof(JNode)))
		return -1;
	s->nodes[s->nn] = (JNode){ .kind = (uint8_t)kind, .item = -1, .min = -1, .max = -1 };
	return s->nn++;
}

/* Appends a text (len bytes of t, or its JSON form when v is given). */
static int add_text(JsonSchema *s, const char *t, int len, int node)
{
	char *c = t ? strndup(t, (size_t)len) : NULL;

	if (!c || grow((void **)&s->texts, &s->capt, s->nt, sizeof(JText))) {
		free(c);
		return -1;
	}
	s->texts[s->nt] = (JText){ c, len, node };
	return s->nt++;
}

static int add_literal(JsonSchema *s, json_object *v)
{
	const char *t = v ? json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
							    JSON_C_TO_STRING_NOSLASHESCAPE)
			  : "null";

	return add_text(s, t, (int)strlen(t), -1);
}

static int builtins(JsonSchema *s)
{
	static const char *const kw[3] = { "true", "false", "null" };
	static const enum jkind kinds[N_BUILTIN] = {
		[N_ANY] = JK_ANY, [N_KEYWORDS] = JK_LITERALS, [N_FREE_STRING] = JK_STRING,
		[N_ANY_OBJECT] = JK_OBJECT, [N_ANY_ARRAY] = JK_ARRAY,
	};

	for (int i = 0; i < N_BUILTIN; i++)
		if (new_node(s, kinds[i]) < 0)
			return -1;
	s->nodes[N_KEYWORDS].first = s->nt;
	s->nodes[N_KEYWORDS].count = 3;
	for (int i = 0; i < 3; i++)
		if (add_text(s, kw[i], (int)strlen(kw[i]), -1) < 0)
			return -1;
	s->nodes[N_ANY_OBJECT].item = N_ANY;
	s->nodes[N_ANY_ARRAY].item = N_ANY;
	return 0;
}

void json_schema_free(JsonSchema *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->nt; i++)
		free(s->texts[i].text);
	free(s->texts);
	free(s->nodes);
	free(s->alts);
	free(s);
}

/* ---- compiling ---- */

typedef struct {
	JsonSchema *s;
	char *err;
	size_t errlen;
} Compile;

static int compile_node(Compile *c, json_object *sch, int depth);

/* The bytes a value of node may start with, as a 256-bit set. */
static void starts(const JsonSchema *s, int node, uint8_t set[32])
{
	const JNode *n = &s->nodes[node];
	const char *digits = "-0123456789";

	switch (n->kind) {
	case JK_ANY: set['{' / 8] |= 1 << ('{' % 8); set['[' / 8] |= 1 << ('[' % 8);
		starts(s, N_FREE_STRING, set); starts(s, N_KEYWORDS, set);
		/* fall through - numbers too */
	case JK_INTEGER: case JK_NUMBER:
		for (const char *d = digits; *d; d++)
			set[*d / 8] |= (uint8_t)(1 << (*d % 8));
		break;
	case JK_OBJECT: set['{' / 8] |= 1 << ('{' % 8); break;
	case JK_ARRAY: set['[' / 8] |= 1 << ('[' % 8); break;
	case JK_STRING: set['"' / 8] |= 1 << ('"' % 8); break;
	case JK_LITERALS:
		for (int i = 0; i < n->count; i++) {
			unsigned char b = (unsigned char)s->texts[n->first + i].text[0];

			set[b / 8] |= (uint8_t)(1 << (b % 8));
		}
		break;
	case JK_UNION:
		for (int i = 0; i < n->count; i++)
			starts(s, s->alts[n->first + i], set);
		break;
	}
}

/* A union of the nodes alts[0..n): their first bytes must tell them apart. */
static int make_union(Compile *c, const int *alts, int n, const char *what)
{
	uint8_t seen[32] = { 0 };
	int u;

	for (int i = 0; i < n; i++) {
		uint8_t mine[32] = { 0 };

		starts(c->s, alts[i], mine);
		for (int b = 0; b < 32; b++)
			if (mine[b] & seen[b])
				return infer_failn(c->err, c->errlen, "'%s' with alternatives that can start with the "
					   "same character is not supported", what);
		for (int b = 0; b < 32; b++)
			seen[b] |= mine[b];
	}
	if ((u = new_node(c->s, JK_UNION)) < 0)
		return infer_failn(c->err, c->errlen, "out of memory");
	c->s->nodes[u].first = c->s->na;
	c->s->nodes[u].count = n;
	for (int i = 0; i < n; i++) {
		if (grow((void **)&c->s->alts, &c->s->capa, c->s->na, sizeof(int)))
			return infer_failn(c->err, c->errlen, "out of memory");
		c->s->alts[c->s->na++] = alts[i];
	}
	return u;
}

static int literals(Compile *c, json_object *list, json_object *one)
{
	int n, node;

	if (list && !json_object_is_type(list, json_type_array))
		return infer_failn(c->err, c->errlen, "'enum' must be a list");
	n = list ? (int)json_object_array_length(list) : 1;
	if (n < 1 || n > MAX_SET)
		return infer_failn(c->err, c->errlen, "'enum' with %d values (1 to %d are supported)", n, MAX_SET);
	if ((node = new_node(c->s, JK_LITERALS)) < 0)
		return infer_failn(c->err, c->errlen, "out of memory");
	c->s->nodes[node].first = c->s->nt;
	c->s->nodes[node].count = n;
	for (int i = 0; i < n; i++)
		if (add_literal(c->s, list ? json_object_array_get_idx(list, (size_t)i) : one) < 0)
			return infer_failn(c->err, c->errlen, "out of memory");
	return node;
}

static int bound(Compile *c, json_object *sch, const char *key, int32_t *out)
{
	json_object *v;
	int64_t x;

	if (!json_object_object_get_ex(sch, key, &v))
		return 0;
	x = json_object_get_int64(v);
	if (!json_object_is_type(v, json_type_int) || x < 0 || x > 1 << 20)
		return infer_failn(c->err, c->errlen, "'%s' must be an integer from 0 to %d", key, 1 << 20);
	*out = (int32_t)x;
	return 0;
}

/* Where name is among props' keys, or -1. */
static int prop_index(json_object *props, const char *name)
{
	int i = 0;

	json_object_object_foreach(props, key, val) {
		(void)val;
		if (name && !strcmp(key, name))
			return i;
		i++;
	}
	return -1;
}

/* An object's named properties, in the schema's order: their keys first,
 * side by side, then their values' nodes (which add texts of their own). */
static int object_props(Compile *c, int node, json_object *props, json_object *req, int depth)
{
	int n = (int)json_object_object_length(props), first = c->s->nt, i = 0;

	if (n > MAX_SET)
		return infer_failn(c->err, c->errlen, "an object with %d properties (at most %d)", n, MAX_SET);
	c->s->nodes[node].first = first;
	c->s->nodes[node].count = n;
	json_object_object_foreach(props, key, val) {
		json_object *k = json_object_new_string(key);
		const char *t = k ? json_object_to_json_string_ext(k, JSON_C_TO_STRING_PLAIN |
								  JSON_C_TO_STRING_NOSLASHESCAPE) : NULL;
		int at = t ? add_text(c->s, t + 1, (int)strlen(t) - 2, -1) : -1;

		(void)val;
		json_object_put(k);
		if (at < 0)
			return infer_failn(c->err, c->errlen, "out of memory");
	}
	json_object_object_foreach(props, key2, val2) {
		int v = compile_node(c, val2, depth + 1);

		(void)key2;
		if (v < 0)
			return -1;
		c->s->texts[first + i++].node = v; /* after the call: it may move texts */
	}
	for (size_t r = 0; req && r < json_object_array_length(req); r++) {
		const char *name = json_object_get_string(json_object_array_get_idx(req, r));
		int found = prop_index(props, name);

		if (found < 0)
			return infer_failn(c->err, c->errlen, "'required' names '%s', which is not in 'properties'",
				   name ? name : "?");
		c->s->nodes[node].required |= 1ull << found;
	}
	return node;
}

static int compile_object(Compile *c, json_object *sch, int depth)
{
	json_object *props = NULL, *req = NULL, *extra = NULL;
	int node = new_node(c->s, JK_OBJECT);

	if (node < 0)
		return infer_failn(c->err, c->errlen, "out of memory");
	json_object_object_get_ex(sch, "properties", &props);
	json_object_object_get_ex(sch, "required", &req);
	json_object_object_get_ex(sch, "additionalProperties", &extra);
	if ((props && !json_object_is_type(props, json_type_object)) ||
	    (req && !json_object_is_type(req, json_type_array)))
		return infer_failn(c->err, c->errlen, "'properties' must be an object and 'required' a list");
	if (props && json_object_object_length(props) > 0)
		return object_props(c, node, props, req, depth); /* no other keys are made */
	if (req && json_object_array_length(req) > 0)
		return infer_failn(c->err, c->errlen, "'required' names properties that are not in 'properties'");
	if (!extra || json_object_is_type(extra, json_type_boolean)) {
		c->s->nodes[node].item = !extra || json_object_get_boolean(extra) ? N_ANY : -1;
	} else {
		int v = compile_node(c, extra, depth + 1);

		if (v < 0)
			return -1;
		c->s->nodes[node].item = v; /* after the call: it may move nodes */
	}
	return node;
}

static int compile_type(Compile *c, json_object *sch, const char *type, int depth)
{
	int node;

	if (!strcmp(type, "object"))
		return compile_object(c, sch, depth);
	if (!strcmp(type, "boolean") || !strcmp(type, "null")) {
		if ((node = new_node(c->s, JK_LITERALS)) < 0)
			return infer_failn(c->err, c->errlen, "out of memory");
		/* the builtin keywords: true, false, null */
		c->s->nodes[node].first = c->s->nodes[N_KEYWORDS].first + (type[0] == 'n' ? 2 : 0);
		c->s->nodes[node].count = type[0] == 'n' ? 1 : 2;
		return node;
	}
	node = new_node(c->s, !strcmp(type, "array") ? JK_ARRAY : !strcmp(type, "string") ? JK_STRING
			: !strcmp(type, "integer") ? JK_INTEGER : !strcmp(type, "number") ? JK_NUMBER : JK_ANY);
	if (node < 0)
		return infer_failn(c->err, c->errlen, "out of memory");
	if (c->s->nodes[node].kind == JK_ANY)
		return infer_failn(c->err, c->errlen, "'type' '%s' is not a JSON schema type", type);
	if (c->s->nodes[node].kind == JK_STRING)
		return bound(c, sch, "minLength", &c->s->nodes[node].min) ||
		       bound(c, sch, "maxLength", &c->s->nodes[node].max) ? -1 : node;
	if (c->s->nodes[node].kind == JK_ARRAY) {
		json_object *items = NULL;
		int item = N_ANY;

		if (json_object_object_get_ex(sch, "items", &items) && (item = compile_node(c, items, depth + 1)) < 0)
			return -1;
		c->s->nodes[node].item = item;
		return bound(c, sch, "minItems", &c->s->nodes[node].min) ||
		       bound(c, sch, "maxItems", &c->s->nodes[node].max) ? -1 : node;
	}
	return node;
}

/* type: one name, or a list of them (a union). */
static int compile_types(Compile *c, json_object *sch, json_object *type, int depth)
{
	int alts[8], n;

	if (json_object_is_type(type, json_type_string))
		return compile_type(c, sch, json_object_get_string(type), depth);
	if (!json_object_is_type(type, json_type_array))
		return infer_failn(c->err, c->errlen, "'type' must be a name or a list of names");
	n = (int)json_object_array_length(type);
	if (n < 1 || n > 8)
		return infer_failn(c->err, c->errlen, "'type' lists %d types (1 to 8)", n);
	for (int i = 0; i < n; i++) {
		json_object *t = json_object_array_get_idx(type, (size_t)i);

		if (!json_object_is_type(t, json_type_string))
			return infer_failn(c->err, c->errlen, "'type' must list names");
		if ((alts[i] = compile_type(c, sch, json_object_get_string(t), depth)) < 0)
			return -1;
	}
	return n == 1 ? alts[0] : make_union(c, alts, n, "type");
}

static int compile_alts(Compile *c, json_object *list, const char *what, int depth)
{
	int alts[16], n = json_object_is_type(list, json_type_array) ? (int)json_object_array_length(list) : 0;

	if (n < 1 || n > 16)
		return infer_failn(c->err, c->errlen, "'%s' must list 1 to 16 schemas", what);
	for (int i = 0; i < n; i++)
		if ((alts[i] = compile_node(c, json_object_array_get_idx(list, (size_t)i), depth + 1)) < 0)
			return -1;
	return n == 1 ? alts[0] : make_union(c, alts, n, what);
}

/* Keywords this compiler reads, and annotations that constrain nothing. */
static int known_keyword(const char *k)
{
	static const char *const words[] = {
		"type", "properties", "required", "additionalProperties", "items", "minItems",
		"maxItems", "minLength", "maxLength", "enum", "const", "anyOf", "oneOf",
		"title", "description", "default", "examples", "$schema", "$id", "$comment", "strict",
	};

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (!strcmp(k, words[i]))
			return 1;
	return 0;
}

static int compile_node(Compile *c, json_object *sch, int depth)
{
	json_object *v;

	if (depth > MAX_NEST)
		return infer_failn(c->err, c->errlen, "a schema nested deeper than %d", MAX_NEST);
	if (json_object_is_type(sch, json_type_boolean) && json_object_get_boolean(sch))
		return N_ANY;
	if (!json_object_is_type(sch, json_type_object))
		return infer_failn(c->err, c->errlen, "a schema must be an object");
	json_object_object_foreach(sch, key, val) {
		(void)val;
		if (!known_keyword(key))
			return infer_failn(c->err, c->errlen, "'%s' is not supported in a JSON schema", key);
	}
	if (json_object_object_get_ex(sch, "enum", &v))
		return literals(c, v, NULL);
	if (json_object_object_get_ex(sch, "const", &v))
		return literals(c, NULL, v);
	if (json_object_object_get_ex(sch, "anyOf", &v))
		return compile_alts(c, v, "anyOf", depth);
	if (json_object_object_get_ex(sch, "oneOf", &v))
		return compile_alts(c, v, "oneOf", depth);
	if (json_object_object_get_ex(sch, "type", &v))
		return compile_types(c, sch, v, depth);
	return N_ANY;
}

int json_schema_compile(json_object *schema, JsonSchema **out, char *err, size_t errlen)
{
	Compile c = { calloc(1, sizeof(JsonSchema)), err, errlen };
	int root = -1;

	*out = NULL;
	if (!c.s || builtins(c.s) < 0)
		root = infer_failn(err, errlen, "out of memory");
	else if (!schema)
		root = N_ANY_OBJECT;
	else if ((root = compile_node(&c, schema, 0)) >= 0 && c.s->nodes[root].kind != JK_OBJECT &&
		 c.s->nodes[root].kind != JK_ARRAY)
		root = infer_failn(err, errlen, "the schema's root must be an object or an array");
	if (root < 0) {
		json_schema_free(c.s);
		return -1;
	}
	c.s->root = root;
	*out = c.s;
	return 0;
}

int json_schema_compile_text(const char *text, JsonSchema **out, char *err, size_t errlen)
{
	json_tokener *tok;
	json_object *o;
	size_t len;
	int rc;

	if (!text || !*text)
		return json_schema_compile(NULL, out, err, errlen);
	len = strlen(text);
	if (len > INT32_MAX || !(tok = json_tokener_new()))
		return infer_failn(err, errlen, "the JSON schema is too large");
	o = json_tokener_parse_ex(tok, text, (int)len);
	/* one value and nothing after it */
	if (!o || json_tokener_get_error(tok) != json_tokener_success ||
	    (size_t)json_tokener_get_parse_end(tok) != len) {
		json_tokener_free(tok);
		json_object_put(o);
		return infer_failn(err, errlen, "the JSON schema is not JSON");
	}
	json_tokener_free(tok);
	rc = json_schema_compile(o, out, err, errlen);
	json_object_put(o);
	return rc;
}

/* ---- matching ---- */

enum frame_kind { FR_VALUE, FR_OBJECT, FR_ARRAY, FR_STRING, FR_NUMBER, FR_LITERAL };
enum { O_OPEN, O_KEY, O_KEYSTR, O_COLON, O_VALUE, O_AFTER, O_NEXT };
enum { A_OPEN, A_VALUE, A_AFTER, A_NEXT };
enum { S_CHARS, S_ESC, S_HEX };
enum { N_START, N_SIGN, N_ZERO, N_INT, N_DOT, N_FRAC, N_EXP, N_EXPSIGN, N_EXPD };
/* A step: refused; taken; taken, and the frame is complete; complete
 * without the byte, which goes to the parent; or the frames changed and
 * the new top takes the byte. */
enum { R_NO, R_TAKEN, R_DONE, R_DONE_REFEED, R_AGAIN };

void json_match_init(JsonMatch *m, const JsonSchema *s)
{
	memset(m, 0, sizeof(*m));
	/* ws 255: the root's gap is spent, so the text starts with its value */
	m->f[0] = (JsonFrame){ .kind = FR_VALUE, .node = s->root, .ws = 255 };
	m->depth = 1;
}

/* Whitespace in a gap: nothing, one space, or a newline and up to 20
 * spaces or tabs (llama.cpp's json-schema-to-grammar allows the same). */
static int gap(JsonFrame *f, unsigned char c)
{
	if (c == ' ' && f->ws == 0) {
		f->ws = 255;
		return 1;
	}
	if (c == '\n' && f->ws == 0) {
		f->ws = 1;
		return 1;
	}
	if ((c == ' ' || c == '\t') && f->ws >= 1 && f->ws <= 20) {
		f->ws++;
		return 1;
	}
	return 0;
}

static int push(JsonMatch *m, enum frame_kind kind, int node, int phase)
{
	if (m->depth >= JSON_MATCH_DEPTH)
		return R_NO;
	m->f[m->depth++] = (JsonFrame){ .kind = (uint8_t)kind, .node = node, .phase = (uint8_t)phase };
	return R_AGAIN;
}

/* The frame f becomes a value of its node's kind, starting at c. */
static int value_step(const JsonSchema *s, JsonFrame *f, unsigned char c)
{
	const JNode *n = &s->nodes[f->node];
	int node = f->node;

	if (gap(f, c))
		return R_TAKEN;
	if (n->kind == JK_ANY)
		node = c == '{' ? N_ANY_OBJECT : c == '[' ? N_ANY_ARRAY : c == '"' ? N_FREE_STRING
		       : (c == '-' || (c >= '0' && c <= '9')) ? node : N_KEYWORDS;
	n = &s->nodes[node];
	switch (n->kind) {
	case JK_OBJECT: case JK_ARRAY: case JK_STRING:
		if (c != (n->kind == JK_OBJECT ? '{' : n->kind == JK_ARRAY ? '[' : '"'))
			return R_NO;
		*f = (JsonFrame){ .kind = n->kind == JK_OBJECT ? FR_OBJECT : n->kind == JK_ARRAY ? FR_ARRAY
				  : FR_STRING, .node = node };
		return R_TAKEN;
	case JK_ANY: case JK_INTEGER: case JK_NUMBER:
		*f = (JsonFrame){ .kind = FR_NUMBER, .node = node };
		return R_AGAIN;
	case JK_LITERALS:
		*f = (JsonFrame){ .kind = FR_LITERAL, .node = node,
				  .cand = n->count >= 64 ? ~0ull : (1ull << n->count) - 1 };
		return R_AGAIN;
	case JK_UNION:
		for (int i = 0; i < n->count; i++) {
			uint8_t set[32] = { 0 };

			starts(s, s->alts[n->first + i], set);
			if (set[c / 8] & (1 << (c % 8))) {
				*f = (JsonFrame){ .kind = FR_VALUE, .node = s->alts[n->first + i] };
				return R_AGAIN;
			}
		}
		return R_NO;
	}
	return R_NO;
}

/* The keys that may come next: from f->idx up to the first required one. */
static uint64_t next_keys(const JNode *n, int from)
{
	uint64_t m = 0;

	for (int i = from; i < n->count; i++) {
		m |= 1ull << i;
		if (n->required >> i & 1)
			break;
	}
	return m;
}

static int may_close(const JNode *n, int from)
{
	return from >= 64 || !(n->required >> from);
}

static int key_step(const JsonSchema *s, const JNode *n, JsonFrame *f, unsigned char c)
{
	uint64_t keep = 0;

	for (int i = 0; i < n->count; i++) {
		const JText *k = &s->texts[n->first + i];

		if (!(f->cand >> i & 1))
			continue;
		if (c == '"' && k->len == f->pos) {
			f->cur = i;
			f->phase = O_COLON;
			return R_TAKEN;
		}
		if (f->pos < k->len && (unsigned char)k->text[f->pos] == c)
			keep |= 1ull << i;
	}
	if (!keep)
		return R_NO;
	f->cand = keep;
	f->pos++;
	return R_TAKEN;
}

static int object_step(JsonMatch *m, const JsonSchema *s, JsonFrame *f, unsigned char c)
{
	const JNode *n = &s->nodes[f->node];
	int map = n->count == 0 && n->item >= 0;

	if (f->phase == O_KEY)
		return key_step(s, n, f, c);
	if (f->phase != O_KEY && gap(f, c))
		return R_TAKEN;
	f->ws = 0;
	switch (f->phase) {
	case O_OPEN: case O_NEXT:
		if (c == '}' && f->phase == O_OPEN && (map || may_close(n, 0)))
			return R_DONE;
		if (c != '"')
			return R_NO;
		if (map) {
			f->phase = O_KEYSTR;
			return push(m, FR_STRING, N_FREE_STRING, S_CHARS) == R_NO ? R_NO : R_TAKEN;
		}
		f->cand = next_keys(n, f->idx);
		f->pos = 0;
		f->phase = O_KEY;
		return f->cand ? R_TAKEN : R_NO;
	case O_COLON:
		if (c != ':')
			return R_NO;
		f->phase = O_VALUE;
		return push(m, FR_VALUE, map ? n->item : s->texts[n->first + f->cur].node, 0) == R_NO
		       ? R_NO : R_TAKEN;
	case O_AFTER:
		if (c == '}' && (map || may_close(n, f->idx)))
			return R_DONE;
		if (c != ',' || (!map && !next_keys(n, f->idx)))
			return R_NO;
		f->phase = O_NEXT;
		return R_TAKEN;
	}
	return R_NO;
}

static int array_step(JsonMatch *m, const JsonSchema *s, JsonFrame *f, unsigned char c)
{
	const JNode *n = &s->nodes[f->node];

	if (gap(f, c))
		return R_TAKEN;
	f->ws = 0;
	switch (f->phase) {
	case A_OPEN: case A_AFTER:
		if (c == ']' && (n->min < 0 || f->idx >= n->min))
			return R_DONE;
		if (f->phase == A_AFTER) {
			if (c != ',' || (n->max >= 0 && f->idx >= n->max))
				return R_NO;
			f->phase = A_NEXT;
			return R_TAKEN;
		}
		if (n->max == 0)
			return R_NO;
		/* fall through - the first item starts with c */
	case A_NEXT:
		f->phase = A_VALUE;
		return push(m, FR_VALUE, n->item, 0);
	}
	return R_NO;
}

static int is_hex(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* The continuation bytes a UTF-8 lead byte needs, or -1 for a byte that
 * cannot start a character. */
static int utf8_need(unsigned char c)
{
	return c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2
	       : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
}

/* Characters are counted as JSON Schema counts them (code points): an
 * escape is one, and a UTF-8 character one, its bytes well formed (pos:
 * the continuation bytes still owed). */
static int string_step(const JsonSchema *s, JsonFrame *f, unsigned char c)
{
	const JNode *n = &s->nodes[f->node];
	int full = n->max >= 0 && f->idx >= n->max, need = utf8_need(c);

	if (f->phase == S_CHARS && f->pos > 0) {
		if ((c & 0xc0) != 0x80)
			return R_NO;
		f->pos--;
		return R_TAKEN;
	}
	if (f->phase == S_ESC) {
		if (c == 'u') {
			f->phase = S_HEX;
			f->pos = 0;
			return R_TAKEN;
		}
		if (!strchr("\"\\/bfnrt", c) || !c)
			return R_NO;
		f->idx++;
		f->phase = S_CHARS;
		return R_TAKEN;
	}
	if (f->phase == S_HEX) {
		if (!is_hex(c))
			return R_NO;
		if (++f->pos == 4) {
			f->idx++;
			f->pos = 0;
			f->phase = S_CHARS;
		}
		return R_TAKEN;
	}
	if (c == '"')
		return n->min >= 0 && f->idx < n->min ? R_NO : R_DONE;
	if (c < 0x20 || need < 0 || full)
		return R_NO;
	if (c == '\\') {
		f->phase = S_ESC;
		return R_TAKEN;
	}
	f->idx++;
	f->pos = need;
	return R_TAKEN;
}

static int digit_in(JsonFrame *f, unsigned char c, int phase, int limit)
{
	if (c < '0' || c > '9' || f->idx >= limit)
		return R_NO;
	f->idx++;
	f->phase = (uint8_t)phase;
	return R_TAKEN;
}

static int number_step(const JsonSchema *s, JsonFrame *f, unsigned char c)
{
	int integer = s->nodes[f->node].kind == JK_INTEGER, digit = c >= '0' && c <= '9';
	int ends = f->phase == N_ZERO || f->phase == N_INT || f->phase == N_FRAC || f->phase == N_EXPD;

	switch (f->phase) {
	case N_START:
		if (c == '-') {
			f->phase = N_SIGN;
			return R_TAKEN;
		}
		/* fall through */
	case N_SIGN:
		if (c == '0') {
			f->phase = N_ZERO;
			return R_TAKEN;
		}
		return digit_in(f, c, N_INT, MAX_DIGITS);
	case N_INT:
		if (digit)
			return digit_in(f, c, N_INT, MAX_DIGITS);
		/* fall through */
	case N_ZERO:
		if (c == '.' && !integer) {
			f->phase = N_DOT;
			f->idx = 0;
			return R_TAKEN;
		}
		/* fall through */
	case N_FRAC:
		if (f->phase == N_FRAC && digit)
			return digit_in(f, c, N_FRAC, MAX_DIGITS);
		if ((c == 'e' || c == 'E') && !integer) {
			f->phase = N_EXP;
			f->idx = 0;
			return R_TAKEN;
		}
		return ends ? R_DONE_REFEED : R_NO;
	case N_DOT:
		return digit_in(f, c, N_FRAC, MAX_DIGITS);
	case N_EXP:
		if (c == '+' || c == '-') {
			f->phase = N_EXPSIGN;
			return R_TAKEN;
		}
		/* fall through */
	case N_EXPSIGN:
		return digit_in(f, c, N_EXPD, 3);
	case N_EXPD:
		return digit ? digit_in(f, c, N_EXPD, 3) : R_DONE_REFEED;
	}
	return R_NO;
}

static int literal_step(const JsonSchema *s, JsonFrame *f, unsigned char c)
{
	const JNode *n = &s->nodes[f->node];
	uint64_t keep = 0;
	int complete = 0, longer = 0;

	for (int i = 0; i < n->count; i++) {
		const JText *t = &s->texts[n->first + i];

		if (!(f->cand >> i & 1))
			continue;
		if (t->len == f->pos)
			complete = 1;
		else if ((unsigned char)t->text[f->pos] == c)
			keep |= 1ull << i;
	}
	if (!keep)
		return complete ? R_DONE_REFEED : R_NO;
	f->cand = keep;
	f->pos++;
	for (int i = 0; i < n->count; i++)
		if ((keep >> i & 1) && s->texts[n->first + i].len > f->pos)
			longer = 1;
	return longer ? R_TAKEN : R_DONE;
}

static int step(JsonMatch *m, const JsonSchema *s, JsonFrame *f, unsigned char c)
{
	switch (f->kind) {
	case FR_VALUE: return value_step(s, f, c);
	case FR_OBJECT: return object_step(m, s, f, c);
	case FR_ARRAY: return array_step(m, s, f, c);
	case FR_STRING: return string_step(s, f, c);
	case FR_NUMBER: return number_step(s, f, c);
	case FR_LITERAL: return literal_step(s, f, c);
	}
	return R_NO;
}

/* The top frame is complete: its parent moves past it. */
static void pop(JsonMatch *m)
{
	JsonFrame *p;

	if (--m->depth == 0) {
		m->done = 1;
		return;
	}
	p = &m->f[m->depth - 1];
	p->ws = 0;
	if (p->kind == FR_OBJECT) {
		if (p->phase == O_KEYSTR)
			p->phase = O_COLON;
		else {
			p->phase = O_AFTER;
			p->idx = p->cur + 1;
		}
	} else if (p->kind == FR_ARRAY) {
		p->phase = A_AFTER;
		p->idx++;
	}
}

static int feed(JsonMatch *m, const JsonSchema *s, unsigned char c)
{
	for (int guard = 0; guard < 4 * JSON_MATCH_DEPTH; guard++) {
		if (m->depth == 0)
			return 0; /* complete: nothing may follow */
		switch (step(m, s, &m->f[m->depth - 1], c)) {
		case R_NO: return 0;
		case R_TAKEN: return 1;
		case R_DONE: pop(m); return 1;
		case R_DONE_REFEED: pop(m); break;
		case R_AGAIN: break;
		}
	}
	return 0;
}

int json_match_bytes(JsonMatch *m, const JsonSchema *s, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!feed(m, s, (unsigned char)p[i]))
			return 0;
	return 1;
}
