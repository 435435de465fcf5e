/* test_engine_tokenizer.c - the tokenizer against llama2.c's test vectors,
 * byte fallback, decode round trips and malformed files. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "text/tokenizer.h"

static int failures;

#define CHECK(cond, ...) do { if (!(cond)) { failures++; \
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static void ids_to_str(const int *ids, int n, char *out, size_t cap)
{
	size_t len = 0;

	out[0] = '\0';
	for (int i = 0; i < n && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, i ? " %d" : "%d", ids[i]);
}

static void expect_encode(const Tokenizer *t, const char *text, const char *want)
{
	int ids[256], n = 0;
	char got[2048];
	InferError err;

	CHECK(tokenizer_encode(t, text, 1, ids, &n, &err) == 0, "encode '%s': %s", text, err.msg);
	ids_to_str(ids, n, got, sizeof(got));
	CHECK(strcmp(got, want) == 0, "encode '%s': want [%s] got [%s]", text, want, got);
}

/* Decodes ids[1..] the way the CLI prints them and compares with text. */
static void expect_round_trip(const Tokenizer *t, const char *text)
{
	int ids[256], n = 0;
	char out[1024] = "";
	InferError err;

	CHECK(tokenizer_encode(t, text, 1, ids, &n, &err) == 0, "encode '%s'", text);
	for (int i = 1; i < n; i++) {
		const char *piece = tokenizer_decode(t, ids[i - 1], ids[i]);

		if (piece_is_printable(piece))
			strncat(out, piece, sizeof(out) - strlen(out) - 1);
	}
	CHECK(strcmp(out, text) == 0, "round trip: want '%s' got '%s'", text, out);
}

static void test_vectors(const Tokenizer *t)
{
	/* llama2.c test.c's vectors (with BOS) */
	expect_encode(t, "I believe the meaning of life is", "1 306 4658 278 6593 310 2834 338");
	expect_encode(t, "Once upon a time", "1 9038 2501 263 931");
	expect_encode(t, "", "1");
	/* U+1F600 is not a token: its four UTF-8 bytes fall back to ids byte+3 */
	expect_encode(t, "\xF0\x9F\x98\x80", "1 29871 243 162 155 131");
}

static void test_decode(const Tokenizer *t)
{
	int nl = tokenizer_lookup(t, "<0x0A>");

	CHECK(nl >= 0, "no <0x0A> piece");
	CHECK(strcmp(tokenizer_decode(t, 5, nl), "\n") == 0, "<0x0A> must decode to a newline");
	CHECK(strcmp(tokenizer_decode(t, 1, 9038), "Once") == 0, "space after BOS not stripped");
	CHECK(strcmp(tokenizer_decode(t, 5, 9038), " Once") == 0, "space stripped mid-text");
	CHECK(!piece_is_printable("\x01"), "a control byte must not print");
	CHECK(piece_is_printable("\n") && piece_is_printable("\x9F"), "whitespace/UTF-8 bytes print");
	expect_round_trip(t, "Once upon a time");
	expect_round_trip(t, "hi \xF0\x9F\x98\x80 there \xE9\xBE\x98!");
}

/* tokenizer_encode_special: <unk>, <s> and </s> in text are their ids, and
 * the text between them is encoded piece by piece, each with the dummy
 * prefix (llama.cpp's tokenizer with parse_special). */
static void test_special(const Tokenizer *t)
{
	int ids[256], n = 0, a[64], na = 0, b[64], nb = 0;
	char got[2048], want[2048];
	InferError err;

	CHECK(t->n_special == 3, "%d special tokens", t->n_special);
	CHECK(!strcmp(tokenizer_special_text(t, 1), "<s>") && !strcmp(tokenizer_special_text(t, 2), "</s>"),
	      "special texts");
	CHECK(t->control[1] && t->control[2] && !t->control[0] && !t->control[100], "control flags");
	CHECK(t->n_turn_end == 0, "no turn-end tokens in llama2.c's vocabulary");
	CHECK(tokenizer_encode_special(t, "Hi there</s><s>again <unk>", 1, ids, &n, &err) == 0, "%s", err.msg);
	tokenizer_encode(t, "Hi there", 0, a, &na, &err);
	tokenizer_encode(t, "again ", 0, b, &nb, &err);
	ids_to_str(ids, n, got, sizeof(got));
	{
		int w[128], nw = 0;

		w[nw++] = 1;
		for (int i = 0; i < na; i++)
			w[nw++] = a[i];
		w[nw++] = 2;
		w[nw++] = 1;
		for (int i = 0; i < nb; i++)
			w[nw++] = b[i];
		w[nw++] = 0;
		ids_to_str(w, nw, want, sizeof(want));
	}
	CHECK(!strcmp(got, want), "special: want [%s] got [%s]", want, got);
	/* without special texts it is tokenizer_encode; "<s" alone is text */
	CHECK(tokenizer_encode_special(t, "Once upon a <s time", 1, ids, &n, &err) == 0, "%s", err.msg);
	ids_to_str(ids, n, got, sizeof(got));
	tokenizer_encode(t, "Once upon a <s time", 1, a, &na, &err);
	ids_to_str(a, na, want, sizeof(want));
	CHECK(!strcmp(got, want), "no specials: want [%s] got [%s]", want, got);
	CHECK(tokenizer_encode_special(t, "<s><s>", 0, ids, &n, &err) == 0 && n == 2 && ids[0] == 1 &&
	      ids[1] == 1, "two specials back to back: %d ids", n);
}

/* llama2.c's merge rule as run.c writes it: the best-scoring adjacent
 * pair, leftmost of equals, again and again (quadratic; fine here). */
static void reference_merges(const Tokenizer *t, int *ids, int *n)
{
	char buf[512];

	for (;;) {
		float best = -1e10f;
		int best_id = -1, at = -1;

		for (int i = 0; i + 1 < *n; i++) {
			int id;

			snprintf(buf, sizeof(buf), "%s%s", t->vocab[ids[i]], t->vocab[ids[i + 1]]);
			id = tokenizer_lookup(t, buf);
			if (id >= 0 && t->scores[id] > best) {
				best = t->scores[id];
				best_id = id;
				at = i;
			}
		}
		if (at < 0)
			return;
		ids[at] = best_id;
		memmove(ids + at + 1, ids + at + 2, (size_t)(*n - at - 2) * sizeof(int));
		(*n)--;
	}
}

/* The encoder's heap of pairs merges exactly as run.c's loop, on random
 * texts of words, spaces, punctuation, newlines and multi-byte characters. */
static void test_merges_match_reference(const Tokenizer *t)
{
	static const char *const bits[] = { "the", " cat", "sat", " ", "  ", "on", "mat", ",", ".", "\n",
					    "ing", "un", "believ", "able", "\xC3\xA9", "\xE4\xBD\xA0",
					    "\xF0\x9F\x98\x80", "a", "aa", "lo", "ol", "123", "x" };
	uint64_t rng = 12345;
	int bad = 0;

	for (int round = 0; round < 400 && !bad; round++) {
		char text[400] = "";
		int got[1200], want[1200], ng = 0, nw = 0, words;
		InferError err;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		words = 1 + (int)(rng >> 59);
		for (int w = 0; w < words * 3; w++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			strcat(text, bits[(rng >> 33) % (sizeof(bits) / sizeof(*bits))]);
		}
		CHECK(tokenizer_encode(t, text, 1, got, &ng, &err) == 0, "%s", err.msg);
		/* the unmerged start: BOS, the dummy space, one id per codepoint */
		want[nw++] = 1;
		want[nw++] = tokenizer_lookup(t, " ");
		for (const char *c = text; *c;) {
			int len = (*c & 0x80) == 0 ? 1 : (*c & 0xE0) == 0xC0 ? 2 : (*c & 0xF0) == 0xE0 ? 3 : 4;
			char cp[5] = "";
			int id;

			memcpy(cp, c, (size_t)len);
			id = tokenizer_lookup(t, cp);
			if (id >= 0)
				want[nw++] = id;
			else
				for (int i = 0; i < len; i++)
					want[nw++] = (unsigned char)c[i] + 3;
			c += len;
		}
		reference_merges(t, want, &nw);
		bad = ng != nw || memcmp(got, want, (size_t)nw * sizeof(int));
		CHECK(!bad, "merges differ from run.c's on '%s': %d ids against %d", text, ng, nw);
	}
}

/* Writes bytes to a file and expects tokenizer_load to refuse it. */
static void expect_bad_file(const char *dir, const void *bytes, size_t len, const char *what)
{
	char path[4096];
	Tokenizer t;
	InferError err = { "" };
	FILE *f;

	snprintf(path, sizeof(path), "%s/bad_tokenizer.bin", dir);
	f = fopen(path, "wb");
	if (!f || fwrite(bytes, 1, len, f) != len || fclose(f) != 0) {
		CHECK(0, "cannot write %s", path);
		return;
	}
	CHECK(tokenizer_load(&t, path, &err) < 0, "%s: loaded", what);
	CHECK(err.msg[0] != '\0' && !strchr(err.msg, '\n'), "%s: want a one-line error", what);
	remove(path);
}

static void test_malformed(void)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	unsigned char truncated[] = { 4, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 'a', 'b' };
	unsigned char negative[] = { 4, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff };
	unsigned char empty[] = { 4, 0, 0, 0 };
	Tokenizer t;
	InferError err;

	expect_bad_file(dir, truncated, sizeof(truncated), "truncated piece");
	expect_bad_file(dir, negative, sizeof(negative), "negative length");
	expect_bad_file(dir, empty, sizeof(empty), "no tokens");
	CHECK(tokenizer_load(&t, "/nonexistent/tokenizer.bin", &err) < 0, "missing file loaded");
}

int main(void)
{
	const char *models = getenv("MODELS");
	char path[4096];
	Tokenizer t;
	InferError err;

	if (models)
		snprintf(path, sizeof(path), "%s/tokenizer.bin", models);
	else
		snprintf(path, sizeof(path), "%s/../shared/models/tokenizer.bin",
			 getenv("ROOT") ? getenv("ROOT") : ".");
	test_malformed();
	if (tokenizer_load(&t, path, &err) < 0) {
		printf("%s\n", err.msg);
		printf("skip: no llama2.c tokenizer.bin beside the project\n");
		return failures ? 1 : 77;
	}
	CHECK(t.vocab_size == 32000, "vocab %d", t.vocab_size);
	test_vectors(&t);
	test_decode(&t);
	test_special(&t);
	test_merges_match_reference(&t);
	tokenizer_free(&t);
	printf("%s\n", failures ? "tokenizer: FAILED" : "tokenizer: ok");
	return failures ? 1 : 0;
}
