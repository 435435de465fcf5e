/* tokenizer.c - llama2.c's byte-pair tokenizer.
 *
 * File format: int32 max_token_length, then for each token a float32 score,
 * an int32 byte length and the bytes. The whole tokenizer lives in one pool
 * block (the weights pool: it is read-only model data). */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "format/gguf.h"
#include "base/pool.h"
#include "text/tokenizer.h"

#define MAX_TOKENIZER_BYTES (1u << 30)
#define MAX_PIECE_BYTES 4096

static int read_file(const char *path, unsigned char **data, size_t *size, InferError *err)
{
	FILE *f = fopen(path, "rb");
	long len;

	*data = NULL;
	if (!f)
		return infer_fail(err, "%s: cannot open tokenizer: %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return infer_fail(err, "%s: cannot size tokenizer file", path);
	}
	if ((unsigned long)len > MAX_TOKENIZER_BYTES) {
		fclose(f);
		return infer_fail(err, "%s: tokenizer file is too large (%ld bytes)", path, len);
	}
	*data = malloc(len ? (size_t)len : 1);
	if (!*data) {
		fclose(f);
		return infer_fail(err, "%s: out of memory", path);
	}
	if (fread(*data, 1, (size_t)len, f) != (size_t)len) {
		fclose(f);
		free(*data);
		*data = NULL;
		return infer_fail(err, "%s: read error", path);
	}
	fclose(f);
	*size = (size_t)len;
	return 0;
}

/* First pass: counts tokens and piece bytes, checking every length. */
static int scan_tokens(const unsigned char *d, size_t size, int *count, size_t *text_bytes,
		       int *longest, const char *path, InferError *err)
{
	size_t off = 4;
	int n = 0;

	*text_bytes = 0;
	*longest = 0;
	while (off < size) {
		int32_t len;

		if (size - off < 8)
			return infer_fail(err, "%s: truncated at token %d", path, n);
		memcpy(&len, d + off + 4, 4);
		if (len < 0 || len > MAX_PIECE_BYTES)
			return infer_fail(err, "%s: token %d has bad length %d", path, n, len);
		off += 8;
		if (size - off < (size_t)len)
			return infer_fail(err, "%s: truncated inside token %d", path, n);
		if (memchr(d + off, 0, (size_t)len))
			return infer_fail(err, "%s: token %d contains a NUL byte", path, n);
		off += (size_t)len;
		*text_bytes += (size_t)len + 1;
		if (len > *longest)
			*longest = len;
		if (++n > (1 << 24))
			return infer_fail(err, "%s: too many tokens", path);
	}
	if (n == 0)
		return infer_fail(err, "%s: tokenizer has no tokens", path);
	*count = n;
	return 0;
}

static int cmp_piece(const void *a, const void *b, void *vocab)
{
	char *const *v = vocab;

	return strcmp(v[*(const int *)a], v[*(const int *)b]);
}

/* Second pass: copies pieces into the block and builds the sorted index. */
static void fill_tokens(Tokenizer *t, const unsigned char *d, size_t size, char *text)
{
	size_t off = 4;

	for (int i = 0; i < t->vocab_size; i++) {
		int32_t len;

		memcpy(&t->scores[i], d + off, 4);
		memcpy(&len, d + off + 4, 4);
		off += 8;
		memcpy(text, d + off, (size_t)len);
		text[len] = '\0';
		t->vocab[i] = text;
		text += len + 1;
		off += (size_t)len;
		t->sorted[i] = i;
	}
	(void)size;
	qsort_r(t->sorted, (size_t)t->vocab_size, sizeof(int), cmp_piece, t->vocab);
}

/* A tokenizer from the bytes of a llama2.c tokenizer file; name is for
 * errors. d stays the caller's. */
static int tokenizer_parse(Tokenizer *t, const unsigned char *d, size_t size, const char *name,
			   InferError *err)
{
	size_t text_bytes = 0;
	int count = 0, longest = 0;
	char *p;

	memset(t, 0, sizeof(*t));
	if (size < 4)
		return infer_fail(err, "%s: tokenizer file too short (%zu bytes)", name, size);
	if (scan_tokens(d, size, &count, &text_bytes, &longest, name, err) < 0)
		return -1;
	t->vocab_size = count;
	t->max_token_length = longest;
	t->block_bytes = (size_t)count * (sizeof(char *) + sizeof(float) + sizeof(int)) + text_bytes;
	t->block = pool_alloc(POOL_WEIGHTS, t->block_bytes);
	if (!t->block) {
		memset(t, 0, sizeof(*t));
		return infer_fail(err, "%s: out of memory for %d tokens", name, count);
	}
	/* pointers first, then 4-byte arrays, then bytes: all aligned */
	p = t->block;
	t->vocab = (char **)p;   p += (size_t)count * sizeof(char *);
	t->scores = (float *)p;  p += (size_t)count * sizeof(float);
	t->sorted = (int *)p;    p += (size_t)count * sizeof(int);
	fill_tokens(t, d, size, p);
	return 0;
}

static int llama2c_specials(Tokenizer *t, InferError *err);

int tokenizer_load(Tokenizer *t, const char *path, InferError *err)
{
	unsigned char *d;
	size_t size = 0;
	int rc;

	memset(t, 0, sizeof(*t));
	if (read_file(path, &d, &size, err) < 0)
		return -1;
	rc = tokenizer_parse(t, d, size, path, err);
	free(d);
	if (rc == 0 && llama2c_specials(t, err) < 0) {
		tokenizer_free(t);
		return -1;
	}
	return rc;
}

/* ---- special tokens ---- */

/* A token tokenizer_encode_special matches in text. */
typedef struct {
	int id;
	const char *text;  /* as the vocabulary spells it; len bytes */
	size_t len;
	int control;
} SpecialToken;

/* The texts that end a chat turn: llama.cpp's end-of-generation names of
 * the families chat.h knows (it takes them as control tokens whatever the
 * file says, and so does this). */
static const char *const TURN_END[] = { "<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>",
					"<|endoftext|>", "<|eom_id|>", "<|end_of_text|>" };

static int is_turn_end(const char *s, size_t len)
{
	for (size_t i = 0; i < sizeof(TURN_END) / sizeof(*TURN_END); i++)
		if (strlen(TURN_END[i]) == len && !memcmp(TURN_END[i], s, len))
			return 1;
	return 0;
}

/* Longest first (llama.cpp's order), then by id for a fixed order. */
static int cmp_special(const void *a, const void *b)
{
	const SpecialToken *x = a, *y = b;

	if (x->len != y->len)
		return x->len < y->len ? 1 : -1;
	return (x->id > y->id) - (x->id < y->id);
}

/* Keeps the n special tokens in sp (sorted here) in one block of t's. */
static int set_specials(Tokenizer *t, SpecialToken *sp, int n, InferError *err)
{
	size_t text = 0, bytes;
	char *p;

	if (n)
		qsort(sp, (size_t)n, sizeof(*sp), cmp_special);
	for (int i = 0; i < n; i++)
		text += sp[i].len + 1;
	bytes = (size_t)n * (sizeof(char *) + sizeof(int)) + (size_t)t->vocab_size + text;
	t->special_block = calloc(1, bytes ? bytes : 1);
	if (!t->special_block)
		return infer_fail(err, "out of memory for the special tokens");
	p = t->special_block;
	t->special_text = (char **)p;     p += (size_t)n * sizeof(char *);
	t->special = (int *)p;            p += (size_t)n * sizeof(int);
	t->control = (unsigned char *)p;  p += t->vocab_size;
	for (int i = 0; i < n; i++) {
		memcpy(p, sp[i].text, sp[i].len);
		p[sp[i].len] = '\0';
		t->special_text[i] = p;
		t->special[i] = sp[i].id;
		t->control[sp[i].id] = (unsigned char)sp[i].control;
		if (sp[i].control && sp[i].id != TOKEN_EOS && is_turn_end(p, sp[i].len) &&
		    t->n_turn_end < TOKENIZER_MAX_TURN_ENDS)
			t->turn_end[t->n_turn_end++] = sp[i].id;
		p += sp[i].len + 1;
	}
	t->n_special = n;
	return 0;
}

/* A llama2.c file has no token types: its specials are <unk>, and <s> and
 * </s> spelled "\n<s>\n", "\n</s>\n". */
static int llama2c_specials(Tokenizer *t, InferError *err)
{
	static const char *const piece[3] = { "<unk>", "\n<s>\n", "\n</s>\n" };
	static const char *const text[3] = { "<unk>", "<s>", "</s>" };
	SpecialToken sp[3];
	int n = 0;

	for (int id = 0; id < 3 && id < t->vocab_size; id++)
		if (!strcmp(t->vocab[id], piece[id]))
			sp[n++] = (SpecialToken){ id, text[id], strlen(text[id]), id > 0 };
	return set_specials(t, sp, n, err);
}

/* ---- from a GGUF file's tokenizer.ggml.* metadata ---- */

/* SentencePiece spells ' ' as U+2581; llama2.c wraps its control tokens in
 * newlines. Returns the bytes the llama2.c piece takes (out may be NULL). */
static size_t llama2c_piece(const char *s, uint32_t len, int control, unsigned char *out)
{
	size_t n = 0;

	if (control && ((len == 3 && !memcmp(s, "<s>", 3)) || (len == 4 && !memcmp(s, "</s>", 4)))) {
		if (out) {
			out[0] = '\n';
			memcpy(out + 1, s, len);
			out[len + 1] = '\n';
		}
		return len + 2;
	}
	for (uint32_t i = 0; i < len; i++, n++) {
		int space = i + 2 < len && !memcmp(s + i, "\xe2\x96\x81", 3);

		if (out)
			out[n] = space ? ' ' : (unsigned char)s[i];
		i += space ? 2 : 0;
	}
	return n;
}

/* The metadata array key: its kv, checked to be count elements of type. */
static const struct gguf_kv *gguf_array(const struct gguf *g, const char *key, uint32_t type,
					uint64_t count, InferError *err)
{
	const struct gguf_kv *kv = gguf_find(g, key);

	if (!kv)
		return infer_fail(err, "gguf: metadata %s is missing", key), NULL;
	if (kv->type != GGUF_ARRAY || kv->elem_type != type || (count && kv->count != count))
		return infer_fail(err, "gguf: metadata %s is not an array of %llu %s", key,
				  (unsigned long long)count, type == GGUF_STRING ? "strings" : "numbers"), NULL;
	return kv;
}

static int check_special_ids(const struct gguf *g, InferError *err)
{
	uint64_t bos = TOKEN_BOS, eos = 2;

	if (gguf_get_uint(g, "tokenizer.ggml.bos_token_id", 0, UINT32_MAX, &bos, err) ||
	    gguf_get_uint(g, "tokenizer.ggml.eos_token_id", 0, UINT32_MAX, &eos, err))
		return -1;
	if (bos != TOKEN_BOS || eos != 2)
		return infer_fail(err, "gguf: bos/eos token ids %llu/%llu; the engine's llama tokenizer uses 1/2",
				  (unsigned long long)bos, (unsigned long long)eos);
	return 0;
}

/* The encoder adds BOS and a leading space, never EOS, as llama2.c does:
 * a file that asks otherwise would get other ids than llama.cpp gives. */
static int check_flags(const struct gguf *g, InferError *err)
{
	int bos = 1, space = 1, eos = 0;

	if (gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &bos, err) ||
	    gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &space, err) ||
	    gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &eos, err))
		return -1;
	if (!bos)
		return infer_fail(err, "gguf: tokenizer.ggml.add_bos_token is false; "
				  "the engine's llama tokenizer always adds BOS");
	if (!space)
		return infer_fail(err, "gguf: tokenizer.ggml.add_space_prefix is false; "
				  "the engine's llama tokenizer always adds a leading space");
	if (eos)
		return infer_fail(err, "gguf: tokenizer.ggml.add_eos_token is true; "
				  "the engine's llama tokenizer never adds EOS");
	return 0;
}

/* Bytes no piece covers fall back to ids byte + 3 (push_codepoint), so
 * those ids must be the byte tokens <0x00>..<0xFF>. A smaller vocabulary
 * has no fallback: tokenizer_encode refuses text, --ids still runs. */
static int check_byte_tokens(const struct gguf_kv *tokens, InferError *err)
{
	const uint8_t *cur = tokens->value;
	char want[8], name[40];

	if (tokens->count < 3 + 256)
		return 0;
	for (int i = 0; i < 3 + 256; i++) {
		const char *s;
		uint32_t len;

		gguf_next_str(&cur, &s, &len);
		if (i < 3)
			continue;
		snprintf(want, sizeof(want), "<0x%02X>", i - 3);
		if (len != 6 || memcmp(s, want, 6))
			return infer_fail(err, "gguf: token %d is '%s', not the byte token %s "
					  "the byte fallback needs",
					  i, gguf_clean(s, len, name, sizeof(name)), want);
	}
	return 0;
}

/* Token types 2 (unknown), 3 (control) and 4 (user-defined) are matched in
 * text; a turn's end by name is a control token whatever its type. */
static int gguf_specials(Tokenizer *t, const struct gguf_kv *tokens, const struct gguf_kv *types,
			 InferError *err)
{
	const uint8_t *cur = tokens->value;
	SpecialToken *sp = NULL;
	int n = 0, cap = 0, rc;

	for (uint64_t i = 0; i < tokens->count; i++) {
		const char *s;
		uint32_t len;
		int32_t type;
		int end;

		gguf_next_str(&cur, &s, &len);
		memcpy(&type, types->value + 4 * i, 4);
		end = is_turn_end(s, len);
		if (type != 2 && type != 3 && type != 4 && !end)
			continue;
		if (len == 0)
			continue; /* an empty text would match everywhere */
		if (n == cap) {
			SpecialToken *g = realloc(sp, (size_t)(cap = cap ? 2 * cap : 64) * sizeof(*sp));

			if (!g) {
				free(sp);
				return infer_fail(err, "out of memory for the special tokens");
			}
			sp = g;
		}
		sp[n++] = (SpecialToken){ (int)i, s, len, type == 3 || end };
	}
	rc = set_specials(t, sp, n, err);
	free(sp);
	return rc;
}

int tokenizer_from_gguf(Tokenizer *t, const struct gguf *g, InferError *err)
{
	const struct gguf_kv *tokens, *scores, *types;
	const char *model;
	const uint8_t *cur;
	uint32_t len;
	size_t bytes = 4;
	unsigned char *d, *p;
	int rc;

	memset(t, 0, sizeof(*t));
	if (gguf_get_str(g, "tokenizer.ggml.model", &model, &len, err))
		return -1;
	if (len != 5 || memcmp(model, "llama", 5)) {
		char name[33];

		return infer_fail(err, "gguf: tokenizer model '%s' is not supported (llama, SentencePiece)",
				  gguf_clean(model, len, name, sizeof(name)));
	}
	if (!(tokens = gguf_array(g, "tokenizer.ggml.tokens", GGUF_STRING, 0, err)) ||
	    !(scores = gguf_array(g, "tokenizer.ggml.scores", GGUF_F32, tokens->count, err)) ||
	    !(types = gguf_array(g, "tokenizer.ggml.token_type", GGUF_I32, tokens->count, err)) ||
	    check_special_ids(g, err))
		return -1;
	if (tokens->count == 0 || tokens->count > (1u << 24))
		return infer_fail(err, "gguf: %llu tokens", (unsigned long long)tokens->count);
	if (check_byte_tokens(tokens, err) || check_flags(g, err))
		return -1;
	cur = tokens->value;
	for (uint64_t i = 0; i < tokens->count; i++) {
		const char *s;
		int32_t type;

		gguf_next_str(&cur, &s, &len);
		memcpy(&type, types->value + 4 * i, 4);
		bytes += 8 + llama2c_piece(s, len, type == 3, NULL);
	}
	d = malloc(bytes);
	if (!d)
		return infer_fail(err, "gguf: out of memory for the tokenizer");
	memset(d, 0, 4);   /* max_token_length: recomputed from the pieces */
	p = d + 4;
	cur = tokens->value;
	for (uint64_t i = 0; i < tokens->count; i++) {
		const char *s;
		int32_t type, n;

		gguf_next_str(&cur, &s, &len);
		memcpy(&type, types->value + 4 * i, 4);
		memcpy(p, scores->value + 4 * i, 4);
		n = (int32_t)llama2c_piece(s, len, type == 3, p + 8);
		memcpy(p + 4, &n, 4);
		p += 8 + n;
	}
	rc = tokenizer_parse(t, d, bytes, "gguf tokenizer", err);
	free(d);
	if (rc == 0 && gguf_specials(t, tokens, types, err) < 0) {
		tokenizer_free(t);
		return -1;
	}
	return rc;
}

void tokenizer_free(Tokenizer *t)
{
	free(t->special_block);
	pool_free(POOL_WEIGHTS, t->block, t->block_bytes);
	memset(t, 0, sizeof(*t));
}

int tokenizer_lookup(const Tokenizer *t, const char *piece)
{
	int lo = 0, hi = t->vocab_size - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		int c = strcmp(piece, t->vocab[t->sorted[mid]]);

		if (c == 0)
			return t->sorted[mid];
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return -1;
}

/* One codepoint (at most 4 bytes) as a token, or its bytes as ids byte+3. */
static void push_codepoint(const Tokenizer *t, const char *cp, size_t len,
			   int *tokens, int *n)
{
	char buf[5];
	int id;

	memcpy(buf, cp, len);
	buf[len] = '\0';
	id = tokenizer_lookup(t, buf);
	if (id >= 0) {
		tokens[(*n)++] = id;
		return;
	}
	for (size_t i = 0; i < len; i++)
		tokens[(*n)++] = (unsigned char)buf[i] + 3;
}

/* ---- merges: llama2.c's rule, in n log n ----
 *
 * llama2.c merges, again and again, the adjacent pair whose merged piece
 * scores best (the leftmost of equals) until no pair is a piece: quadratic
 * in the text's length, seconds for a few thousand bytes. The same merges
 * come from a heap of candidate pairs ordered by score, then by the left
 * symbol's first position (symbols keep their order, so that is
 * "leftmost"); a pair whose symbols changed since it was queued is stale
 * and skipped. */

typedef struct {
	float score;
	int left, right;   /* symbol indices */
	int left_id, right_id, merged;
} Pair;

typedef struct {
	int *id, *prev, *next;  /* (n) the symbols: a list over the tokens array */
	Pair *heap;             /* (cap) */
	int size, cap;
	char *buf;              /* two pieces concatenated */
} Merges;

static int pair_before(const Pair *a, const Pair *b)
{
	return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(Merges *m, Pair p)
{
	int i = m->size++;

	while (i > 0 && pair_before(&p, &m->heap[(i - 1) / 2])) {
		m->heap[i] = m->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	m->heap[i] = p;
}

static Pair heap_pop(Merges *m)
{
	Pair top = m->heap[0], last = m->heap[--m->size];
	int i = 0;

	for (;;) {
		int c = 2 * i + 1;

		if (c >= m->size)
			break;
		if (c + 1 < m->size && pair_before(&m->heap[c + 1], &m->heap[c]))
			c++;
		if (!pair_before(&m->heap[c], &last))
			break;
		m->heap[i] = m->heap[c];
		i = c;
	}
	if (m->size)
		m->heap[i] = last;
	return top;
}

/* Queues symbols l and r (adjacent) if their concatenation is a piece. */
static void queue_pair(const Tokenizer *t, Merges *m, int l, int r)
{
	const char *a, *b;
	size_t la, lb;
	int id;

	if (l < 0 || r < 0)
		return;
	a = t->vocab[m->id[l]];
	b = t->vocab[m->id[r]];
	la = strlen(a);
	lb = strlen(b);
	/* a merge longer than the longest piece cannot exist */
	if (la + lb > (size_t)t->max_token_length)
		return;
	memcpy(m->buf, a, la);
	memcpy(m->buf + la, b, lb + 1);
	id = tokenizer_lookup(t, m->buf);
	if (id >= 0)
		heap_push(m, (Pair){ t->scores[id], l, r, m->id[l], m->id[r], id });
}

/* Merges tokens[0..*n) in place. */
static int merge_all(const Tokenizer *t, int *tokens, int *n, InferError *err)
{
	int count = *n, k = 0;
	Merges m = { .cap = 3 * count + 1 };
	int rc = 0;

	m.id = malloc((size_t)(3 * count + 1) * sizeof(int));
	m.heap = malloc((size_t)m.cap * sizeof(Pair));
	m.buf = malloc(2 * (size_t)t->max_token_length + 1);
	if (!m.id || !m.heap || !m.buf) {
		rc = infer_fail(err, "out of memory for the prompt's merges");
		goto out;
	}
	m.prev = m.id + count;
	m.next = m.prev + count;
	for (int i = 0; i < count; i++) {
		m.id[i] = tokens[i];
		m.prev[i] = i - 1;
		m.next[i] = i + 1 < count ? i + 1 : -1;
	}
	for (int i = 0; i + 1 < count; i++)
		queue_pair(t, &m, i, i + 1);
	while (m.size) {
		Pair p = heap_pop(&m);

		if (m.id[p.left] != p.left_id || m.id[p.right] != p.right_id || m.next[p.left] != p.right)
			continue; /* stale: a symbol merged since */
		m.id[p.left] = p.merged;
		m.id[p.right] = -1;
		m.next[p.left] = m.next[p.right];
		if (m.next[p.right] >= 0)
			m.prev[m.next[p.right]] = p.left;
		queue_pair(t, &m, m.prev[p.left], p.left);
		queue_pair(t, &m, p.left, m.next[p.left]);
	}
	for (int i = count ? 0 : -1; i >= 0; i = m.next[i])
		tokens[k++] = m.id[i];
	*n = k;
out:
	free(m.id);
	free(m.heap);
	free(m.buf);
	return rc;
}

int tokenizer_encode(const Tokenizer *t, const char *text, int bos,
		     int *tokens, int *n_tokens, InferError *err)
{
	int n = 0;
	size_t len = 0;

	/* byte fallback needs ids 3..258 */
	if (t->vocab_size < 259)
		return infer_fail(err, "tokenizer has %d tokens, fewer than the 259 "
				  "special and byte tokens", t->vocab_size);
	if (bos)
		tokens[n++] = TOKEN_BOS;
	if (text[0] != '\0') {
		int space = tokenizer_lookup(t, " ");

		if (space < 0)
			return infer_fail(err, "tokenizer has no \" \" token for the dummy prefix");
		tokens[n++] = space;
	}
	for (const char *c = text; *c; c++) {
		/* a byte that is not a continuation starts a new codepoint */
		if ((*c & 0xC0) != 0x80)
			len = 0;
		len++;
		if ((c[1] & 0xC0) == 0x80 && len < 4)
			continue;
		push_codepoint(t, c + 1 - len, len, tokens, &n);
		len = 0;
	}
	*n_tokens = n;
	return merge_all(t, tokens, n_tokens, err);
}

const char *tokenizer_special_text(const Tokenizer *t, int id)
{
	for (int i = 0; i < t->n_special; i++)
		if (t->special[i] == id)
			return t->special_text[i];
	return NULL;
}

/* A stretch of text: plain (id -1) or one special token's. */
typedef struct {
	size_t off, len;
	int id;
} Fragment;

/* Splits every plain fragment of f (n) at each occurrence of special
 * token k, into out; returns out's count. One pass, no moving: a prompt of
 * thousands of special tokens costs no more than its length. */
static int split_at_special(const Tokenizer *t, int k, const char *text, const Fragment *f, int n,
			    Fragment *out)
{
	const char *st = t->special_text[k];
	size_t sl = strlen(st);
	int m = 0;

	for (int i = 0; i < n; i++) {
		size_t off = f[i].off, end = f[i].off + f[i].len;
		const char *hit;

		if (f[i].id >= 0) {
			out[m++] = f[i];
			continue;
		}
		while ((hit = memmem(text + off, end - off, st, sl))) {
			size_t at = (size_t)(hit - text);

			if (at > off)
				out[m++] = (Fragment){ off, at - off, -1 };
			out[m++] = (Fragment){ at, sl, t->special[k] };
			off = at + sl;
		}
		if (off < end)
			out[m++] = (Fragment){ off, end - off, -1 };
	}
	return m;
}

int tokenizer_encode_special(const Tokenizer *t, const char *text, int bos, int *tokens,
			     int *n_tokens, InferError *err)
{
	size_t len = strlen(text);
	/* each split adds at most two fragments and takes at least one byte */
	Fragment *f = malloc((2 * len + 1) * sizeof(*f)), *g = malloc((2 * len + 1) * sizeof(*g));
	char *buf = malloc(len + 1);
	int nf = len > 0, n = 0, rc = 0;

	if (!f || !g || !buf) {
		free(f);
		free(g);
		free(buf);
		return infer_fail(err, "out of memory for the prompt");
	}
	f[0] = (Fragment){ 0, len, -1 };
	for (int k = 0; k < t->n_special; k++) {
		Fragment *swap = f;

		nf = split_at_special(t, k, text, f, nf, g);
		f = g;
		g = swap;
	}
	free(g);
	if (bos)
		tokens[n++] = TOKEN_BOS;
	for (int i = 0; i < nf && rc == 0; i++) {
		int got = 0;

		if (f[i].id >= 0) {
			tokens[n++] = f[i].id;
			continue;
		}
		memcpy(buf, text + f[i].off, f[i].len);
		buf[f[i].len] = '\0';
		rc = tokenizer_encode(t, buf, 0, tokens + n, &got, err);
		n += got;
	}
	free(f);
	free(buf);
	*n_tokens = n;
	return rc;
}

const char *tokenizer_decode(const Tokenizer *t, int prev, int token)
{
	static const char hex[] = "0123456789ABCDEF";
	/* 256 one-byte strings for "<0xNN>" pieces */
	static char bytes[256][2];
	const char *piece;
	const char *h1, *h2;

	if (token < 0 || token >= t->vocab_size)
		return "";
	piece = t->vocab[token];
	if (prev == TOKEN_BOS && piece[0] == ' ')
		piece++;
	if (strlen(piece) == 6 && strncmp(piece, "<0x", 3) == 0 && piece[5] == '>' &&
	    (h1 = memchr(hex, toupper((unsigned char)piece[3]), 16)) &&
	    (h2 = memchr(hex, toupper((unsigned char)piece[4]), 16))) {
		int b = (int)(h1 - hex) * 16 + (int)(h2 - hex);

		bytes[b][0] = (char)b;
		bytes[b][1] = '\0';
		return bytes[b];
	}
	return piece;
}

int piece_is_printable(const char *piece)
{
	unsigned char b = (unsigned char)piece[0];

	if (b == 0)
		return 0;
	if (piece[1] != '\0')
		return 1;
	return b >= 0x80 || isprint(b) || isspace(b);
}
