/* mkmodel.c - writes deterministic llama2.c checkpoints (and optionally a
 * matching synthetic tokenizer) so tests and demos need no downloads; with
 * --gguf, the same model (or, with --from, an existing checkpoint) as a GGUF
 * file with F32, F16, Q8_0, Q4_0, Q4_K or Q6_K matrices and the tokenizer inside.
 *
 * Weights are uniform in [-scale, scale] with scale ~ 1/sqrt(fan_in), rms
 * weights are 1, the classifier is shared: logits are varied, not flat.
 * The same arguments always give byte-identical files. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "text/chat.h"
#include "model/gguf_write.h"
#include "model/model.h"
#include "text/tokenizer.h"

typedef struct {
	const char *name;
	int shape[7];
} NamedShape;

static const NamedShape shapes[] = {
	{ "stories15M", { 288, 768, 6, 6, 6, 32000, 256 } },
	{ "stories260K", { 64, 172, 5, 8, 4, 512, 512 } },
};

typedef struct {
	const char *out, *tok_out;
	const char *from;        /* --from: convert this checkpoint instead of generating */
	const char *vocab;       /* --vocab: the llama2.c tokenizer to put in the GGUF file */
	int gguf;                /* --gguf given */
	WeightType gguf_type;
	ChatFamily chat;         /* --chat-template: the family's template, its tokens added */
	Config c;
	float norm_eps, rope_theta;   /* --norm-eps, --rope-theta (GGUF): 0, llama2.c's */
	uint64_t seed;
} MkArgs;

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [-scale, scale) from the top 24 bits. */
static float rng_uniform(uint64_t *s, float scale)
{
	return ((float)(rng_next(s) >> 40) / 16777216.0f * 2.0f - 1.0f) * scale;
}

static __attribute__((format(printf, 1, 2))) int die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "mkmodel: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

static int parse_shape(const char *s, Config *c)
{
	int v[7];
	const char *p = s;

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (!strcmp(s, shapes[i].name)) {
			memcpy(v, shapes[i].shape, sizeof(v));
			goto found;
		}
	for (int i = 0; i < 7; i++) {
		char *end;
		long x;

		errno = 0;
		x = strtol(p, &end, 10);
		if (i == 5 && x < 0) /* llama2.c's sign: a classifier of its own */
			x = -x;
		if (errno || end == p || x <= 0 || x > INT32_MAX || *end != (i < 6 ? ',' : '\0'))
			return die("--shape '%s': want stories15M, stories260K or "
				   "DIM,HIDDEN,LAYERS,HEADS,KV_HEADS,VOCAB,SEQ (positive; VOCAB negative "
				   "for a classifier apart from the embedding)", s);
		v[i] = (int)x;
		p = end + 1;
	}
	*c = (Config){ v[0], v[1], v[2], v[3], v[4], v[5], v[6], strchr(s, '-') == NULL, 0, 0 };
	return 0;
found:
	*c = (Config){ v[0], v[1], v[2], v[3], v[4], v[5], v[6], 1, 0, 0 };
	return 0;
}

/* The template's special tokens become the generated model's last rows;
 * a --from checkpoint has no rows for them. */
static int add_chat_rows(MkArgs *a)
{
	int n;

	chat_special_tokens(a->chat, &n);
	if (n && a->from)
		return die("--chat-template %s adds %d special tokens, and --from's checkpoint has "
			   "no embedding rows for them", chat_family_name(a->chat), n);
	a->c.vocab_size += n;
	return 0;
}

static int parse_args(MkArgs *a, int argc, char **argv)
{
	InferError err;

	*a = (MkArgs){ .seed = 1, .chat = CHAT_NONE };
	parse_shape("stories15M", &a->c);
	for (int i = 1; i < argc; i++) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (opt[0] != '-') {
			if (a->out)
				return die("unexpected argument '%s'", opt);
			a->out = opt;
			continue;
		}
		if (!val)
			return die("%s needs a value", opt);
		i++;
		if (!strcmp(opt, "--shape")) {
			if (parse_shape(val, &a->c) < 0)
				return -1;
		} else if (!strcmp(opt, "--seed")) {
			char *end;

			errno = 0;
			a->seed = strtoull(val, &end, 10);
			if (errno || end == val || *end || val[0] == '-')
				return die("--seed '%s': not a non-negative integer", val);
		} else if (!strcmp(opt, "--tokenizer")) {
			a->tok_out = val;
		} else if (!strcmp(opt, "--gguf")) {
			a->gguf = 1;
			if (!strcmp(val, "f32"))
				a->gguf_type = WEIGHT_F32;
			else if (!strcmp(val, "f16"))
				a->gguf_type = WEIGHT_F16;
			else if (!strcmp(val, "q8_0"))
				a->gguf_type = WEIGHT_Q8_0;
			else if (!strcmp(val, "q4_0"))
				a->gguf_type = WEIGHT_Q4_0;
			else if (!strcmp(val, "q4_k"))
				a->gguf_type = WEIGHT_Q4_K;
			else if (!strcmp(val, "q6_k"))
				a->gguf_type = WEIGHT_Q6_K;
			else
				return die("--gguf '%s': want f32, f16, q8_0, q4_0, q4_k or q6_k", val);
		} else if (!strcmp(opt, "--from")) {
			a->from = val;
		} else if (!strcmp(opt, "--vocab")) {
			a->vocab = val;
		} else if (!strcmp(opt, "--norm-eps") || !strcmp(opt, "--rope-theta")) {
			char *end;
			float x;

			errno = 0;
			x = strtof(val, &end);
			if (errno || end == val || *end || !(x > 0))
				return die("%s '%s': not a number above 0", opt, val);
			*(opt[2] == 'n' ? &a->norm_eps : &a->rope_theta) = x;
		} else if (!strcmp(opt, "--chat-template")) {
			if ((a->chat = chat_family_by_name(val)) == CHAT_NONE)
				return die("--chat-template '%s': want one of %s", val, chat_family_list());
		} else {
			return die("unknown option '%s'", opt);
		}
	}
	if (!a->out)
		return die("usage: mkmodel OUT [--shape stories15M|stories260K|D,H,L,NH,NKV,V,S] "
			   "[--seed N] [--tokenizer OUT_TOK.bin] [--gguf f32|f16|q8_0|q4_0|q4_k|q6_k [--from CKPT.bin] "
			   "[--vocab TOK.bin] [--chat-template NAME] [--norm-eps E] [--rope-theta T]]");
	if ((a->from || a->vocab || a->chat != CHAT_NONE || a->norm_eps || a->rope_theta) && !a->gguf)
		return die("--from, --vocab, --chat-template, --norm-eps and --rope-theta go with --gguf "
			   "(a llama2.c checkpoint states neither constant)");
	a->c.norm_eps = a->norm_eps;
	a->c.rope_theta = a->rope_theta;
	if (a->chat != CHAT_NONE && add_chat_rows(a) < 0)
		return -1;
	if (config_validate(&a->c, &err) < 0)
		return die("--shape: %s", err.msg);
	/* xorshift has a fixed point at 0 */
	if (a->seed == 0)
		a->seed = 0x9E3779B97F4A7C15ull;
	return 0;
}

/* Writes count floats: constant `fill` if scale is 0, else random. */
static int write_tensor(FILE *f, uint64_t *rng, size_t count, float scale, float fill)
{
	float buf[4096];

	while (count > 0) {
		size_t n = count < 4096 ? count : 4096;

		for (size_t i = 0; i < n; i++)
			buf[i] = scale != 0.0f ? rng_uniform(rng, scale) : fill;
		if (fwrite(buf, sizeof(float), n, f) != n)
			return -1;
		count -= n;
	}
	return 0;
}

static int write_model(FILE *f, const Config *c, uint64_t seed)
{
	size_t dim = (size_t)c->dim, hid = (size_t)c->hidden_dim, L = (size_t)c->n_layers;
	size_t kv_dim = dim / (size_t)c->n_heads * (size_t)c->n_kv_heads;
	size_t hs = dim / (size_t)c->n_heads;
	int32_t header[7] = { c->dim, c->hidden_dim, c->n_layers, c->n_heads,
			      c->n_kv_heads, c->shared_classifier ? c->vocab_size : -c->vocab_size, c->seq_len };
	float in_dim = 1.0f / sqrtf((float)dim), in_hid = 1.0f / sqrtf((float)hid);
	/* logits = emb @ normed x: keep their spread near 2, not flat, not
	 * one-hot. wo and w2 are 3x larger so the layers, not the token's own
	 * embedding, steer the residual stream (else sampling repeats itself). */
	float emb_scale = 2.0f * sqrtf(3.0f / (float)dim);
	uint64_t rng = seed;
	struct { size_t n; float scale, fill; } t[] = {
		{ (size_t)c->vocab_size * dim, emb_scale, 0 }, /* token embedding */
		{ L * dim, 0, 1.0f },                         /* rms_att */
		{ L * dim * dim, in_dim, 0 },                 /* wq */
		{ L * kv_dim * dim, in_dim, 0 },              /* wk */
		{ L * kv_dim * dim, in_dim, 0 },              /* wv */
		{ L * dim * dim, 3 * in_dim, 0 },             /* wo */
		{ L * dim, 0, 1.0f },                         /* rms_ffn */
		{ L * hid * dim, in_dim, 0 },                 /* w1 */
		{ L * dim * hid, 3 * in_hid, 0 },             /* w2 */
		{ L * hid * dim, in_dim, 0 },                 /* w3 */
		{ dim, 0, 1.0f },                             /* rms_final */
		{ (size_t)c->seq_len * hs, 0, 0.0f },         /* freq_cis (unused) */
		{ c->shared_classifier ? 0 : (size_t)c->vocab_size * dim, emb_scale, 0 }, /* wcls */
	};

	if (fwrite(header, sizeof(header), 1, f) != 1)
		return -1;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (write_tensor(f, &rng, t[i].n, t[i].scale, t[i].fill) < 0)
			return -1;
	return 0;
}

/* ---- the synthetic tokenizer ---- */

typedef struct {
	char **piece;
	int n, cap;
	/* open-addressing set of the pieces so far, to keep them unique */
	int *slot;
	size_t nslots;
} Vocab;

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

/* Adds s unless present or full; -1 on allocation failure. */
static int vocab_add(Vocab *v, const char *s)
{
	size_t i = hash_str(s) & (v->nslots - 1);

	if (v->n >= v->cap)
		return 0;
	for (; v->slot[i] >= 0; i = (i + 1) & (v->nslots - 1))
		if (!strcmp(v->piece[v->slot[i]], s))
			return 0;
	v->piece[v->n] = strdup(s);
	if (!v->piece[v->n])
		return -1;
	v->slot[i] = v->n++;
	return 0;
}

static const char *const words[] = {
	"the", "a", "and", "to", "was", "he", "she", "it", "they", "in", "on", "with",
	"Once", "upon", "time", "there", "little", "girl", "boy", "dog", "cat", "big",
	"happy", "sad", "friend", "play", "park", "tree", "sun", "day", "Lily", "Tom",
	"said", "saw", "went", "home", "mom", "dad", "ball", "red", "blue", "bird",
	"fish", "water", "run", "jump", "love", "good", "very", "one", "of", "her", "his",
};

/* Fills the vocab in a fixed order: specials, bytes, ASCII, words, then
 * lowercase letter strings of growing length until vocab_size. */
static int fill_vocab(Vocab *v)
{
	char buf[16];
	int rc = 0;

	rc |= vocab_add(v, "<unk>");
	rc |= vocab_add(v, "\n<s>\n");
	rc |= vocab_add(v, "\n</s>\n");
	for (int b = 0; b < 256; b++) {
		snprintf(buf, sizeof(buf), "<0x%02X>", b);
		rc |= vocab_add(v, buf);
	}
	for (int ch = ' '; ch <= '~'; ch++) {
		buf[0] = (char)ch;
		buf[1] = '\0';
		rc |= vocab_add(v, buf);
	}
	for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
		snprintf(buf, sizeof(buf), " %s", words[w]);
		rc |= vocab_add(v, buf);
		rc |= vocab_add(v, words[w]);
	}
	for (int len = 1; len <= 4 && v->n < v->cap && rc == 0; len++) {
		long total = 1;

		for (int i = 0; i < len; i++)
			total *= 26;
		for (long k = 0; k < total && v->n < v->cap && rc == 0; k++) {
			long x = k;

			buf[0] = ' ';
			for (int i = len; i >= 1; i--, x /= 26)
				buf[i] = (char)('a' + x % 26);
			buf[len + 1] = '\0';
			rc |= vocab_add(v, buf);      /* " abc" */
			rc |= vocab_add(v, buf + 1);  /* "abc" */
		}
	}
	return rc;
}

static int write_tokenizer(FILE *f, const Vocab *v)
{
	int32_t max_len = 0;

	for (int i = 0; i < v->n; i++)
		if ((int32_t)strlen(v->piece[i]) > max_len)
			max_len = (int32_t)strlen(v->piece[i]);
	if (fwrite(&max_len, 4, 1, f) != 1)
		return -1;
	for (int i = 0; i < v->n; i++) {
		/* specials and bytes score 0; later pieces merge with lower priority */
		float score = i < 259 ? 0.0f : -(float)(i - 259);
		int32_t len = (int32_t)strlen(v->piece[i]);

		if (fwrite(&score, 4, 1, f) != 1 || fwrite(&len, 4, 1, f) != 1 ||
		    fwrite(v->piece[i], 1, (size_t)len, f) != (size_t)len)
			return -1;
	}
	return 0;
}

static void vocab_free(Vocab *v)
{
	for (int i = 0; i < v->n; i++)
		free(v->piece[i]);
	free(v->piece);
	free(v->slot);
}

/* Writes via a temporary file so a failed run leaves nothing half-written. */
static int write_file(const char *path, int (*body)(FILE *, const void *), const void *arg)
{
	char tmp[4096];
	FILE *f;
	int rc;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return die("%s: path too long", path);
	f = fopen(tmp, "wb");
	if (!f)
		return die("%s: %s", tmp, strerror(errno));
	rc = body(f, arg);
	if (fclose(f) != 0 || rc < 0) {
		remove(tmp);
		return die("%s: write failed", tmp);
	}
	if (rename(tmp, path) < 0) {
		remove(tmp);
		return die("%s: %s", path, strerror(errno));
	}
	return 0;
}

static int model_body(FILE *f, const void *arg)
{
	const MkArgs *a = arg;

	return write_model(f, &a->c, a->seed);
}

static int tokenizer_body(FILE *f, const void *arg)
{
	return write_tokenizer(f, arg);
}

static int make_tokenizer(const MkArgs *a)
{
	Vocab v = { 0 };
	int rc;

	if (a->c.vocab_size < 259 + 95)
		return die("--tokenizer needs a vocabulary of at least 354 (bytes and ASCII)");
	v.cap = a->c.vocab_size;
	for (v.nslots = 1; v.nslots < (size_t)v.cap * 2; v.nslots *= 2)
		;
	v.piece = calloc((size_t)v.cap, sizeof(char *));
	v.slot = malloc(v.nslots * sizeof(int));
	if (!v.piece || !v.slot) {
		vocab_free(&v);
		return die("out of memory");
	}
	memset(v.slot, 0xff, v.nslots * sizeof(int));
	rc = fill_vocab(&v);
	if (rc == 0 && v.n < v.cap)
		rc = die("cannot make enough distinct pieces");
	else if (rc != 0)
		rc = die("out of memory");
	if (rc == 0)
		rc = write_file(a->tok_out, tokenizer_body, &v);
	vocab_free(&v);
	return rc;
}

/* ---- GGUF: the checkpoint (given, or generated) rewritten ---- */

typedef struct {
	const Model *m;
	const Tokenizer *tok;
	const GgufChat *chat;
	WeightType type;
} GgufJob;

static int gguf_body(FILE *f, const void *arg)
{
	const GgufJob *j = arg;
	InferError err;

	if (gguf_write_model(f, j->m, j->tok, j->chat, j->type, &err) < 0)
		return die("%s", err.msg);
	return 0;
}

/* --gguf: the source checkpoint is --from, or the generated model written
 * to OUT.src.tmp first; the tokenizer is --vocab, or the synthetic one. */
static int make_gguf(const MkArgs *a)
{
	char src[4096];
	const char *tok_path = a->vocab ? a->vocab : a->tok_out;
	Model m;
	Tokenizer tok;
	InferError err;
	GgufChat chat = { chat_template_source(a->chat), NULL, 0 };
	int rc = -1, have_tok = 0;

	chat.added = chat_special_tokens(a->chat, &chat.n_added);
	if (a->from) {
		snprintf(src, sizeof(src), "%s", a->from);
	} else {
		if (snprintf(src, sizeof(src), "%s.src.tmp", a->out) >= (int)sizeof(src))
			return die("%s: path too long", a->out);
		if (write_file(src, model_body, a) < 0)
			return -1;
	}
	if (model_load(&m, src, &err) < 0) {
		die("%s", err.msg);
		goto out;
	}
	if (a->norm_eps)   /* the constants the GGUF file states */
		m.config.norm_eps = a->norm_eps;
	if (a->rope_theta)
		m.config.rope_theta = a->rope_theta;
	if (a->tok_out) {   /* the synthetic tokenizer, sized for the model read */
		MkArgs sized = *a;

		sized.c = m.config;
		sized.c.vocab_size -= chat.n_added;
		if (make_tokenizer(&sized) < 0) {
			model_free(&m);
			goto out;
		}
	}
	if (tok_path && tokenizer_load(&tok, tok_path, &err) < 0)
		die("%s", err.msg);
	else
		have_tok = tok_path != NULL, rc = 0;
	if (rc == 0) {
		GgufJob job = { &m, have_tok ? &tok : NULL, a->chat == CHAT_NONE ? NULL : &chat,
				a->gguf_type };
		rc = write_file(a->out, gguf_body, &job);
	}
	if (have_tok)
		tokenizer_free(&tok);
	model_free(&m);
out:
	if (!a->from)
		remove(src);
	return rc;
}

int main(int argc, char **argv)
{
	MkArgs a;

	if (parse_args(&a, argc, argv) < 0)
		return 2;
	if (a.gguf)
		return make_gguf(&a) < 0 ? 1 : 0;
	if (write_file(a.out, model_body, &a) < 0)
		return 1;
	if (a.tok_out && make_tokenizer(&a) < 0)
		return 1;
	return 0;
}
