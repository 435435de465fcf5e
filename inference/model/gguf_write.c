/* gguf_write.c - writes a Model as GGUF v3 (the llama architecture), with
 * its matrices as F32, F16, Q8_0, Q4_0, Q4_K or Q6_K and its norms as F32, and a
 * llama2.c tokenizer as tokenizer.ggml.* metadata (see gguf_write.h).
 *
 * Quantization follows ggml's reference rounding, so llama.cpp reading the
 * file computes with exactly the values this engine does: F16 is IEEE
 * round-to-nearest-even; a Q8_0 block of 32 is d = max|x| / 127 (stored as
 * F16) and q = round(x / d); Q4_0, Q4_K and Q6_K as put_q4_0_row,
 * put_q4_k_row and put_q6_k_row say. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "format/gguf.h"
#include "model/gguf_write.h"

#define ALIGNMENT 32
#define Q8_BLOCK 32
#define Q6_K_BLOCK 256
#define Q6_K_BLOCK_BYTES 210
#define Q4_K_BLOCK_BYTES 144

/* ---- little-endian scalars and strings ---- */

struct out {
	FILE *f;
	int failed;
};

static void put(struct out *o, const void *p, size_t n)
{
	if (!o->failed && fwrite(p, 1, n, o->f) != n)
		o->failed = 1;
}

static void put_u32(struct out *o, uint32_t v) { put(o, &v, 4); }
static void put_u64(struct out *o, uint64_t v) { put(o, &v, 8); }
static void put_str(struct out *o, const char *s, size_t n) { put_u64(o, n); put(o, s, n); }

static void kv_head(struct out *o, const char *key, uint32_t type)
{
	put_str(o, key, strlen(key));
	put_u32(o, type);
}

static void kv_u32(struct out *o, const char *key, uint32_t v) { kv_head(o, key, GGUF_U32); put_u32(o, v); }
static void kv_f32(struct out *o, const char *key, float v) { kv_head(o, key, GGUF_F32); put(o, &v, 4); }
static void kv_str(struct out *o, const char *key, const char *v) { kv_head(o, key, GGUF_STRING); put_str(o, v, strlen(v)); }
static void kv_bool(struct out *o, const char *key, int v) { uint8_t b = !!v; kv_head(o, key, GGUF_BOOL); put(o, &b, 1); }

static void kv_array(struct out *o, const char *key, uint32_t elem_type, uint64_t n)
{
	kv_head(o, key, GGUF_ARRAY);
	put_u32(o, elem_type);
	put_u64(o, n);
}

/* ---- the tokenizer as SentencePiece pieces ---- */

enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_BYTE = 6 };

static int token_type(const char *piece, int id)
{
	unsigned hex;
	char end;

	if (id == 0)
		return TOKEN_UNKNOWN;
	if (id == 1 || id == 2)
		return TOKEN_CONTROL;
	if (strlen(piece) == 6 && sscanf(piece, "<0x%2x%c", &hex, &end) == 2 && end == '>')
		return TOKEN_BYTE;
	return TOKEN_NORMAL;
}

/* llama2.c's pieces with SentencePiece's spelling: ' ' is U+2581, and the
 * control tokens are bare "<s>", "</s>" (llama2.c wraps them in newlines). */
static void put_piece(struct out *o, const char *piece, int id)
{
	static const char space[] = "\xe2\x96\x81";
	size_t n = 0;

	if (id == 1 || id == 2) {
		const char *bare = id == 1 ? "<s>" : "</s>";
		put_str(o, bare, strlen(bare));
		return;
	}
	for (const char *p = piece; *p; p++)
		n += *p == ' ' ? 3 : 1;
	put_u64(o, n);
	for (const char *p = piece; *p; p++)
		put(o, *p == ' ' ? space : p, *p == ' ' ? 3 : 1);
}

/* The vocabulary: tok's first vocab - n_added pieces, then the chat's
 * added tokens, each a control token with score 0. */
static void put_tokenizer(struct out *o, const Tokenizer *t, const GgufChat *chat, int vocab)
{
	int n_added = chat ? chat->n_added : 0, own = vocab - n_added;
	float zero = 0;

	kv_str(o, "tokenizer.ggml.model", "llama");
	kv_array(o, "tokenizer.ggml.tokens", GGUF_STRING, (uint64_t)vocab);
	for (int i = 0; i < own; i++)
		put_piece(o, t->vocab[i], i);
	for (int i = 0; i < n_added; i++)
		put_str(o, chat->added[i], strlen(chat->added[i]));
	kv_array(o, "tokenizer.ggml.scores", GGUF_F32, (uint64_t)vocab);
	put(o, t->scores, (size_t)own * sizeof(float));
	for (int i = 0; i < n_added; i++)
		put(o, &zero, sizeof(zero));
	kv_array(o, "tokenizer.ggml.token_type", GGUF_I32, (uint64_t)vocab);
	for (int i = 0; i < own; i++)
		put_u32(o, (uint32_t)token_type(t->vocab[i], i));
	for (int i = 0; i < n_added; i++)
		put_u32(o, TOKEN_CONTROL);
	kv_u32(o, "tokenizer.ggml.bos_token_id", 1);
	kv_u32(o, "tokenizer.ggml.eos_token_id", 2);
	kv_u32(o, "tokenizer.ggml.unknown_token_id", 0);
	kv_bool(o, "tokenizer.ggml.add_bos_token", 1);
	kv_bool(o, "tokenizer.ggml.add_eos_token", 0);
	if (chat && chat->chat_template)
		kv_str(o, "tokenizer.chat_template", chat->chat_template);
}

/* ---- tensors ---- */

struct wtensor {
	char name[GGUF_NAME_MAX + 1];
	const float *src;
	uint64_t rows, cols;   /* rows 0: a vector */
	uint32_t type;
	uint64_t bytes, offset;
};

static uint64_t aligned(uint64_t x)
{
	return (x + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
}

/* F32 to F16, IEEE round-to-nearest-even (what F16C's vcvtps2ph does). */
static uint16_t to_f16(float x)
{
	_Float16 h = (_Float16)x;
	uint16_t u;

	memcpy(&u, &h, 2);
	return u;
}

static void put_q8_0_row(struct out *o, const float *x, uint64_t n)
{
	for (uint64_t b = 0; b < n; b += Q8_BLOCK) {
		float amax = 0.0f;
		int8_t q[Q8_BLOCK];

		for (int i = 0; i < Q8_BLOCK; i++)
			amax = fmaxf(amax, fabsf(x[b + i]));
		float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
		uint16_t dh = to_f16(d);

		for (int i = 0; i < Q8_BLOCK; i++)
			q[i] = (int8_t)roundf(x[b + i] * id);
		put(o, &dh, 2);
		put(o, q, Q8_BLOCK);
	}
}

/* As ggml quantizes Q4_0: d = the block's value of largest magnitude / -8
 * (so that value is -8 exactly), each value x / d + 8 truncated and capped
 * at 15; value j in byte j's low nibble, value j + 16 in its high one. */
static void put_q4_0_row(struct out *o, const float *x, uint64_t n)
{
	for (uint64_t b = 0; b < n; b += Q8_BLOCK) {
		float amax = 0.0f, max = 0.0f;
		uint8_t q[Q8_BLOCK / 2];

		for (int i = 0; i < Q8_BLOCK; i++)
			if (fabsf(x[b + i]) > amax) {
				amax = fabsf(x[b + i]);
				max = x[b + i];
			}
		float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
		uint16_t dh = to_f16(d);

		for (int i = 0; i < Q8_BLOCK / 2; i++) {
			int lo = (int)(x[b + i] * id + 8.5f), hi = (int)(x[b + i + 16] * id + 8.5f);

			q[i] = (uint8_t)((lo < 15 ? lo : 15) | (hi < 15 ? hi : 15) << 4);
		}
		put(o, &dh, 2);
		put(o, q, sizeof(q));
	}
}

/* Q6_K as ggml lays it out (backend/panels.c, q6k_code), quantized as ggml does
 * but for its search: each sub-block of 16 gets the scale that codes its
 * value of largest magnitude -32 (ggml's first guess); the scales are
 * int8 steps of d = (the largest in magnitude) / -128, and each value is
 * x / (d x scale) rounded, in -32..31, stored plus 32. */
static void put_q6_k_row(struct out *o, const float *x, uint64_t n)
{
	for (uint64_t b = 0; b < n; b += Q6_K_BLOCK, x += Q6_K_BLOCK) {
		uint8_t blk[Q6_K_BLOCK_BYTES] = { 0 }, code[Q6_K_BLOCK];
		float scale[16], max_scale = 0.0f;

		for (int s = 0; s < 16; s++) {
			float amax = 0.0f, max = 0.0f;

			for (int i = 0; i < 16; i++)
				if (fabsf(x[16 * s + i]) > amax) {
					amax = fabsf(x[16 * s + i]);
					max = x[16 * s + i];
				}
			scale[s] = max / -32.0f;
			if (fabsf(scale[s]) > fabsf(max_scale))
				max_scale = scale[s];
		}
		float iscale = max_scale != 0.0f ? -128.0f / max_scale : 0.0f;
		uint16_t dh = to_f16(iscale != 0.0f ? 1.0f / iscale : 0.0f);
		_Float16 dv;

		memcpy(&dv, &dh, 2);
		for (int s = 0; s < 16; s++) {
			int sc = (int)nearbyintf(iscale * scale[s]);
			float d = (float)dv * (float)(sc < 127 ? sc : 127);

			blk[192 + s] = (uint8_t)(int8_t)(sc < 127 ? sc : 127);
			for (int i = 0; i < 16; i++) {
				int l = d != 0.0f ? (int)nearbyintf(x[16 * s + i] / d) : 0;

				code[16 * s + i] = (uint8_t)((l < -32 ? -32 : l > 31 ? 31 : l) + 32);
			}
		}
		for (int v = 0; v < Q6_K_BLOCK; v++) { /* panels.c's q6k_code, backwards */
			int h = v / 128, g = v % 128 / 32, l = v % 32;

			blk[h * 64 + l + 32 * (g & 1)] |= (uint8_t)((code[v] & 15) << (g / 2 * 4));
			blk[128 + h * 32 + l] |= (uint8_t)((code[v] >> 4) << (2 * g));
		}
		memcpy(blk + 208, &dh, 2);
		put(o, blk, sizeof(blk));
	}
}

/* Q4_K as ggml lays it out and quantizes it, but for its search: each
 * sub-block of 32 gets the scale (its range / 15) and min (minus its
 * smallest value, at least 0) that span it (ggml's starting point); those
 * become 6-bit steps of d = the largest scale / 63 and dmin = the largest
 * min / 63, packed as ggml's get_scale_min_k4 reads them; each value is
 * (x + dmin x min) / (d x scale) rounded, in 0..15. */
static void put_q4_k_row(struct out *o, const float *x, uint64_t n)
{
	for (uint64_t b = 0; b < n; b += Q6_K_BLOCK, x += Q6_K_BLOCK) {
		uint8_t blk[Q4_K_BLOCK_BYTES] = { 0 }, ls[8], lm[8];
		float scale[8], min[8], max_scale = 0.0f, max_min = 0.0f;

		for (int s = 0; s < 8; s++) {
			float lo = 0.0f, hi = x[32 * s];

			for (int i = 0; i < 32; i++) {
				lo = fminf(lo, x[32 * s + i]);
				hi = fmaxf(hi, x[32 * s + i]);
			}
			scale[s] = (hi - lo) / 15.0f;
			min[s] = -lo;
			max_scale = fmaxf(max_scale, scale[s]);
			max_min = fmaxf(max_min, min[s]);
		}
		float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
		float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
		uint16_t dh = to_f16(max_scale / 63.0f), mh = to_f16(max_min / 63.0f);
		_Float16 dv, mv;

		memcpy(&dv, &dh, 2);
		memcpy(&mv, &mh, 2);
		for (int s = 0; s < 8; s++) {
			int a = (int)nearbyintf(inv_scale * scale[s]), m = (int)nearbyintf(inv_min * min[s]);

			ls[s] = (uint8_t)(a < 63 ? a : 63);
			lm[s] = (uint8_t)(m < 63 ? m : 63);
			if (s < 4) {
				blk[4 + s] = ls[s];
				blk[8 + s] = lm[s];
			} else {
				blk[8 + s] = (uint8_t)((ls[s] & 0x0f) | (lm[s] & 0x0f) << 4);
				blk[4 + s - 4] |= (uint8_t)(ls[s] >> 4 << 6);
				blk[4 + s] |= (uint8_t)(lm[s] >> 4 << 6);
			}
		}
		for (int v = 0; v < Q6_K_BLOCK; v++) { /* panels.c's q4k_code, backwards */
			float d = (float)dv * (float)ls[v / 32], dm = (float)mv * (float)lm[v / 32];
			int l = d != 0.0f ? (int)nearbyintf((x[v] + dm) / d) : 0;

			l = l < 0 ? 0 : l > 15 ? 15 : l;
			blk[16 + v / 64 * 32 + v % 32] |= (uint8_t)(l << (v % 64 / 32 * 4));
		}
		memcpy(blk, &dh, 2);
		memcpy(blk + 2, &mh, 2);
		put(o, blk, sizeof(blk));
	}
}

static void put_tensor_data(struct out *o, const struct wtensor *t)
{
	uint64_t rows = t->rows ? t->rows : 1;

	for (uint64_t r = 0; r < rows; r++) {
		const float *x = t->src + r * t->cols;

		if (t->type == GGML_F32) {
			put(o, x, t->cols * sizeof(float));
		} else if (t->type == GGML_F16) {
			for (uint64_t j = 0; j < t->cols; j++) {
				uint16_t h = to_f16(x[j]);
				put(o, &h, 2);
			}
		} else if (t->type == GGML_Q4_0) {
			put_q4_0_row(o, x, t->cols);
		} else if (t->type == GGML_Q6_K) {
			put_q6_k_row(o, x, t->cols);
		} else if (t->type == GGML_Q4_K) {
			put_q4_k_row(o, x, t->cols);
		} else {
			put_q8_0_row(o, x, t->cols);
		}
	}
}

static void add_tensor(struct wtensor *t, size_t *n, const char *name, const Tensor *src, uint64_t rows,
		       uint64_t cols, uint32_t type)
{
	struct wtensor *w = &t[(*n)++];

	snprintf(w->name, sizeof(w->name), "%s", name);
	w->src = tensor_f32(*src);
	w->rows = rows;
	w->cols = cols;
	w->type = rows ? type : GGML_F32;
	w->bytes = ggml_type_bytes(w->type, (rows ? rows : 1) * cols);
}

/* Every tensor the llama architecture names, in file order. */
static size_t list_tensors(const Model *m, uint32_t type, struct wtensor *t)
{
	const Config *c = &m->config;
	const Weights *w = &m->weights;
	uint64_t dim = c->dim, hid = c->hidden_dim, kv = dim / c->n_heads * c->n_kv_heads;
	size_t n = 0;
	char name[GGUF_NAME_MAX + 1];

	add_tensor(t, &n, "token_embd.weight", &w->token_embedding_table, c->vocab_size, dim, type);
	add_tensor(t, &n, "output_norm.weight", &w->rms_final_weight, 0, dim, type);
	if (!c->shared_classifier)
		add_tensor(t, &n, "output.weight", &w->wcls, c->vocab_size, dim, type);
	for (int l = 0; l < c->n_layers; l++) {
		const LayerWeights *lw = &m->weights.layers[l];
		struct { const char *suffix; const Tensor *src; uint64_t rows, cols; } per[] = {
			{ "attn_norm", &lw->rms_att, 0, dim }, { "attn_q", &lw->wq, dim, dim },
			{ "attn_k", &lw->wk, kv, dim },        { "attn_v", &lw->wv, kv, dim },
			{ "attn_output", &lw->wo, dim, dim },  { "ffn_norm", &lw->rms_ffn, 0, dim },
			{ "ffn_gate", &lw->w1, hid, dim },     { "ffn_down", &lw->w2, dim, hid },
			{ "ffn_up", &lw->w3, hid, dim },
		};
		for (size_t i = 0; i < sizeof(per) / sizeof(per[0]); i++) {
			snprintf(name, sizeof(name), "blk.%d.%s.weight", l, per[i].suffix);
			add_tensor(t, &n, name, per[i].src, per[i].rows, per[i].cols, type);
		}
	}
	return n;
}

static void put_tensor_info(struct out *o, const struct wtensor *t)
{
	put_str(o, t->name, strlen(t->name));
	put_u32(o, t->rows ? 2 : 1);
	put_u64(o, t->cols);
	if (t->rows)
		put_u64(o, t->rows);
	put_u32(o, t->type);
	put_u64(o, t->offset);
}

static void put_metadata(struct out *o, const Model *m, const Tokenizer *tok, const GgufChat *chat,
			 uint32_t type)
{
	const Config *c = &m->config;
	/* general.file_type: llama.cpp's LLAMA_FTYPE numbers */
	uint32_t ftype = type == GGML_F32 ? 0 : type == GGML_F16 ? 1 : type == GGML_Q4_0 ? 2 : type == GGML_Q6_K ? 18 : type == GGML_Q4_K ? 14 : 7;

	kv_str(o, "general.architecture", "llama");
	kv_str(o, "general.name", "spantrace mkmodel");
	kv_u32(o, "general.alignment", ALIGNMENT);
	kv_u32(o, "general.file_type", ftype);
	kv_u32(o, "llama.context_length", (uint32_t)c->seq_len);
	kv_u32(o, "llama.embedding_length", (uint32_t)c->dim);
	kv_u32(o, "llama.block_count", (uint32_t)c->n_layers);
	kv_u32(o, "llama.feed_forward_length", (uint32_t)c->hidden_dim);
	kv_u32(o, "llama.rope.dimension_count", (uint32_t)(c->dim / c->n_heads));
	kv_u32(o, "llama.attention.head_count", (uint32_t)c->n_heads);
	kv_u32(o, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads);
	kv_f32(o, "llama.attention.layer_norm_rms_epsilon", config_norm_eps(c));
	kv_f32(o, "llama.rope.freq_base", config_rope_theta(c));
	kv_u32(o, "llama.vocab_size", (uint32_t)c->vocab_size);
	if (tok)
		put_tokenizer(o, tok, chat, c->vocab_size);
}

/* Metadata keys put_metadata writes (the header counts them first). */
static uint64_t metadata_count(const Tokenizer *tok, const GgufChat *chat)
{
	return 14 + (tok ? 9 + (chat && chat->chat_template) : 0);
}

int gguf_write_model(FILE *f, const Model *m, const Tokenizer *tok, const GgufChat *chat,
		     WeightType type, InferError *err)
{
	int n_added = chat ? chat->n_added : 0;
	struct out o = { .f = f };
	size_t n, cap = 3 + 9 * (size_t)m->config.n_layers;
	struct wtensor *t;
	uint64_t off = 0, zero = 0;

	int block = type == WEIGHT_Q6_K || type == WEIGHT_Q4_K ? Q6_K_BLOCK : Q8_BLOCK;

	if (type != WEIGHT_F32 && type != WEIGHT_F16 && type != WEIGHT_Q8_0 && type != WEIGHT_Q4_0 &&
	    type != WEIGHT_Q4_K && type != WEIGHT_Q6_K)
		return infer_fail(err, "gguf: cannot write weights of type %d", (int)type);
	if (model_require_f32(m, "gguf writer (source)", err))
		return -1;
	if (tok && tok->vocab_size + n_added < m->config.vocab_size)
		return infer_fail(err, "gguf: the tokenizer has %d tokens (and %d added), the model %d",
				  tok->vocab_size, n_added, m->config.vocab_size);
	if (n_added > m->config.vocab_size - 3)
		return infer_fail(err, "gguf: %d added tokens leave too few rows of the model's %d",
				  n_added, m->config.vocab_size);
	if (type != WEIGHT_F32 && type != WEIGHT_F16 && (m->config.dim % block || m->config.hidden_dim % block))
		return infer_fail(err, "gguf: %s needs dim and hidden_dim divisible by %d (%d, %d)",
				  weight_type_name(type), block, m->config.dim, m->config.hidden_dim);
	t = calloc(cap, sizeof(*t));
	if (!t)
		return infer_fail(err, "gguf: out of memory");
	n = list_tensors(m, (uint32_t)type, t);
	for (size_t i = 0; i < n; off = aligned(off + t[i].bytes), i++)
		t[i].offset = off;
	put(&o, "GGUF", 4);
	put_u32(&o, 3);
	put_u64(&o, n);
	put_u64(&o, metadata_count(tok, chat));
	put_metadata(&o, m, tok, chat, (uint32_t)type);
	for (size_t i = 0; i < n; i++)
		put_tensor_info(&o, &t[i]);
	for (long pos = ftell(f); pos >= 0 && pos % ALIGNMENT; pos++)
		put(&o, &zero, 1);
	for (size_t i = 0; i < n; i++) {
		put_tensor_data(&o, &t[i]);
		for (uint64_t pad = aligned(t[i].bytes) - t[i].bytes; pad; pad--)
			put(&o, &zero, 1);
	}
	free(t);
	if (o.failed || ferror(f))
		return infer_fail(err, "gguf: write failed");
	return 0;
}
