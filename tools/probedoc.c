/* probedoc - the probe vocabulary's tables for the docs, made from the rows
 * of spantrace/probes.def and llamacpp.def, so the manual says what the engine fires.
 *
 *   probedoc --markdown            the tables of docs/probes.md
 *   probedoc --man                 the PROBES section of man/spantrace.1
 *   probedoc --names               one probe name a line
 *   probedoc --llamacpp            the table of docs/llamacpp.md (llamacpp.def)
 *   probedoc --update FILE...      rewrites, in each file, the text between
 *                                  each pair of "probes.def: begin/end" or
 *                                  "llamacpp.def: begin/end" marker lines
 *                                  (markdown or man, as the markers are
 *                                  written); a file already right is not
 *                                  written
 *
 * Exit status 0, or 1 with a message (a file without its markers). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "spantrace/probes.h"

static const char *const role_names[] = { "begin", "end", "mark" };
static const char *const level_names[] = { "structural", "detail" };
static const char *const measures_names[] = {
	"host", "its kind's", "device", "marker", "host or enqueue", "device wait",
};

struct sbuf {
	char *s;
	size_t n, cap;
};

static void put(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = b->cap - b->n;

		va_start(ap, fmt);
		n = vsnprintf(b->s ? b->s + b->n : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			exit(1);
		if ((size_t)n < room) {
			b->n += (size_t)n;
			return;
		}
		b->cap = (b->cap + (size_t)n + 1) * 2;
		if (!(b->s = realloc(b->s, b->cap))) {
			fputs("probedoc: out of memory\n", stderr);
			exit(1);
		}
	}
}

/* "u64 req, u32 pos" from a row's types (less their "__") and names. */
static void put_args(struct sbuf *b, const struct probe_row *r)
{
	for (unsigned i = 0; i < r->nargs; i++)
		put(b, "%s%s %s", i ? ", " : "", r->arg_types[i] + 2, r->arg_names[i]);
}

/* A table cell: '|' would end it. */
static const char *cell(const char *s)
{
	static char buf[512];
	size_t n = 0;

	for (; *s && n + 2 < sizeof(buf); s++) {
		if (*s == '|')
			buf[n++] = '\\';
		buf[n++] = *s;
	}
	buf[n] = 0;
	return buf;
}

static void markdown(struct sbuf *b)
{
	put(b, "| probe | arguments | role | level | measures | fired |\n|---|---|---|---|---|---|\n");
	for (unsigned id = 0; id < PROBE_ID_COUNT; id++) {
		const struct probe_row *r = &probe_rows[id];

		put(b, "| `%s` | ", r->name);
		put_args(b, r);
		put(b, " | %s | %s | %s | %s |\n", role_names[r->role], level_names[r->level],
		    measures_names[r->measures], cell(r->doc));
	}
	put(b, "\n| span kind | level | measures | what |\n|---|---|---|---|\n");
#define SPAN(nm, ID, lv, ms, doc) \
	put(b, "| `%s` | %s | %s | %s |\n", #nm, level_names[PROBE_LEVEL_##lv], \
	    measures_names[PROBE_MEASURES_##ms], doc);
#include "spantrace/probes.def"
#undef SPAN
	put(b, "\n| OpenCL kernel | its device time is in | what |\n|---|---|---|\n");
#define KERNEL(nm, ID, SP, doc) \
	put(b, "| `%s` | %s | %s |\n", #nm, \
	    SPAN_##SP == SPAN_NONE ? "no span" : span_kind_names[SPAN_##SP], doc);
#include "spantrace/probes.def"
#undef KERNEL
	put(b, "\n| pool | what |\n|---|---|\n");
#define POOL(nm, ID, doc) put(b, "| `%s` | %s |\n", #nm, doc);
#include "spantrace/probes.def"
#undef POOL
	put(b, "\n| forward launch (`span_end`'s `launch`) | what |\n|---|---|\n");
#define LAUNCH(nm, ID, doc) put(b, "| `%s` | %s |\n", #nm, doc);
#include "spantrace/probes.def"
#undef LAUNCH
	put(b, "\n| finish reason (`req_finished`'s `reason`) | what |\n|---|---|\n");
#define FINISH(nm, ID, doc) put(b, "| `%s` | %s |\n", #nm, doc);
#include "spantrace/probes.def"
#undef FINISH
}

/* roff: a leading '.' or '\'' would start a request; backslashes escape. */
static void put_roff(struct sbuf *b, const char *s)
{
	for (; *s; s++)
		put(b, *s == '\\' ? "\\e" : "%c", *s);
}

static void man(struct sbuf *b)
{
	for (unsigned id = 0; id < PROBE_ID_COUNT; id++) {
		const struct probe_row *r = &probe_rows[id];

		put(b, ".TP\n.BR %s \" (", r->name);
		put_args(b, r);
		put(b, ")\"\n%s, %s, %s: ", role_names[r->role], level_names[r->level], measures_names[r->measures]);
		put_roff(b, r->doc);
		put(b, ".\n");
	}
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	struct sbuf b = { 0 };
	char chunk[4096];
	size_t n;

	if (!f)
		return NULL;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		put(&b, "%.*s", (int)n, chunk);
	fclose(f);
	put(&b, "%s", "");
	*len = b.n;
	return b.s;
}

/* "seq_remove" for SEQ_REMOVE. */
static const char *lower(const char *s)
{
	static char buf[64];
	size_t n = 0;

	for (; *s && n + 1 < sizeof(buf); s++)
		buf[n++] = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
	buf[n] = 0;
	return buf;
}

/* "| `new`, `old`" for "new|old". */
static void put_names(struct sbuf *b, const char *names)
{
	put(b, "| `");
	for (; *names; names++)
		put(b, *names == '|' ? "`, `" : "%c", *names);
	put(b, "`");
}

/* The llama.cpp profile's table (llamacpp.def). */
static void llamacpp(struct sbuf *b)
{
	put(b, "| function, older names | in | role | gives |\n|---|---|---|---|\n");
#define FUNCTION(obj, names, role, kind, measures, doc) \
	put_names(b, names); \
	put(b, " | %s | %s | %s |\n", strcmp(#obj, "LLAMA") ? "libggml-base" : "libllama", lower(#role), \
	    cell(doc));
#include "spantrace/llamacpp.def"
#undef FUNCTION
}

/* Where each generated table goes: between these marker lines. */
static const struct block {
	const char *open, *close;
	void (*gen)(struct sbuf *b);
} blocks[] = {
	{ "<!-- probes.def: begin -->\n", "<!-- probes.def: end -->\n", markdown },
	{ ".\\\" probes.def: begin\n", ".\\\" probes.def: end\n", man },
	{ "<!-- llamacpp.def: begin -->\n", "<!-- llamacpp.def: end -->\n", llamacpp },
};

/* Replaces the text of one block in *text; 1 if it changed, 0 if it was
 * right, -1 if the file has not this block. */
static int update_block(char **text, const struct block *k)
{
	struct sbuf gen = { 0 }, out = { 0 };
	char *a = strstr(*text, k->open), *z = a ? strstr(a, k->close) : NULL;
	int changed;

	if (!a || !z)
		return -1;
	a += strlen(k->open);
	k->gen(&gen);
	put(&gen, "%s", "");
	changed = (size_t)(z - a) != gen.n || memcmp(a, gen.s, gen.n);
	if (changed) {
		put(&out, "%.*s%s%s", (int)(a - *text), *text, gen.s, z);
		free(*text);
		*text = out.s;
	}
	free(gen.s);
	return changed;
}

/* Every block path has, made anew; written only if one changed. */
static int update(const char *path)
{
	size_t len;
	char *text = slurp(path, &len);
	int found = 0, changed = 0;
	FILE *f;

	if (!text) {
		fprintf(stderr, "probedoc: cannot read %s\n", path);
		return 1;
	}
	for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) {
		int rc = update_block(&text, &blocks[i]);

		found |= rc >= 0;
		changed |= rc > 0;
	}
	if (!found) {
		fprintf(stderr, "probedoc: %s has no \"probes.def\" or \"llamacpp.def\" marker lines\n", path);
		free(text);
		return 1;
	}
	if (changed) {
		len = strlen(text);
		if (!(f = fopen(path, "w")) || fwrite(text, 1, len, f) != len || fclose(f)) {
			fprintf(stderr, "probedoc: cannot write %s\n", path);
			free(text);
			return 1;
		}
		fprintf(stderr, "probedoc: updated %s\n", path);
	}
	free(text);
	return 0;
}

int main(int argc, char **argv)
{
	struct sbuf b = { 0 };
	int rc = 0;

	if (argc >= 2 && !strcmp(argv[1], "--update")) {
		for (int i = 2; i < argc; i++)
			rc |= update(argv[i]);
		return rc;
	}
	if (argc != 2) {
		fputs("usage: probedoc --markdown | --man | --llamacpp | --names | --update FILE...\n", stderr);
		return 1;
	}
	if (!strcmp(argv[1], "--markdown"))
		markdown(&b);
	else if (!strcmp(argv[1], "--man"))
		man(&b);
	else if (!strcmp(argv[1], "--llamacpp"))
		llamacpp(&b);
	else if (!strcmp(argv[1], "--names"))
		for (unsigned id = 0; id < PROBE_ID_COUNT; id++)
			put(&b, "%s\n", probe_rows[id].name);
	else {
		fprintf(stderr, "probedoc: unknown option %s\n", argv[1]);
		return 1;
	}
	put(&b, "%s", "");
	fputs(b.s, stdout);
	free(b.s);
	return 0;
}
