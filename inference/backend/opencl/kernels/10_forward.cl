/* 10_forward.cl - the forward pass of a llama2.c transformer, one kernel per
 * fused phase (math as in llama2.c's run.c). Every matrix kernel takes a
 * batch of n tokens, from one sequence or several (the serving engine's
 * step): weights are read once per 8 tokens instead of once per token.
 * Matrices are packed in 16-row panels (00_common.cl); global size
 * dimension 0 is in panels, rounded up to the local size.
 *
 * Per-token metadata comes in one int buffer `meta` at offsets given as
 * arguments: position (pos_off), the pool row its k/v go to (slot_off), and
 * where its sequence's block table starts (tab_off, into meta + btab_off).
 * The KV cache is paged: position j of a sequence lives in pool row
 * table[j / bs] * bs + j % bs, and a block holds each kv head's bs rows
 * contiguous (head-major, as on the CPU backend), so attention streams a
 * head's positions. */

/* The KV cache's element: float, or half where the host asks (-DKV_HALF,
 * as llama.cpp keeps its cache): attention then reads half the bytes, and
 * at 8 served streams it was a fifth of the step, waiting on memory. */
#ifdef KV_HALF
typedef half kv_t;
#define kv_load16(i, p) vload_half16(i, p)
#define kv_load4(i, p) vload_half4(i, p)
#define kv_load(i, p) vload_half(i, p)
#define kv_store(v, i, p) vstore_half_rte(v, i, p)
#else
typedef float kv_t;
#define kv_load16(i, p) vload16(i, p)
#define kv_load4(i, p) vload4(i, p)
#define kv_load(i, p) ((p)[i])
#define kv_store(v, i, p) ((p)[i] = (v))
#endif
/* Elements of the cache a 64-byte line holds. */
#define KV_LINE (64 / (int)sizeof(kv_t))

/* The first of kv head kvh's rows in a block of the cache. */
static inline const __global kv_t *head_rows(const __global kv_t *cache, int block, int kvh,
					     int bs, int kv_dim, int hs)
{
	return cache + ((size_t)block * (kv_dim / hs) + kvh) * bs * hs;
}

/* x[t] = embedding row tokens[t] of the packed table (it is the classifier
 * when shared); ids are checked on the host. */
__kernel void embed(const __global int *tokens, const __global float *table,
		    __global float *x, int dim)
{
	int j = get_global_id(0), t = get_global_id(1), r = tokens[t];

	if (j < dim)
		x[t * dim + j] = panel_elem(panel_ptr(table, r / PANEL_ROWS, dim), dim, r % PANEL_ROWS, j);
}

/* Rotates the pair (a, b) at width index i of a head for position p. rope
 * holds (cos, sin) per position and pair, computed on the host with the
 * libm calls of the reference: (seq_len, head_size / 2) float2s. */
static inline float2 rope_pair(float a, float b, int i, int head_size, int p,
			       const __global float2 *rope)
{
	float2 cs = rope[p * (head_size / 2) + (i % head_size) / 2];

	return (float2)(a * cs.x - b * cs.y, a * cs.y + b * cs.x);
}

/* Where each k/v row of the panel from row r0 goes in a cache block, but
 * for the position (0 for q rows). */
static void qkv_lanes(int r0, int rows, int dim, int kv_dim, int head_size, int bs, int *kv_lane)
{
	for (int r = 0; r < panel_lanes(r0, rows); r++) {
		int i = r0 + r - dim;
		if (i >= kv_dim)
			i -= kv_dim;
		kv_lane[r] = i < 0 ? 0 : (i / head_size) * bs * head_size + i % head_size;
	}
}

/* Where token t's k/v rows go in a layer's cache block, but for the lane
 * (qkv_lanes). */
static inline size_t kv_row_base(const __global int *meta, int slot_off, int t, int kv_dim,
				 int head_size, int bs)
{
	int slot = meta[slot_off + t];

	return (size_t)(slot / bs) * bs * kv_dim + (size_t)(slot % bs) * head_size;
}

/* Asks to write the cache lines the k or v panel from row r0 stores each
 * token's rows to, before its product: they are cold, and stored to after
 * it, each was a miss the stores queued behind. */
static void prefetch_kv_lines(int r0, const int *kv_lane, __global kv_t *kcache,
			      __global kv_t *vcache, const __global int *meta, int slot_off, int n,
			      int dim, int kv_dim, int head_size, int bs)
{
	__global kv_t *cache = r0 < dim + kv_dim ? kcache : vcache;

	if (r0 < dim)
		return;
	for (int t = 0; t < n; t++)
		PREFETCH_WRITE(cache + kv_row_base(meta, slot_off, t, kv_dim, head_size, bs) + kv_lane[0]);
}

/* Token t's sums v of the panel from row r0: RoPE on q and k, q stored,
 * k and v straight into this layer's cache at the token's pool row. */
static void qkv_store(float16 v, int r0, const int *kv_lane, int t, __global float *q,
		      __global kv_t *kcache, __global kv_t *vcache, const __global float2 *rope,
		      const __global int *meta, int pos_off, int slot_off, int dim, int kv_dim,
		      int head_size, int bs)
{
	int rows = dim + 2 * kv_dim, pos = meta[pos_off + t];
	size_t base = kv_row_base(meta, slot_off, t, kv_dim, head_size, bs);
	float res[PANEL_ROWS];

	vstore16(v, 0, res);
	/* rows come in RoPE pairs; segment bounds are even */
	for (int r = 0; r < panel_lanes(r0, rows); r += 2) {
		int row = r0 + r;
		float a = res[r], b = res[r + 1];
		if (row < dim) {
			float2 w = rope_pair(a, b, row, head_size, pos, rope);
			q[t * dim + row] = w.x;
			q[t * dim + row + 1] = w.y;
		} else if (row < dim + kv_dim) {
			float2 w = rope_pair(a, b, row - dim, head_size, pos, rope);
			kv_store(w.x, base + kv_lane[r], kcache);
			kv_store(w.y, base + kv_lane[r + 1], kcache);
		} else {
			kv_store(a, base + kv_lane[r], vcache);
			kv_store(b, base + kv_lane[r + 1], vcache);
		}
	}
}

/* Panel p, and p + 1 when two, of the fused q/k/v projection (wqkv rows:
 * q, k, v) against the n staged tokens xs, each stored by qkv_store. */
static void qkv_panels(int p, int two, const __local float *xs, const __global float *wqkv,
		       __global float *q, __global kv_t *kcache, __global kv_t *vcache,
		       const __global float2 *rope, const __global int *meta, int pos_off,
		       int slot_off, int n, int dim, int kv_dim, int head_size, int bs)
{
	int rows = dim + 2 * kv_dim;
	float16 acc[2 * TOK_GROUP];
	int kv_lane[2][PANEL_ROWS];
	const __global float *wa = panel_ptr(wqkv, p, dim), *wb = two ? panel_ptr(wqkv, p + 1, dim) : wa;

	for (int g = 0; g <= two; g++) {
		qkv_lanes((p + g) * PANEL_ROWS, rows, dim, kv_dim, head_size, bs, kv_lane[g]);
		prefetch_kv_lines((p + g) * PANEL_ROWS, kv_lane[g], kcache, vcache, meta, slot_off, n,
				  dim, kv_dim, head_size, bs);
	}
	for (int t0 = 0; t0 < n;) {
		int nt = panel_block(wa, wb, two, xs, dim, n, t0, acc);
		for (int t = 0; t < nt; t++)
			for (int g = 0; g <= two; g++)
				qkv_store(acc[g * TOK_GROUP + t], (p + g) * PANEL_ROWS, kv_lane[g], t0 + t,
					  q, kcache, vcache, rope, meta, pos_off, slot_off, dim, kv_dim,
					  head_size, bs);
		t0 += nt;
	}
}

/* rmsnorm(x) then qkv_panels, a panel a work-item. */
__kernel void qkv_rope(const __global float *x, const __global float *g,
		       const __global float *wqkv, __global float *q,
		       __global kv_t *kcache, __global kv_t *vcache,
		       const __global float2 *rope, const __global int *meta,
		       int pos_off, int slot_off, int n, int dim,
		       int kv_dim, int head_size, int bs, __local float *xs)
{
	int p = get_global_id(0);

	stage_tokens(x, 0, n, dim, g, xs);
	if (p * PANEL_ROWS < dim + 2 * kv_dim)
		qkv_panels(p, 0, xs, wqkv, q, kcache, vcache, rope, meta, pos_off, slot_off, n, dim,
			   kv_dim, head_size, bs);
}

/* Dot product of a query head and a key row: 16 lanes at a time, then 4,
 * then 1. */
static inline float head_dot(const __global float *a, const __global kv_t *b, int n)
{
	float16 acc16 = 0;
	float4 acc = 0;
	int i = 0;

	for (; i + 16 <= n; i += 16)
		acc16 = fma(vload16(0, a + i), kv_load16(0, b + i), acc16);
	for (; i + 4 <= n; i += 4)
		acc = fma(vload4(0, a + i), kv_load4(0, b + i), acc);
	float s = hsum16(acc16) + ((acc.x + acc.y) + (acc.z + acc.w));
	for (; i < n; i++)
		s += a[i] * kv_load(i, b);
	return s;
}

/* o[i] = sum over positions j = 0..p, in order, of w[j] * value row j [i],
 * for every lane i of the head, block by block: 48 lanes a sweep (three
 * independent FMA chains) while they last, then 4, then 1. */
static void weigh_values(const __global kv_t *vcache, const __global int *tab, int bs,
			 int kv_dim, int kvh, const __local float *w, int p, int hs,
			 __global float *o)
{
	int i = 0;

	for (; i + 48 <= hs; i += 48) {
		float16 a0 = 0, a1 = 0, a2 = 0;
		for (int j0 = 0; j0 <= p; j0 += bs) {
			const __global kv_t *v = head_rows(vcache, tab[j0 / bs], kvh, bs, kv_dim, hs) + i;
			for (int j = j0; j <= p && j < j0 + bs; j++, v += hs) {
				float16 wj = (float16)w[j];
				a0 = fma(wj, kv_load16(0, v), a0);
				a1 = fma(wj, kv_load16(1, v), a1);
				a2 = fma(wj, kv_load16(2, v), a2);
			}
		}
		vstore16(a0, 0, o + i);
		vstore16(a1, 1, o + i);
		vstore16(a2, 2, o + i);
	}
	for (; i + 4 <= hs; i += 4) {
		float4 acc = 0;
		for (int j0 = 0; j0 <= p; j0 += bs) {
			const __global kv_t *v = head_rows(vcache, tab[j0 / bs], kvh, bs, kv_dim, hs) + i;
			for (int j = j0; j <= p && j < j0 + bs; j++, v += hs)
				acc = fma((float4)w[j], kv_load4(0, v), acc);
		}
		vstore4(acc, 0, o + i);
	}
	for (; i < hs; i++) {
		float acc = 0;
		for (int j0 = 0; j0 <= p; j0 += bs) {
			const __global kv_t *v = head_rows(vcache, tab[j0 / bs], kvh, bs, kv_dim, hs) + i;
			for (int j = j0; j <= p && j < j0 + bs; j++, v += hs)
				acc += w[j] * kv_load(0, v);
		}
		o[i] = acc;
	}
}

/* Positions ahead whose key and value rows attend() prefetches. Serving
 * 8 streams of the stories110M shape as Q8_0, 4 and 8 both ran 1,300-1,400
 * tok/s against 1,180-1,310 without (3 interleaved rounds each). */
#define ATT_AHEAD 4

/* Asks for position j's key and value rows of kv head kvh: a head's rows
 * are a few KB in blocks of their own, from memory that the weights'
 * stream flushed, too short a stream for the hardware prefetcher. */
static inline void prefetch_rows(const __global kv_t *kcache, const __global kv_t *vcache,
				 const __global int *tab, int j, int bs, int kvh, int kv_dim, int hs)
{
	size_t off = (size_t)(head_rows(kcache, tab[j / bs], kvh, bs, kv_dim, hs) - kcache) +
		     (size_t)(j % bs) * hs;

	for (int c = 0; c < hs; c += KV_LINE) {
		PREFETCH(kcache + off + c);
		PREFETCH(vcache + off + c);
	}
}

/* Head h of token t: scores against its sequence's positions 0..p
 * (causal inside the batch), softmax, weighted sum of values. att is
 * scratch of seq_len floats private to the caller. */
static void attend(int h, int t, const __global float *q, const __global kv_t *kcache,
		   const __global kv_t *vcache, __global float *out, const __global int *meta,
		   int pos_off, int tab_off, int btab_off, int bs, int dim, int kv_dim,
		   int head_size, int kv_mul, __local float *att)
{
	int p = meta[pos_off + t];
	const __global int *tab = meta + btab_off + meta[tab_off + t];
	const __global float *qh = q + t * dim + h * head_size;
	int kvh = h / kv_mul;
	float inv_scale = 1.0f / sqrt((float)head_size);
	float maxv = -INFINITY, sum = 0.0f;

	for (int j = 0; j < ATT_AHEAD && j <= p; j++)
		prefetch_rows(kcache, vcache, tab, j, bs, kvh, kv_dim, head_size);
	for (int j0 = 0; j0 <= p; j0 += bs) {
		const __global kv_t *k = head_rows(kcache, tab[j0 / bs], kvh, bs, kv_dim, head_size);
		for (int j = j0; j <= p && j < j0 + bs; j++, k += head_size) {
			if (j + ATT_AHEAD <= p)
				prefetch_rows(kcache, vcache, tab, j + ATT_AHEAD, bs, kvh, kv_dim, head_size);
			float s = head_dot(qh, k, head_size) * inv_scale;
			att[j] = s;
			maxv = fmax(maxv, s);
		}
	}
	for (int j = 0; j <= p; j++) {
		att[j] = exp(att[j] - maxv);
		sum += att[j];
	}
	float inv_sum = 1.0f / sum;
	for (int j = 0; j <= p; j++)
		att[j] *= inv_sum;
	weigh_values(vcache, tab, bs, kv_dim, kvh, att, p, head_size,
		     out + t * dim + h * head_size);
}

/* One work-item per (head, token), local size 1 so att is the item's. */
__kernel void attention(const __global float *q, const __global kv_t *kcache,
			const __global kv_t *vcache, __global float *out,
			const __global int *meta, int pos_off, int tab_off, int btab_off,
			int bs, int dim, int kv_dim, int head_size, int kv_mul,
			__local float *att)
{
	attend(get_global_id(0), get_global_id(1), q, kcache, vcache, out, meta, pos_off,
	       tab_off, btab_off, bs, dim, kv_dim, head_size, kv_mul, att);
}

/* Panel p, and p + 1 when two, of x[t] += w @ in[t] for the n staged
 * tokens xs: the attention output projection and the ffn down projection,
 * each with its residual add. w is (rows, k) packed; x is (n, rows). */
static void matmul_add_panels(int p, int two, const __local float *xs, const __global float *w,
			      __global float *x, int n, int k, int rows)
{
	int r0 = p * PANEL_ROWS;
	float16 acc[2 * TOK_GROUP];
	const __global float *wa = panel_ptr(w, p, k), *wb = two ? panel_ptr(w, p + 1, k) : wa;

	for (int t0 = 0; t0 < n;) {
		int nt = panel_block(wa, wb, two, xs, k, n, t0, acc);
		for (int t = 0; t < nt; t++)
			for (int g = 0; g <= two; g++)
				add_lanes(acc[g * TOK_GROUP + t], panel_lanes(r0 + g * PANEL_ROWS, rows),
					  x + (t0 + t) * rows + r0 + g * PANEL_ROWS);
		t0 += nt;
	}
}

/* One panel a work-item: two would leave 9 items for a 288-row matrix,
 * split 5:4 between PoCL's two threads. */
__kernel void matmul_add(const __global float *in, const __global float *w,
			 __global float *x, int n, int k, int rows,
			 __local float *xs)
{
	int p = get_global_id(0);

	stage_tokens(in, 0, n, k, 0, xs);
	if (p * PANEL_ROWS < rows)
		matmul_add_panels(p, 0, xs, w, x, n, k, rows);
}

/* Panel p of hb = silu(w1 x) * (w3 x) for the n staged (normed) tokens xs.
 * w13 holds w1 packed, then w3 packed. */
static void ffn_up_panel(int p, const __local float *xs, const __global float *w13,
			 __global float *hb, int n, int dim, int hidden)
{
	int h0 = p * PANEL_ROWS, panels = (hidden + PANEL_ROWS - 1) / PANEL_ROWS;
	float16 acc[2 * TOK_GROUP];
	const __global float *w1 = panel_ptr(w13, p, dim), *w3 = panel_ptr(w13, panels + p, dim);

	for (int t0 = 0; t0 < n;) {
		int nt = panel_block(w1, w3, 1, xs, dim, n, t0, acc);
		for (int t = 0; t < nt; t++) {
			float16 a = acc[t], b = acc[TOK_GROUP + t];

			put_lanes(a * (1.0f / (1.0f + exp(-a))) * b, panel_lanes(h0, hidden),
				  hb + (t0 + t) * hidden + h0);
		}
		t0 += nt;
	}
}

/* rmsnorm(x) then ffn_up_panel, a panel of w1 and of w3 a work-item. */
__kernel void ffn_up(const __global float *x, const __global float *g,
		     const __global float *w13, __global float *hb,
		     int n, int dim, int hidden, __local float *xs)
{
	int p = get_global_id(0);

	stage_tokens(x, 0, n, dim, g, xs);
	if (p * PANEL_ROWS < hidden)
		ffn_up_panel(p, xs, w13, hb, n, dim, hidden);
}

/* Stores lanes of acc (tokens t0.., nt of them, rows from r0) into out, a
 * (tokens, rows) matrix. */
static inline void store_rows(const float16 *acc, int nt, int t0, int r0, int rows,
			      __global float *out)
{
	for (int t = 0; t < nt; t++)
		put_lanes(acc[t], panel_lanes(r0, rows), out + (size_t)(t0 + t) * rows + r0);
}

/* Panels p and p + 1 (when it exists) of logits row t = wcls @ xs[t] for
 * the n_out staged (normed) tokens: wcls is packed, out is (n_out, vocab).
 * Two panels, so a lone token still has two FMA chains in flight. */
static void logits_panels(int p, const __local float *xs, const __global float *wcls,
			  __global float *out, int n_out, int dim, int vocab)
{
	int r0 = p * PANEL_ROWS, two = r0 + PANEL_ROWS < vocab;
	float16 acc[2 * TOK_GROUP];

	for (int t0 = 0; t0 < n_out;) {
		int nt = panel_block(panel_ptr(wcls, p, dim), panel_ptr(wcls, p + 1, dim), two, xs,
				     dim, n_out, t0, acc);
		store_rows(acc, nt, t0, r0, vocab, out);
		if (two)
			store_rows(acc + TOK_GROUP, nt, t0, r0 + PANEL_ROWS, vocab, out);
		t0 += nt;
	}
}

/* Final rmsnorm of the n_out tokens listed at meta[out_off..], then
 * logits_panels, two panels a work-item. */
__kernel void logits(const __global float *x, const __global float *g,
		     const __global float *wcls, __global float *out,
		     const __global int *meta, int out_off, int n_out, int dim, int vocab,
		     __local float *xs)
{
	int p = 2 * get_global_id(0);

	stage_tokens(x, meta + out_off, n_out, dim, g, xs);
	if (p * PANEL_ROWS < vocab)
		logits_panels(p, xs, wcls, out, n_out, dim, vocab);
}

/* ---- the whole forward pass in one launch, for CPU devices ----
 *
 * On a CPU device every launch wakes the runtime's worker threads and ends
 * with a wait for the slowest, ~15 us a kernel against phases of 10-40 us.
 * So there `forward` runs the whole pass in one launch: as many work-groups
 * of one item as the device has compute units, each claiming the phases'
 * tasks (panels, heads, tokens) from shared counters and waiting at each
 * phase's end until all of its tasks are done. A group waits only for tasks
 * that a running group has claimed, so it never waits on a group that has
 * not started: the kernel finishes even if the groups run one by one.
 *
 * Phases: embed, then 5 a layer (PH_QKV.. PH_FFN_DOWN), then logits. sync
 * holds a claim and a done counter per phase, each on its own cache line,
 * and an exit counter (cl_layout.h); the last group out zeroes them for the
 * next launch. */
/* A matrix phase is claimed in tasks of panels (claim_panels): each takes
 * a TASK_SHARE-th of the panels left per group, from TASK_PANELS_MAX (twice
 * that for more than one token) down to TASK_PANELS_MIN at the phase's
 * end, so the groups finish together. A claim is an atomic on a line both
 * cores write, and each task starts its prefetch over: fixed tasks of 2
 * panels made the stories110M-shape step 1.1-1.3x slower than tasks of 8,
 * and 8 served at once ran 4-7% faster with 16 than with 8. Shrinking from
 * 8 to 4 ran a lone token's Q8_0 step in 2.42 against 2.54 ms with fixed
 * tasks of 8 (medians of 10 interleaved rounds, faster in 8); down to 2,
 * 2.47. */
#define TASK_PANELS_MAX 8
#define TASK_PANELS_MIN 4
#define TASK_SHARE 2
/* a layer's LAYER_PHASES (cl_layout.h) */
enum { PH_QKV, PH_ATTENTION, PH_ATTN_OUT, PH_FFN_UP, PH_FFN_DOWN };

static int claim_task(volatile __global int *sync, int ph)
{
	return atomic_inc(&sync[2 * ph * SYNC_STRIDE]);
}

static void task_done(volatile __global int *sync, int ph, int count)
{
	atomic_add(&sync[(2 * ph + 1) * SYNC_STRIDE], count);
}

/* Claims the next panels of a product phase: a share of what is left, even
 * (pairs of panels share a pass), from max down to TASK_PANELS_MIN, so
 * tasks shrink toward the phase's end and the groups finish together.
 * Returns the first panel; *end is one past the last (first == *end when
 * none are left). */
static int claim_panels(volatile __global int *sync, int ph, int panels, int share, int max,
			int *end)
{
	volatile __global int *next = &sync[2 * ph * SYNC_STRIDE];
	int p0 = *next;

	while (p0 < panels) {
		int size = clamp(((panels - p0) / share) & ~1, TASK_PANELS_MIN, max);
		int seen = atomic_cmpxchg(next, p0, p0 + size);

		if (seen == p0) {
			*end = min(p0 + size, panels);
			return p0;
		}
		p0 = seen;
	}
	*end = panels;
	return panels;
}

/* Spins until phase ph's tasks are all done; the atomic at the end orders
 * this group's later reads after the other groups' writes. */
static void phase_wait(volatile __global int *sync, int ph, int tasks)
{
	volatile __global int *done = &sync[(2 * ph + 1) * SYNC_STRIDE];

	while (*done < tasks)
		;
	atomic_add(done, 0);
}

static void sync_exit(volatile __global int *sync, int phases)
{
	if (atomic_inc(&sync[2 * phases * SYNC_STRIDE]) == (int)get_num_groups(0) - 1)
		for (int i = 0; i <= 2 * phases; i++)
			sync[i * SYNC_STRIDE] = 0;
}

/* What every phase of the forward kernel needs. */
typedef struct {
	const __global float *w;     /* all weights; woff says where each is */
	const __global ulong *woff;
	__global kv_t *kcache, *vcache; /* layer l at l * kv_stride */
	const __global float2 *rope;
	const __global int *meta;
	__global float *x, *q, *att_out, *hb, *logits;
	volatile __global int *sync;
	__local float *xs, *att;
	int n, n_out, dim, hidden, n_heads, kv_heads, vocab, bs;
	ulong kv_stride;
	int pos_off, slot_off, tab_off, btab_off, out_off;
	int groups; /* get_num_groups(0), read once: read where a task is cut,
		     * it made the step 1.5x slower under PoCL */
} Fwd;

static const __global float *layer_weight(const Fwd *f, int l, int which)
{
	return f->w + f->woff[W_GLOBAL + l * W_PER_LAYER + which];
}

static int ceil_div(int a, int b)
{
	return (a + b - 1) / b;
}

/* Panels of phase kind k's matrix (PH_*, or -2 the classifier); 0 for
 * the phases that are not a product (-1 embed, attention). */
static int phase_panels(const Fwd *f, int k)
{
	int kv_dim = f->kv_heads * (f->dim / f->n_heads);

	switch (k) {
	case -2: return ceil_div(f->vocab, PANEL_ROWS);
	case PH_QKV: return ceil_div(f->dim + 2 * kv_dim, PANEL_ROWS);
	case PH_FFN_UP: return ceil_div(f->hidden, PANEL_ROWS);
	case PH_ATTN_OUT: case PH_FFN_DOWN: return ceil_div(f->dim, PANEL_ROWS);
	default: return 0;
	}
}

/* Tasks of the phases that are not products (-1 embed, attention). */
static int unit_tasks(const Fwd *f, int k)
{
	return k == PH_ATTENTION ? f->n_heads * f->n : f->n;
}

/* The staged input of phase kind k, before this group's first task. */
static void phase_stage(const Fwd *f, int l, int k)
{
	switch (k) {
	case -2: stage_alone(f->x, f->meta + f->out_off, f->n_out, f->dim,
			     f->w + f->woff[W_RMS_FINAL], f->xs); break;
	case PH_QKV: stage_alone(f->x, 0, f->n, f->dim, layer_weight(f, l, W_RMS_ATT), f->xs); break;
	case PH_ATTN_OUT: stage_alone(f->att_out, 0, f->n, f->dim, 0, f->xs); break;
	case PH_FFN_UP: stage_alone(f->x, 0, f->n, f->dim, layer_weight(f, l, W_RMS_FFN), f->xs); break;
	case PH_FFN_DOWN: stage_alone(f->hb, 0, f->n, f->hidden, 0, f->xs); break;
	}
}

/* x[t] = embedding row of token t; the ids lead meta (checked on the host). */
static void embed_row(const Fwd *f, int t)
{
	int r = f->meta[t];
	const __global float *panel = panel_ptr(f->w + f->woff[W_EMB], r / PANEL_ROWS, f->dim);

	for (int j = 0; j < f->dim; j++)
		f->x[t * f->dim + j] = panel_elem(panel, f->dim, r % PANEL_ROWS, j);
}

/* Task i of a phase that is not a product (kind -1 embed, or attention)
 * in layer l. */
static void unit_task(const Fwd *f, int l, int k, int i)
{
	int hs = f->dim / f->n_heads, kv_dim = f->kv_heads * hs;

	if (k == -1)
		embed_row(f, i);
	else
		attend(i % f->n_heads, i / f->n_heads, f->q, f->kcache + l * f->kv_stride,
		       f->vcache + l * f->kv_stride, f->att_out, f->meta, f->pos_off, f->tab_off,
		       f->btab_off, f->bs, f->dim, kv_dim, hs, f->n_heads / f->kv_heads, f->att);
}

/* Panels p0..p1 of product phase kind k (PH_*, or -2 the classifier) in
 * layer l. */
static void product_task(const Fwd *f, int l, int k, int p0, int p1)
{
	int hs = f->dim / f->n_heads, kv_dim = f->kv_heads * hs;
	__global kv_t *kc = f->kcache + l * f->kv_stride, *vc = f->vcache + l * f->kv_stride;

	switch (k) {
	case -2:
		for (int p = p0; p < p1; p += 2)
			logits_panels(p, f->xs, f->w + f->woff[W_CLS], f->logits, f->n_out, f->dim,
				      f->vocab);
		return;
	case PH_QKV: /* two panels at a time: two FMA chains in flight for one token */
		for (int p = p0; p < p1; p += 2)
			qkv_panels(p, p + 1 < p1, f->xs, layer_weight(f, l, W_QKV), f->q, kc, vc, f->rope,
				   f->meta, f->pos_off, f->slot_off, f->n, f->dim, kv_dim, hs, f->bs);
		return;
	case PH_FFN_UP:
		for (int p = p0; p < p1; p++)
			ffn_up_panel(p, f->xs, layer_weight(f, l, W_W13), f->hb, f->n, f->dim,
				     f->hidden);
		return;
	default: /* the two projections back to dim, with the residual add; two
		  * panels at a time, as q/k/v */
		for (int p = p0; p < p1; p += 2)
			if (k == PH_ATTN_OUT)
				matmul_add_panels(p, p + 1 < p1, f->xs, layer_weight(f, l, W_WO), f->x,
						  f->n, f->dim, f->dim);
			else
				matmul_add_panels(p, p + 1 < p1, f->xs, layer_weight(f, l, W_W2), f->x,
						  f->n, f->hidden, f->dim);
	}
}

/* Phase number ph (of kind k, in layer l): claim its tasks until none are
 * left, then wait for the ones other groups hold. Product phases count
 * panels, the others tasks. */
static void run_phase(const Fwd *f, int ph, int l, int k)
{
	int panels = phase_panels(f, k);

	if (panels == 0) {
		int tasks = unit_tasks(f, k);

		for (int i = claim_task(f->sync, ph); i < tasks; i = claim_task(f->sync, ph)) {
			unit_task(f, l, k, i);
			task_done(f->sync, ph, 1);
		}
		phase_wait(f->sync, ph, tasks);
		return;
	}
	int share = f->groups * TASK_SHARE, max = f->n > 1 ? 2 * TASK_PANELS_MAX : TASK_PANELS_MAX;
	int p1, p0 = claim_panels(f->sync, ph, panels, share, max, &p1);

	if (p0 < p1)
		phase_stage(f, l, k);
	for (; p0 < p1; p0 = claim_panels(f->sync, ph, panels, share, max, &p1)) {
		product_task(f, l, k, p0, p1);
		task_done(f->sync, ph, p1 - p0);
	}
	phase_wait(f->sync, ph, panels);
}

__kernel void forward(const __global float *w, const __global ulong *woff,
		      __global kv_t *kcache, __global kv_t *vcache, ulong kv_stride,
		      const __global float2 *rope, const __global int *meta,
		      __global float *x, __global float *q, __global float *att_out,
		      __global float *hb, __global float *logits, volatile __global int *sync,
		      int n, int n_out, int n_layers, int dim, int hidden, int n_heads,
		      int kv_heads, int vocab, int bs, int pos_off, int slot_off, int tab_off,
		      int btab_off, int out_off, int embed, __local float *xs, __local float *att)
{
	Fwd f = { w, woff, kcache, vcache, rope, meta, x, q, att_out, hb, logits, sync, xs, att,
		  n, n_out, dim, hidden, n_heads, kv_heads, vocab, bs, kv_stride,
		  pos_off, slot_off, tab_off, btab_off, out_off, (int)get_num_groups(0) };
	int ph = 0;

	/* embed 0: x holds the tokens' embeddings already, and n_out is 0, so
	 * only the layers run (the host's layers launch: a model whose
	 * embedding and classifier have another type than its layers) */
	if (embed)
		run_phase(&f, ph, -1, -1);
	ph++;
	for (int l = 0; l < n_layers; l++)
		for (int k = 0; k < LAYER_PHASES; k++)
			run_phase(&f, ph++, l, k);
	if (n_out > 0)
		run_phase(&f, ph, -1, -2);
	sync_exit(sync, ph + 1);
}
