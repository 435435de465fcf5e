/* phases.c - the phases of the CPU backend's forward and their tiles: a
 * layer is norm, q/k/v, RoPE, attention, wo, norm, w1/w3 with SwiGLU and
 * w2, then the final norm and the classifier; each phase is cut into tiles
 * (a token, some rows of a matrix, a query group's head) that any thread
 * may run (threads.c), and run_tile runs one. The KV cache's stores and
 * SwiGLU are here, static, beside their callers: they are cloned (arch.h). */
#include <math.h>
#include <string.h>
#include "backend/cpu/arch.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/phases.h"
#include "base/trace.h"

/* Rows per tile of a layer's matrix: a tile's grab is an atomic on a line
 * both cores write, and its rows are one stretch of the packed weights.
 * Tiles of 128 rows (8 panels, matmul.h) made the stories110M-shape step
 * 1.15-1.3x faster than tiles of 32; a small matrix keeps TILES_PER_THREAD
 * tiles a thread, so the last tile leaves no thread idle for long. */
#define TILE_ROWS_MIN 32
#define TILE_ROWS_MAX 128
#define TILES_PER_THREAD 4
/* Classifier rows per tile and token wanting logits, up to 4 tokens: a
 * tile's grab pulls the counters' cache line from the other core, which
 * cost ~5% of an 8-sequence step at 64-row tiles; one token's tiles stay
 * small so that the last one does not leave a thread idle for long. */
#define LOGIT_TILE_ROWS 64
#define LOGIT_TILE_TOKENS 4

/* One projection of a fused matmul: out(batch, d) = x @ w(d, n)^T, w packed
 * (matmul.h). */
typedef struct {
	float *out;
	PackedMatrix w;
	int d;
} Proj;

/* Rows r0..r1-1 of one projection against every token of the batch: the
 * unit of work a thread takes. */
static void matmul_tile(const Proj *p, int r0, int r1, const MatInput *in, int n, int batch)
{
	matmul_rows_typed(p->w.data, p->w.type, n, r0, r1, in, batch, p->out, (size_t)p->d);
}

/* Tiles of rows tile_rows high over several projections of the same
 * input (q/k/v): projection k holds tiles of its own rows only. */
static int proj_tiles(const Proj *p, int nproj, int tile_rows)
{
	int tiles = 0;

	for (int k = 0; k < nproj; k++)
		tiles += (p[k].d + tile_rows - 1) / tile_rows;
	return tiles;
}

/* Runs tile t of proj_tiles' numbering. */
static void proj_tile(const Proj *p, int nproj, int t, int tile_rows, const MatInput *in, int n,
		      int batch)
{
	int k = 0, r0 = t * tile_rows;

	while (k + 1 < nproj && r0 >= p[k].d) { /* tile t lies in projection k, from row r0 */
		r0 -= (p[k].d + tile_rows - 1) / tile_rows * tile_rows;
		k++;
	}
	matmul_tile(&p[k], r0, r0 + tile_rows < p[k].d ? r0 + tile_rows : p[k].d, in, n, batch);
}

/* Layer l's packed matrix of kind k (MAT_*). */
static PackedMatrix layer_matrix(const CpuState *s, int k, int l)
{
	return s->mats[(size_t)l * MAT_PER_LAYER + k];
}

/* q/k/v of layer l as three projections of the normed tokens. */
static void qkv_projs(const CpuState *s, int l, Proj p[3])
{
	int dim = s->c.dim, kv = s->kv_dim;

	p[0] = (Proj){ s->q, layer_matrix(s, MAT_WQ, l), dim };
	p[1] = (Proj){ s->k, layer_matrix(s, MAT_WK, l), kv };
	p[2] = (Proj){ s->v, layer_matrix(s, MAT_WV, l), kv };
}

/* Heads per rope tile. q/k/v come from both threads' product tiles, and
 * pulling a line from the other core costs ~250 ns here (as does each
 * grab of a tile): with fewer tokens than threads, one thread pulling a
 * whole token's was most of the phase while the other waited, so the
 * token's heads are split among the threads; with more, a tile is a token. */
static int rope_tile_heads(const CpuState *s)
{
	int groups = s->n >= s->threads ? 1 : 2 * s->threads;

	return (s->c.n_heads + groups - 1) / groups;
}

/* n floats into the cache at element i, as its type. Cloned per x86-64
 * level: from v3 on, a float becomes a half in one instruction (F16C),
 * not a libgcc call. */
CPU_CLONES
static void kv_store(void *cache, size_t i, const float *x, int n, int half)
{
	if (!half) {
		memcpy((float *)cache + i, x, n * sizeof(float));
		return;
	}
	for (int j = 0; j < n; j++)
		((_Float16 *)cache)[i + j] = (_Float16)x[j]; /* round to nearest even */
}

/* RoPE on heads h0..h1-1 of token b's q, and of its k where they are kv
 * heads, then their k/v into their pool rows. */
static void rope_and_store(const CpuState *s, int l, int b, int h0, int h1)
{
	int hs = s->head_size, p = s->tpos[b], block = s->tblocks[b][p / s->block_size];
	size_t off = (size_t)(p % s->block_size) * hs;

	for (int h = h0; h < h1; h++) {
		float *k = h < s->c.n_kv_heads ? s->k + (size_t)b * s->kv_dim + h * hs : NULL;

		rope_head(s->q + (size_t)b * s->c.dim + h * hs, k, hs, s->rope_cs + (size_t)p * hs);
		if (!k)
			continue;
		kv_store(s->key_cache, head_rows(s, l, block, h) + off, k, hs, s->kv_half);
		kv_store(s->value_cache, head_rows(s, l, block, h) + off,
			 s->v + (size_t)b * s->kv_dim + h * hs, hs, s->kv_half);
	}
}

/* Rope tile t: its token, and its heads. */
static void rope_tile(const CpuState *s, int l, int t)
{
	int per = rope_tile_heads(s), groups = (s->c.n_heads + per - 1) / per;
	int h0 = t % groups * per, h1 = h0 + per < s->c.n_heads ? h0 + per : s->c.n_heads;

	rope_and_store(s, l, t / groups, h0, h1);
}

/* Rows per tile of a matrix phase whose matrices have `rows` rows in all. */
static int tile_rows(const CpuState *s, int rows)
{
	int per = rows / (s->threads * TILES_PER_THREAD) / PANEL_ROWS * PANEL_ROWS;

	return per < TILE_ROWS_MIN ? TILE_ROWS_MIN : per > TILE_ROWS_MAX ? TILE_ROWS_MAX : per;
}

/* out += w @ in on the tile's rows of a (dim, k) matrix: wo and w2. */
static void matmul_add_tile(const CpuState *s, PackedMatrix w, int k, const MatInput *in,
			    float *tmp, int t)
{
	int dim = s->c.dim, rows = tile_rows(s, dim), r0 = t * rows;
	int r1 = r0 + rows < dim ? r0 + rows : dim;
	Proj p = { tmp, w, dim };

	matmul_tile(&p, r0, r1, in, k, s->n);
	residual_rows(s->x, tmp, dim, r0, r1, s->n);
}

/* glibc's vector expf (libmvec, through libm): declared as simd here, as
 * math.h does only under -ffast-math. One exp per hidden value and token
 * was ~6% of an 8-sequence step as scalar calls. */
#pragma omp declare simd notinbranch
float expf(float x);

/* h = silu(h) * h3 over n values. Which lanes go through the vector expf
 * depends only on the tile's rows, never on the batch. Cloned per x86-64
 * level, as the products are built per level (matmul_kernel.c), so each
 * clone calls its own width of libmvec. */
CPU_CLONES
static void swiglu(float *h, const float *h3, int n)
{
#pragma omp simd
	for (int i = 0; i < n; i++) {
		float val = h[i];

		val *= (1.0f / (1.0f + expf(-val)));
		h[i] = val * h3[i];
	}
}

/* Hidden rows of w1 and w3, then SwiGLU on them: hb = silu(w1 x) * (w3 x). */
static void ffn_up_tile(const CpuState *s, int l, int t, const MatInput *in)
{
	int dim = s->c.dim, hid = s->c.hidden_dim, rows = tile_rows(s, hid), r0 = t * rows;
	int r1 = r0 + rows < hid ? r0 + rows : hid;
	Proj p1 = { s->hb, layer_matrix(s, MAT_W1, l), hid };
	Proj p3 = { s->hb2, layer_matrix(s, MAT_W3, l), hid };

	matmul_tile(&p1, r0, r1, in, dim, s->n);
	matmul_tile(&p3, r0, r1, in, dim, s->n);
	for (int b = 0; b < s->n; b++)
		swiglu(s->hb + (size_t)b * hid + r0, s->hb2 + (size_t)b * hid + r0, r1 - r0);
}

static int logit_tile_rows(const CpuState *s)
{
	return LOGIT_TILE_ROWS * (s->n_out < LOGIT_TILE_TOKENS ? s->n_out : LOGIT_TILE_TOKENS);
}

void run_tile(const CpuState *s, const Phase *ph, int t, const MatInput *in, int thread)
{
	const Weights *w = weights(s);
	const Config *c = &s->c;
	int l = ph->layer, dim = c->dim, hid = c->hidden_dim;
	Proj p[3];

	switch (ph->kind) {
	case PH_ATTN_NORM:
		rmsnorm(s->xb + (size_t)t * dim, s->x + (size_t)t * dim,
			tensor_f32(w->layers[l].rms_att), dim, config_norm_eps(c));
		break;
	case PH_QKV:
		qkv_projs(s, l, p);
		proj_tile(p, 3, t, tile_rows(s, dim + 2 * s->kv_dim), in, dim, s->n);
		break;
	case PH_ROPE:
		rope_tile(s, l, t);
		break;
	case PH_ATTENTION:
		attention_tile(s, l, t, thread);
		break;
	case PH_ATTN_OUT:
		matmul_add_tile(s, layer_matrix(s, MAT_WO, l), dim, in, s->xb2, t);
		break;
	case PH_FFN_NORM:
		rmsnorm(s->xb + (size_t)t * dim, s->x + (size_t)t * dim,
			tensor_f32(w->layers[l].rms_ffn), dim, config_norm_eps(c));
		break;
	case PH_FFN_UP:
		ffn_up_tile(s, l, t, in);
		break;
	case PH_FFN_DOWN:
		matmul_add_tile(s, layer_matrix(s, MAT_W2, l), hid, in, s->xb, t);
		break;
	case PH_FINAL_NORM:
		rmsnorm(s->xo + (size_t)t * dim, s->x + (size_t)s->out_tok[t] * dim,
			tensor_f32(w->rms_final_weight), dim, config_norm_eps(c));
		break;
	case PH_LOGITS:
		p[0] = (Proj){ s->logits, s->mats[(size_t)c->n_layers * MAT_PER_LAYER], c->vocab_size };
		proj_tile(p, 1, t, logit_tile_rows(s), in, dim, s->n_out);
		break;
	}
}

int phase_tiles(const CpuState *s, enum phase_kind kind)
{
	const Config *c = &s->c;
	Proj p[3];

	switch (kind) {
	case PH_ATTN_NORM:
	case PH_FFN_NORM:
		return s->n;
	case PH_QKV:
		qkv_projs(s, 0, p);
		return proj_tiles(p, 3, tile_rows(s, c->dim + 2 * s->kv_dim));
	case PH_ROPE:
		return s->n * ((c->n_heads + rope_tile_heads(s) - 1) / rope_tile_heads(s));
	case PH_ATTENTION:
		return s->n_qgroups * c->n_heads;
	case PH_ATTN_OUT:
	case PH_FFN_DOWN:
		return (c->dim + tile_rows(s, c->dim) - 1) / tile_rows(s, c->dim);
	case PH_FFN_UP:
		return (c->hidden_dim + tile_rows(s, c->hidden_dim) - 1) / tile_rows(s, c->hidden_dim);
	case PH_FINAL_NORM:
		return s->n_out;
	case PH_LOGITS:
		return s->n_out > 0 ? (c->vocab_size + logit_tile_rows(s) - 1) / logit_tile_rows(s) : 0;
	}
	return 0;
}

int phase_quant_forms(const CpuState *s, const Phase *ph)
{
	int l = ph->layer;

	switch (ph->kind) {
	case PH_QKV:
		return quant_form_of(layer_matrix(s, MAT_WQ, l).type) | quant_form_of(layer_matrix(s, MAT_WK, l).type) |
		       quant_form_of(layer_matrix(s, MAT_WV, l).type);
	case PH_ATTN_OUT: return quant_form_of(layer_matrix(s, MAT_WO, l).type);
	case PH_FFN_UP: return quant_form_of(layer_matrix(s, MAT_W1, l).type) | quant_form_of(layer_matrix(s, MAT_W3, l).type);
	case PH_FFN_DOWN: return quant_form_of(layer_matrix(s, MAT_W2, l).type);
	case PH_LOGITS: return quant_form_of(s->mats[(size_t)s->c.n_layers * MAT_PER_LAYER].type);
	default: return 0;
	}
}

const float *phase_input(const CpuState *s, enum phase_kind kind, int *rows, int *n)
{
	*rows = s->n;
	*n = s->c.dim;
	switch (kind) {
	case PH_QKV: case PH_ATTN_OUT: case PH_FFN_UP: return s->xb;
	case PH_FFN_DOWN: *n = s->c.hidden_dim; return s->hb;
	case PH_LOGITS: *rows = s->n_out; return s->xo;
	default: return NULL;
	}
}

void plan_phases(CpuState *s)
{
	int i = 0;

	for (int l = 0; l < s->c.n_layers; l++)
		for (int k = 0; k < PH_LAYER_COUNT; k++)
			s->phases[i++] = (Phase){ (enum phase_kind)k, l, 0 };
	s->phases[i++] = (Phase){ PH_FINAL_NORM, LAYER_NONE, 0 };
	s->phases[i++] = (Phase){ PH_LOGITS, LAYER_NONE, 0 };
}
