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

/* The first of kv head kvh's rows in a block of the cache. */
static inline const __global float *head_rows(const __global float *cache, int block, int kvh,
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
		x[t * dim + j] = panel_ptr(table, r / PANEL_ROWS, dim)[j * PANEL_ROWS + r % PANEL_ROWS];
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

/* rmsnorm(x) then the fused q/k/v projection (wqkv rows: q, k, v), RoPE on
 * q and k, and k/v stored straight into this layer's cache, each token's
 * at its pool row. */
__kernel void qkv_rope(const __global float *x, const __global float *g,
		       const __global float *wqkv, __global float *q,
		       __global float *kcache, __global float *vcache,
		       const __global float2 *rope, const __global int *meta,
		       int pos_off, int slot_off, int n, int dim,
		       int kv_dim, int head_size, int bs, __local float *xs)
{
	int rows = dim + 2 * kv_dim, p = get_global_id(0), r0 = p * PANEL_ROWS;
	float16 acc[2 * TOK_GROUP];
	float res[PANEL_ROWS];

	stage_tokens(x, 0, n, dim, g, xs);
	if (r0 >= rows)
		return;
	const __global float *w = panel_ptr(wqkv, p, dim);
	int kv_lane[PANEL_ROWS]; /* k/v rows: where in a cache block, but for the position */
	for (int r = 0; r < panel_lanes(r0, rows); r++) {
		int i = r0 + r - dim;
		if (i >= kv_dim)
			i -= kv_dim;
		kv_lane[r] = i < 0 ? 0 : (i / head_size) * bs * head_size + i % head_size;
	}
	for (int t0 = 0; t0 < n;) {
		int nt = panel_block(w, w, 0, xs, dim, n, t0, acc);
		for (int t = 0; t < nt; t++) {
			int pos = meta[pos_off + t0 + t];
			int slot = meta[slot_off + t0 + t];
			size_t base = (size_t)(slot / bs) * bs * kv_dim + (size_t)(slot % bs) * head_size;

			vstore16(acc[t], 0, res);
			/* rows come in RoPE pairs; segment bounds are even */
			for (int r = 0; r < panel_lanes(r0, rows); r += 2) {
				int row = r0 + r;
				float a = res[r], b = res[r + 1];
				if (row < dim) {
					float2 v = rope_pair(a, b, row, head_size, pos, rope);
					q[(t0 + t) * dim + row] = v.x;
					q[(t0 + t) * dim + row + 1] = v.y;
				} else if (row < dim + kv_dim) {
					int i = row - dim;
					float2 v = rope_pair(a, b, i, head_size, pos, rope);
					kcache[base + kv_lane[r]] = v.x;
					kcache[base + kv_lane[r + 1]] = v.y;
				} else {
					vcache[base + kv_lane[r]] = a;
					vcache[base + kv_lane[r + 1]] = b;
				}
			}
		}
		t0 += nt;
	}
}

/* Dot product of two head vectors: 16 lanes at a time, then 4, then 1. */
static inline float head_dot(const __global float *a, const __global float *b, int n)
{
	float16 acc16 = 0;
	float4 acc = 0;
	int i = 0;

	for (; i + 16 <= n; i += 16)
		acc16 = fma(vload16(0, a + i), vload16(0, b + i), acc16);
	for (; i + 4 <= n; i += 4)
		acc = fma(vload4(0, a + i), vload4(0, b + i), acc);
	float s = hsum16(acc16) + ((acc.x + acc.y) + (acc.z + acc.w));
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* o[i] = sum over positions j = 0..p, in order, of w[j] * value row j [i],
 * for every lane i of the head, block by block: 48 lanes a sweep (three
 * independent FMA chains) while they last, then 4, then 1. */
static void weigh_values(const __global float *vcache, const __global int *tab, int bs,
			 int kv_dim, int kvh, const __local float *w, int p, int hs,
			 __global float *o)
{
	int i = 0;

	for (; i + 48 <= hs; i += 48) {
		float16 a0 = 0, a1 = 0, a2 = 0;
		for (int j0 = 0; j0 <= p; j0 += bs) {
			const __global float *v = head_rows(vcache, tab[j0 / bs], kvh, bs, kv_dim, hs) + i;
			for (int j = j0; j <= p && j < j0 + bs; j++, v += hs) {
				float16 wj = (float16)w[j];
				a0 = fma(wj, vload16(0, v), a0);
				a1 = fma(wj, vload16(1, v), a1);
				a2 = fma(wj, vload16(2, v), a2);
			}
		}
		vstore16(a0, 0, o + i);
		vstore16(a1, 1, o + i);
		vstore16(a2, 2, o + i);
	}
	for (; i + 4 <= hs; i += 4) {
		float4 acc = 0;
		for (int j0 = 0; j0 <= p; j0 += bs) {
			const __global float *v = head_rows(vcache, tab[j0 / bs], kvh, bs, kv_dim, hs) + i;
			for (int j = j0; j <= p && j < j0 + bs; j++, v += hs)
				acc = fma((float4)w[j], vload4(0, v), acc);
		}
		vstore4(acc, 0, o + i);
	}
	for (; i < hs; i++) {
		float acc = 0;
		for (int j0 = 0; j0 <= p; j0 += bs) {
			const __global float *v = head_rows(vcache, tab[j0 / bs], kvh, bs, kv_dim, hs) + i;
			for (int j = j0; j <= p && j < j0 + bs; j++, v += hs)
				acc += w[j] * *v;
		}
		o[i] = acc;
	}
}

/* One work-item per (head, token): scores against its sequence's positions
 * 0..p (causal inside the batch), softmax, weighted sum of values. att is
 * local scratch of seq_len floats (local size 1, so it is private to the
 * item). */
__kernel void attention(const __global float *q, const __global float *kcache,
			const __global float *vcache, __global float *out,
			const __global int *meta, int pos_off, int tab_off, int btab_off,
			int bs, int dim, int kv_dim, int head_size, int kv_mul,
			__local float *att)
{
	int h = get_global_id(0), t = get_global_id(1);
	int p = meta[pos_off + t];
	const __global int *tab = meta + btab_off + meta[tab_off + t];
	const __global float *qh = q + t * dim + h * head_size;
	int kvh = h / kv_mul;
	float inv_scale = 1.0f / sqrt((float)head_size);
	float maxv = -INFINITY, sum = 0.0f;

	for (int j0 = 0; j0 <= p; j0 += bs) {
		const __global float *k = head_rows(kcache, tab[j0 / bs], kvh, bs, kv_dim, head_size);
		for (int j = j0; j <= p && j < j0 + bs; j++, k += head_size) {
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

/* x[t] += w @ in[t]: the attention output projection and the ffn down
 * projection, each with its residual add. w is (rows, k) packed; x is
 * (n, rows). One panel a work-item: two would leave 9 items for a 288-row
 * matrix, split 5:4 between PoCL's two threads. */
__kernel void matmul_add(const __global float *in, const __global float *w,
			 __global float *x, int n, int k, int rows,
			 __local float *xs)
{
	int p = get_global_id(0), r0 = p * PANEL_ROWS;
	float16 acc[2 * TOK_GROUP];
	float res[PANEL_ROWS];

	stage_tokens(in, 0, n, k, 0, xs);
	if (r0 >= rows)
		return;
	for (int t0 = 0; t0 < n;) {
		int nt = panel_block(panel_ptr(w, p, k), 0, 0, xs, k, n, t0, acc);
		for (int t = 0; t < nt; t++) {
			vstore16(acc[t], 0, res);
			for (int r = 0; r < panel_lanes(r0, rows); r++)
				x[(t0 + t) * rows + r0 + r] += res[r];
		}
		t0 += nt;
	}
}

/* rmsnorm(x) then hb = silu(w1 x) * (w3 x). w13 holds w1 packed, then w3
 * packed; a work-item does a panel of each. */
__kernel void ffn_up(const __global float *x, const __global float *g,
		     const __global float *w13, __global float *hb,
		     int n, int dim, int hidden, __local float *xs)
{
	int p = get_global_id(0), h0 = p * PANEL_ROWS;
	int panels = (hidden + PANEL_ROWS - 1) / PANEL_ROWS;
	float16 acc[2 * TOK_GROUP];
	float res[PANEL_ROWS];

	stage_tokens(x, 0, n, dim, g, xs);
	if (h0 >= hidden)
		return;
	const __global float *w1 = panel_ptr(w13, p, dim), *w3 = panel_ptr(w13, panels + p, dim);
	for (int t0 = 0; t0 < n;) {
		int nt = panel_block(w1, w3, 1, xs, dim, n, t0, acc);
		for (int t = 0; t < nt; t++) {
			float16 a = acc[t], b = acc[TOK_GROUP + t];

			vstore16(a * (1.0f / (1.0f + exp(-a))) * b, 0, res);
			for (int r = 0; r < panel_lanes(h0, hidden); r++)
				hb[(t0 + t) * hidden + h0 + r] = res[r];
		}
		t0 += nt;
	}
}

/* Stores lanes of acc (tokens t0.., nt of them, rows from r0) into out, a
 * (tokens, rows) matrix. */
static inline void store_rows(const float16 *acc, int nt, int t0, int r0, int rows,
			      __global float *out)
{
	float res[PANEL_ROWS];

	for (int t = 0; t < nt; t++) {
		vstore16(acc[t], 0, res);
		for (int r = 0; r < panel_lanes(r0, rows); r++)
			out[(size_t)(t0 + t) * rows + r0 + r] = res[r];
	}
}

/* Final rmsnorm of the n_out tokens listed at meta[out_off..], then
 * logits row t = wcls @ x[token t]: wcls is packed, out is (n_out, vocab).
 * A work-item takes two panels, so a lone token still has two FMA chains
 * in flight. */
__kernel void logits(const __global float *x, const __global float *g,
		     const __global float *wcls, __global float *out,
		     const __global int *meta, int out_off, int n_out, int dim, int vocab,
		     __local float *xs)
{
	int p = 2 * get_global_id(0), r0 = p * PANEL_ROWS, two = r0 + PANEL_ROWS < vocab;
	float16 acc[2 * TOK_GROUP];

	stage_tokens(x, meta + out_off, n_out, dim, g, xs);
	if (r0 >= vocab)
		return;
	for (int t0 = 0; t0 < n_out;) {
		int nt = panel_block(panel_ptr(wcls, p, dim), panel_ptr(wcls, p + 1, dim), two, xs,
				     dim, n_out, t0, acc);
		store_rows(acc, nt, t0, r0, vocab, out);
		if (two)
			store_rows(acc + TOK_GROUP, nt, t0, r0 + PANEL_ROWS, vocab, out);
		t0 += nt;
	}
}
