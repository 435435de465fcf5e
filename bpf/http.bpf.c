// SPDX-License-Identifier: GPL-2.0
/* http.bpf.c - --http: HTTP/1.x requests from traced servers' sockets
 * (http.bpf.h says what is tracked). Socket tracepoints only, which fire
 * for socket I/O and nothing else: sock_recv_length and sock_send_length
 * after each receive and send on a socket (the bytes are then in the
 * caller's buffer, found from its system call's registers; sendfile's
 * and splice's by their count), sk_data_ready (tcp_probe before Linux
 * 6.6) for when a request's bytes reached the socket, inet_sock_set_state for the close, and
 * sched_process_fork for a traced process's children. */
#include "core.bpf.h"
#include <bpf/bpf_core_read.h>
#include "requests.bpf.h"
#include "engines.bpf.h"
#include "http.bpf.h"

#define WIN_MASK (HTTP_WIN - 1)
/* x & mask that the compiler cannot fold away when it already knows x is
 * in range: the verifier needs to see the bound on the register itself. */
/* A kernel pointer read with plain loads (Linux 6.3; no helper call). */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

#define BOUNDED(x, mask) ({ __u64 v__ = (x); asm volatile("" : "+r"(v__)); v__ & (mask); })

/* x86-64 system call numbers; elsewhere --http is refused before load */
enum {
	NR_read = 0, NR_write = 1, NR_readv = 19, NR_writev = 20, NR_sendfile = 40,
	NR_sendto = 44, NR_recvfrom = 45, NR_sendmsg = 46, NR_recvmsg = 47,
};

/* One window of a piece. The buffer is twice the window so that a masked
 * offset plus a short read stays inside. */
struct scratch {
	char buf[2 * HTTP_WIN];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} http_scratch SEC(".maps");

/* A zeroed connection to insert from (too large for the stack). Never written. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct http_conn);
} http_zero SEC(".maps");

static __always_inline struct scratch *scratch(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&http_scratch, &zero);
}

/* The calling process's sockets are traced. */
static __always_inline int http_watched(void)
{
	return bit_test(http_pid_bits, PID_MASK, bpf_get_current_pid_tgid() >> 32);
}

/* The tree the calling process is traced in (its root), else 0. */
static __always_inline __u32 http_root(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct http_watch *w = bpf_map_lookup_elem(&http_pids, &tgid);

	return w ? w->root : 0;
}

static __always_inline __u32 current_tgid(void)
{
	return bpf_get_current_pid_tgid() >> 32;
}

/* ---- bytes of a window ---- */

static __always_inline char at(const char *buf, __u32 i)
{
	return buf[i & WIN_MASK];
}

static __always_inline char lower(char ch)
{
	return ch >= 'A' && ch <= 'Z' ? ch + ('a' - 'A') : ch;
}

/* The window's 8 bytes at i, as one little-endian word (the buffer is
 * twice the window, so the masked offset plus 8 stays inside). */
static __always_inline __u64 word_at(const char *buf, __u32 i)
{
	return *(const __u64 *)(buf + (i & WIN_MASK));
}

/* Bytes k.. of a literal of len bytes as a word, and the mask of those
 * that are in it: both constants once inlined. */
static __always_inline __u64 literal_word(const char *word, int k, int len)
{
	__u64 v = 0;

	for (int j = 0; j < 8; j++)
		if (k + j < len)
			v |= (__u64)(__u8)word[k + j] << (j * 8);
	return v;
}

static __always_inline __u64 literal_mask(int k, int len)
{
	return len - k >= 8 ? ~0ull : (1ull << ((len - k) * 8)) - 1;
}

/* buf at i starts with word (len bytes), exactly or (fold) whatever the
 * case of its letters, 8 bytes a compare. Folding sets bit 5 of each byte,
 * which letters differ by; the words compared with it are lower case,
 * and their other bytes ('-', ':', '/', ' ', digits) have it set. */
static __always_inline int word_match(const char *buf, __u32 i, const char *word, int len, int fold)
{
	__u64 m, w;

	for (int k = 0; k < len; k += 8) {
		m = literal_mask(k, len);
		w = word_at(buf, i + k) | (fold ? 0x2020202020202020ull : 0);
		if ((w & m) != literal_word(word, k, len))
			return 0;
	}
	return 1;
}

/* buf at i starts with the lower-case word (case-insensitively). */
static __always_inline int starts_with(const char *buf, __u32 i, const char *word, int len)
{
	return word_match(buf, i, word, len, 1);
}

/* The offset of a header value: past the name and any spaces. */
static __always_inline __u32 value_at(const char *buf, __u32 i)
{
	for (int k = 0; k < 8 && at(buf, i) == ' '; k++)
		i++;
	return i;
}

static __always_inline __s64 value_number(const char *buf, __u32 i)
{
	__s64 v = 0;
	int digits = 0;

	for (int k = 0; k < 19; k++) {
		char ch = at(buf, i + k);

		if (ch < '0' || ch > '9')
			break;
		v = v * 10 + (ch - '0');
		digits++;
	}
	return digits ? v : -1;
}

/* The bytes of w equal to pat's (a byte repeated), as their top bits
 * (0x80 in each such byte), exactly: no carry crosses bytes, unlike the
 * has-zero trick. */
static __always_inline __u64 byte_eq_bits(__u64 w, __u64 pat)
{
	__u64 x = w ^ pat;
	__u64 low7 = 0x7f7f7f7f7f7f7f7full;

	return ~(((x & low7) + low7) | x | low7);
}

static __always_inline __u64 newline_bits(__u64 w)
{
	return byte_eq_bits(w, 0x0a0a0a0a0a0a0a0aull);
}

/* Line ends are found a block of 64 bytes at a time: the block's 8 words
 * become one mask, a bit for each '\n', with no branch; then one step a
 * line end, one bpf_loop callback a block. Which line ends call a parser
 * is each scan's own (header_block, sse_block). */
#define BLOCK 64

/* Bit k: byte k of the word has its top bit set (a byte_eq_bits mask's
 * top bits, gathered). */
static __always_inline __u64 gather_bits(__u64 top)
{
	return ((top >> 7) * 0x0102040810204080ull) >> 56;
}

/* The line ends of the window's block at base, bytes [from, to) only: bit
 * k is the byte at base + k. */
static __always_inline __u64 block_lines(const char *buf, __u32 base, __u32 from, __u32 to)
{
	const __u64 *w = (const __u64 *)(buf + (base & (WIN_MASK & ~7u)));
	__u64 m = 0;

#pragma unroll
	for (int q = 0; q < BLOCK / 8; q++)
		m |= gather_bits(newline_bits(w[q])) << (q * 8);
	if (from > base)
		m &= from - base >= 64 ? 0 : ~((1ull << (from - base)) - 1);
	if (to < base + 64)
		m &= to <= base ? 0 : (1ull << (to - base)) - 1;
	return m;
}

/* The offset of m's lowest set bit (m != 0): the bits below it, counted. */
static __always_inline __u32 lowest_bit(__u64 m)
{
	__u64 x = (m & -m) - 1;

	x = x - ((x >> 1) & 0x5555555555555555ull);
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (__u32)((x * 0x0101010101010101ull) >> 56);
}

/* Block j of bytes [from, to): its offset, or HTTP_WIN past the end. */
static __always_inline __u32 block_at(__u32 from, __u32 to, __u64 j)
{
	__u32 base = (from & ~7u) + (__u32)j * BLOCK;

	return base >= to || base >= HTTP_WIN ? HTTP_WIN : base;
}

/* bpf_loop's count for bytes [from, to) of a window. */
static __always_inline __u32 blocks_of(__u32 from, __u32 to)
{
	return to <= from ? 0 : (to - (from & ~7u) + BLOCK - 1) / BLOCK;
}

/* ---- header blocks: a request's or a response's ---- */

/* A header block's scan through one window (the scratch buffer's). No
 * pointers: the functions that take it are global, checked once. */
struct hdr_scan {
	__u32 from, to;     /* the window's bytes of this piece */
	__u32 line_len;     /* bytes of the current line before this window */
	__u32 first;        /* the current line is the request or status line */
	__u32 response;     /* a response's headers (else a request's) */
	__u32 end;          /* out: just past the blank line; 0: not in this window */
	__u32 prev;         /* the previous line end seen, + 1 */
	__u32 last_start;   /* out: the start of the last line begun */
	__u32 flags;        /* out: HTTP_F_CHUNKED, HTTP_F_LENGTH, HTTP_F_SSE */
	__u32 pad;
	__s64 length;       /* out: Content-Length */
};

/* The header line at i (whole in the window), for how its body ends. */
static __always_inline int header_name(struct hdr_scan *h, __u32 i)
{
	struct scratch *sc = scratch();
	const char *buf;

	if (!h || !sc || h->to < i + 16)
		return 0;
	buf = sc->buf;
	if (h->response && starts_with(buf, i, "content-type:", 13)) {
		if (starts_with(buf, value_at(buf, i + 13), "text/event-stream", 17))
			h->flags |= HTTP_F_SSE;
	} else if (starts_with(buf, i, "transfer-encoding:", 18)) {
		if (starts_with(buf, value_at(buf, i + 18), "chunked", 7))
			h->flags |= HTTP_F_CHUNKED;
	} else if (starts_with(buf, i, "content-length:", 15)) {
		__s64 v = value_number(buf, value_at(buf, i + 15));

		if (v >= 0) {
			h->flags |= HTTP_F_LENGTH;
			h->length = v;
		}
	}
	return 0;
}

/* The line end at p of the window: a blank line ends the headers; else
 * the next line begins, and a line that may name how the body ends
 * (Content-*, Transfer-Encoding) is looked at. 1: stop. */
__noinline int header_line_at(struct hdr_scan *h, __u32 p)
{
	struct scratch *sc = scratch();
	__u32 start, len;
	char f;

	if (!h || !sc)
		return 1;
	start = h->prev ? h->prev : h->from;
	len = p - start + (h->prev ? 0 : h->line_len);
	if (len && p > h->from && at(sc->buf, p - 1) == '\r')
		len--;
	else if (len == 1 && p == h->from)   /* the CR came in the last piece */
		len = 0;
	h->prev = p + 1;
	if (len == 0 && !h->first) {
		h->end = p + 1;
		return 1;
	}
	h->first = 0;
	h->last_start = p + 1;
	f = lower(at(sc->buf, p + 1));
	if (f == 'c' || f == 't')
		header_name(h, p + 1);
	return 0;
}

/* Block j of the header block's bytes: each line end, in order. Only
 * the line ends that may matter call header_line_at: the window's first
 * (the line may have begun before it), one that may end a blank line (a
 * line end 1 or 2 bytes before), one at the piece's last byte (what
 * follows is not read yet), and one followed by a c or t, the first
 * letter of every header that says how a body ends (Content-*,
 * Transfer-*), looked at a byte a line: cheaper than a mask of the
 * block's every c and t. Any other is a header line that says nothing of
 * the body: its bookkeeping is done here, as header_line_at would. */
static long header_block(__u64 j, void *ctx)
{
	struct hdr_scan *h = ctx;
	struct scratch *sc = scratch();
	__u32 base, p;
	__u64 m, hot;

	if (!sc || (base = block_at(h->from, h->to, j)) >= HTTP_WIN)
		return 1;
	m = block_lines(sc->buf, base, h->from, h->to);
	hot = m & ((m << 1) | (m << 2) | 3);
	if (!h->prev)
		hot |= m & -m;
	for (int k = 0; k < BLOCK && m; k++, m &= m - 1) {
		char f;

		p = base + lowest_bit(m);
		f = at(sc->buf, p + 1) | 0x20;   /* ASCII letters folded */
		if ((m & -m & hot) || p + 1 >= h->to || f == 'c' || f == 't') {
			if (header_line_at(h, p))
				return 1;
		} else {
			h->prev = h->last_start = p + 1;
			h->first = 0;
		}
	}
	return 0;
}

/* Scans the window's bytes [from, to) of a header block; h->end says
 * where the block ended, if it did. */
static __always_inline void scan_headers(struct hdr_scan *h, struct scratch *sc)
{
	h->last_start = h->from;
	if (!h->line_len && !h->first)   /* a header line starts the window */
		header_name(h, h->from);
	bpf_loop(blocks_of(h->from, h->to), header_block, h, 0);
	if (!h->end)   /* the last line goes on in the next window */
		h->line_len = h->prev ? h->to - h->prev : h->line_len + (h->to - h->from);
}

/* A header block's next len bytes at ubuf, read into the window (unless
 * in_buf: they are there) and scanned (h says how far its line and block
 * are); -1 if unreadable. */
static __always_inline int scan_window(struct hdr_scan *h, __u64 ubuf, __u32 len, int in_buf)
{
	struct scratch *sc = scratch();

	if (!sc || !len)
		return -1;
	if (!in_buf && bpf_probe_read_user(sc->buf, BOUNDED(len - 1, WIN_MASK) + 1, (void *)ubuf))
		return -1;
	h->to = len;
	scan_headers(h, sc);
	return 0;
}

/* ---- chunked bodies ---- */

static __always_inline int hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = lower(ch);
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* One framing byte of a chunked body. Returns 1 at the body's end. */
static __always_inline int chunk_byte(struct http_chunker *k, char ch)
{
	int d;

	switch (k->st) {
	case CK_SIZE:
		d = hex_digit(ch);
		if (d >= 0 && k->digits < 15) {
			k->left = k->left * 16 + d;
			k->digits++;
			return 0;
		}
		k->st = CK_EXT;
		/* fall through: ';' extensions, or the CRLF */
	case CK_EXT:
		if (ch == '\n') {
			k->st = k->left ? CK_DATA : CK_TRAILER;
			k->line_len = 0;
			k->digits = 0;
		}
		return 0;
	case CK_DATA_END:
		if (ch == '\n') {
			k->st = CK_SIZE;
			k->left = 0;
		}
		return 0;
	case CK_TRAILER:
		if (ch == '\n') {
			if (k->line_len == 0) {
				k->st = CK_DONE;
				return 1;
			}
			k->line_len = 0;
		} else if (ch != '\r') {
			k->line_len++;
		}
		return 0;
	}
	return 0;
}

struct chunk_walk {
	struct http_chunker k;       /* the body's framing state, in and out */
	__u64 ubuf, len, off;        /* the piece, and how far the walk is */
	__u64 data_from, data_len;   /* out: the data run passed last */
	__u64 win_at;                /* where win was read from */
	__u32 win_len;               /* bytes in win; 0: none read */
	__u32 done;                  /* the body ended */
	__u32 stop_at_data;          /* return after each data run (its events) */
	__u32 pad;
	char win[16];
};

/* One step: a data run skipped, or one framing byte (read 16 at a time). */
static long chunk_step(__u64 j, void *ctx)
{
	struct chunk_walk *w = ctx;
	struct http_chunker *k = &w->k;
	__u64 left = w->len - w->off, n, rel;

	if (!left || k->st == CK_DONE)
		return 1;
	if (k->st == CK_DATA) {
		n = (__u64)k->left < left ? (__u64)k->left : left;
		w->data_from = w->off;
		w->data_len = n;
		w->off += n;
		w->win_len = 0;
		k->left -= n;
		if (!k->left)
			k->st = CK_DATA_END;
		return w->stop_at_data ? 1 : 0;
	}
	rel = w->off - w->win_at;
	if (!w->win_len || rel >= w->win_len) {
		n = left < 16 ? left : 16;
		if (bpf_probe_read_user(w->win, BOUNDED(n - 1, 15) + 1, (void *)(w->ubuf + w->off)))
			return 1;
		w->win_at = w->off;
		w->win_len = n;
		rel = 0;
	}
	w->off++;
	if (chunk_byte(k, w->win[rel & 15])) {
		w->done = 1;
		return 1;
	}
	return 0;
}

/* Walks a chunked body through the piece from off, until its end, the
 * piece's, or (stop_at_data) a data run, which data_from/data_len name.
 * A global function, so that its loop is checked once, not per caller:
 * the walk runs on a stack copy (bpf_loop's context must be the stack). */
__noinline int chunk_walk(struct chunk_walk *io)
{
	struct chunk_walk w;

	if (!io)
		return 0;
	__builtin_memcpy(&w, io, sizeof(w));
	w.data_len = 0;
	w.win_len = 0;
	bpf_loop(256, chunk_step, &w, 0);
	__builtin_memcpy(io, &w, sizeof(w));
	return 0;
}

/* ---- server-sent events: "data:" at a line's start ---- */

struct sse_scan {
	struct http_conn *c;
	__u32 to;
	__u64 now;
};

static __always_inline void count_event(struct http_conn *c, __u64 now)
{
	if (c->e.events++) {
		__u64 gap = now - c->e.last_event_ns;

		c->e.gap_sum_ns += gap;
		if (gap > c->e.gap_max_ns)
			c->e.gap_max_ns = gap;
	} else {
		c->e.first_event_ns = now;
	}
	c->e.last_event_ns = now;
}

/* "data:" matched from its dm-th byte at i: how far it got (5: an event;
 * 6: not one; less: the window ended first). */
static __always_inline __u32 match_data(const char *buf, __u32 i, __u32 to, __u32 dm)
{
	for (__u32 k = 0; k < 5; k++) {
		if (k < dm)
			continue;
		if (i + k - dm >= to)
			return k;
		if (at(buf, i + k - dm) != "data:"[k])
			return 6;
	}
	return 5;
}

/* The line end at p of the window (its bytes end at to): a line that
 * starts "data:" is an event. A global function, checked once. */
__noinline int sse_line_at(struct http_conn *c, __u32 p, __u32 to, __u64 now)
{
	struct scratch *sc = scratch();

	if (!c || !sc)
		return 0;
	c->dmatch = match_data(sc->buf, p + 1, to, 0);
	if (c->dmatch == 5)
		count_event(c, now);
	return 0;
}

/* Block j of the window's bytes: each line end, in order. */
static long sse_block(__u64 j, void *ctx)
{
	struct sse_scan *s = ctx;
	struct scratch *sc = scratch();
	__u32 base;
	__u64 m;

	if (!sc || (base = block_at(0, s->to, j)) >= HTTP_WIN)
		return 1;
	m = block_lines(sc->buf, base, 0, s->to);
	for (int k = 0; k < BLOCK && m; k++, m &= m - 1)
		sse_line_at(s->c, base + lowest_bit(m), s->to, s->now);
	return 0;
}

/* The events in n body bytes at ubuf; past HTTP_WINS windows, counted only. */
__noinline int sse_scan(struct http_conn *c, __u64 ubuf, __u64 n, __u64 now)
{
	struct scratch *sc = scratch();
	struct sse_scan s = { .c = c, .now = now };
	__u32 before, dm, len;
	__u64 last;

	if (!c || !sc || !n)
		return 0;
	before = c->e.events;
	last = c->e.last_event_ns;
#pragma clang loop unroll(disable)
	for (int w = 0; w < HTTP_WINS && n; w++) {
		len = n < HTTP_WIN ? n : HTTP_WIN;
		if (bpf_probe_read_user(sc->buf, BOUNDED(len - 1, WIN_MASK) + 1, (void *)ubuf))
			break;
		s.to = len;
		dm = c->dmatch;
		if (dm < 5) {   /* a line that began before this window */
			c->dmatch = match_data(sc->buf, 0, len, dm);
			if (c->dmatch == 5)
				count_event(c, now);
		}
		bpf_loop(blocks_of(0, len), sse_block, &s, 0);
		ubuf += len;
		n -= len;
	}
	/* the gaps to these events, into the histogram here and not per event:
	 * the first from the previous write's, the rest 0 */
	if (before && c->e.events > before)
		agg_add_n(c->root, AGG_KIND_HTTP_ITL, LAYER_NONE, now - last, c->e.events - before, 0);
	return 0;
}

/* ---- requests in the order they were read ---- */

/* The request line at o of the window into method and path. */
static __always_inline void parse_request_line(const char *buf, __u32 o, int mlen, __u32 total,
					       char *method, char *path, __u32 *flags)
{
	int i;

#pragma unroll
	for (i = 0; i < HTTP_METHOD_LEN - 1; i++)   /* unrolled: no memcpy call */
		if (i < mlen - 1)
			method[i] = at(buf, o + i);
	for (i = 0; i < HTTP_PATH_LEN - 1; i++) {
		char ch = at(buf, o + mlen + i);

		if (mlen + i >= total) {   /* the line went on past what was read */
			*flags |= HTTP_F_PATH_CUT;
			return;
		}
		if (ch == ' ' || ch == '?' || ch == '\r' || ch == '\n' || ch == 0)
			return;
		path[i] = ch;
	}
	*flags |= HTTP_F_PATH_CUT;
}

/* The next request in the queue becomes the one answered, else none is. */
static __always_inline void next_request(struct http_conn *c)
{
	struct http_slot_key k = { .sock = c->e.sock, .idx = c->q_head % HTTP_PIPE_MAX };
	struct http_slot *s;
	__u64 sock = c->e.sock;

	c->state = HC_IDLE;
	if (c->q_head == c->q_tail)
		return;
	s = bpf_map_lookup_elem(&http_pending, &k);
	c->q_head++;
	if (!s) {   /* its slot went: lost, never answered */
		COUNT(http_lost_pipeline);
		COUNT(http_done);
		return;
	}
	__builtin_memset(&c->e, 0, sizeof(c->e));
	fill_header(&c->e.h, EV_HTTP, s->start_ns);
	c->e.sock = sock;
	c->e.start_ns = s->start_ns;
	c->e.read_ns = s->read_ns;
	c->e.req_bytes = s->req_bytes;
	c->e.flags = s->flags;
	c->e.seq = s->seq;
	__builtin_memcpy(c->e.method, s->method, HTTP_METHOD_LEN);
	__builtin_memcpy(c->e.path, s->path, HTTP_PATH_LEN);
	c->no_body = s->no_body;
	bpf_map_delete_elem(&http_pending, &k);
	c->state = HC_REQUEST;
	/* the request being read, if its reading goes on, is this one now */
	c->rq_head = c->q_head == c->q_tail && c->rq_state != RQ_START;
}

/* Its response ended: out it goes, and the next one read is answered.
 * A global function: its callers' paths would multiply its own. */
__noinline int end_response(struct http_conn *c, __u32 end, __u64 now)
{
	if (!c)
		return 0;
	http_send(c, end, now);
	c->opaque = 0;
	next_request(c);
	return 0;
}

/* A request line read at o of the window: the request answered next, or
 * one in the queue behind it. */
static __always_inline void begin_request(struct http_conn *c, const char *buf, __u32 o, int mlen,
					  __u32 total, __u64 start, __u64 now)
{
	struct http_slot s = {};
	struct http_slot_key k = { .sock = c->e.sock, .idx = c->q_tail % HTTP_PIPE_MAX };
	__u32 flags = start != now ? HTTP_F_ARRIVAL : 0;

	c->rq_seq++;
	if (c->state == HC_IDLE) {
		__u64 sock = c->e.sock;

		__builtin_memset(&c->e, 0, sizeof(c->e));
		fill_header(&c->e.h, EV_HTTP, start);
		c->e.sock = sock;
		c->e.seq = c->rq_seq;
		c->e.start_ns = start;
		c->e.read_ns = now;
		parse_request_line(buf, o, mlen, total, c->e.method, c->e.path, &flags);
		c->e.flags = flags;
		c->no_body = at(buf, o) == 'H';   /* HEAD */
		c->state = HC_REQUEST;
		c->rq_head = 1;
		COUNT(http_begun);
		return;
	}
	c->rq_head = 0;
	if (c->q_tail - c->q_head >= HTTP_PIPE_MAX) {
		COUNT(http_lost_pipeline);
		return;
	}
	s.start_ns = start;
	s.read_ns = now;
	s.seq = c->rq_seq;
	s.no_body = at(buf, o) == 'H';
	parse_request_line(buf, o, mlen, total, s.method, s.path, &flags);
	s.flags = flags;
	if (bpf_map_update_elem(&http_pending, &k, &s, BPF_ANY)) {
		COUNT(http_lost_pipeline);
		return;
	}
	c->q_tail++;
	COUNT(http_begun);
}

/* n more bytes of the request being read. */
static __always_inline void request_bytes(struct http_conn *c, __u64 n)
{
	struct http_slot_key k = { .sock = c->e.sock, .idx = (c->q_tail - 1) % HTTP_PIPE_MAX };
	struct http_slot *s;

	if (c->rq_head) {
		c->e.req_bytes += n;
	} else if (c->q_tail != c->q_head && (s = bpf_map_lookup_elem(&http_pending, &k))) {
		s->req_bytes += n;
	}
}

/* ---- the response, scanned as it is sent ---- */

/* A response begins: its headers come first, the status line first of
 * them (its code is read with the first window). */
static __always_inline void response_start(struct http_conn *c, __u64 now)
{
	c->e.resp_ns = now;
	c->state = HC_HEADERS;
	c->line_len = 0;
	c->dmatch = 1;   /* the status line is no header (hdr_scan.first) */
}

/* The status line's code from its first bytes b ("HTTP/1.1 200"). */
static __always_inline __u32 status_code(const char *b)
{
	__u32 code = 0;

	if (b[0] == 'H' && b[1] == 'T' && b[2] == 'T' && b[3] == 'P' && b[4] == '/')
		for (int k = 9; k < 12; k++)
			if (b[k] >= '0' && b[k] <= '9')
				code = code * 10 + (b[k] - '0');
	return code;
}

/* The headers ended: how the body will. */
static __always_inline void response_body(struct http_conn *c, __u32 flags, __s64 length)
{
	__u32 code = c->e.status;

	c->e.flags |= flags;
	c->state = HC_BODY;
	c->dmatch = 0;
	__builtin_memset(&c->chunk, 0, sizeof(c->chunk));
	if (c->no_body || (code >= 100 && code < 200) || code == 204 || code == 304)
		c->body = BM_NONE;
	else if (flags & HTTP_F_CHUNKED)
		c->body = BM_CHUNKED;
	else if (flags & HTTP_F_LENGTH)
		c->body = BM_LENGTH;
	else
		c->body = BM_CLOSE;
	c->body_left = length;
}

/* Response headers in the piece: the bytes they took of it. The status
 * line's code comes from the window its first bytes were read into. */
__noinline __u64 response_headers(struct http_conn *c, __u64 ubuf, __u64 n)
{
	struct hdr_scan h = { .response = 1 };
	__u32 len = n < HTTP_WIN ? n : HTTP_WIN;
	struct scratch *sc = scratch();
	char b[16] = {};

	if (!c || !sc)
		return n;
	h.line_len = c->line_len;
	h.first = c->dmatch;
	if (scan_window(&h, ubuf, len, 0))
		return n;
	if (c->dmatch && !c->line_len) {   /* the status line starts here */
		if (len >= 12)
			c->e.status = status_code(sc->buf);
		else if (!bpf_probe_read_user(b, sizeof(b), (void *)ubuf))
			c->e.status = status_code(b);
	}
	c->line_len = h.line_len;
	c->dmatch = h.first;
	if (!h.end)
		return len;
	response_body(c, h.flags, h.length);
	return h.end;
}

/* Body bytes of the piece: the bytes they took of it, and whether the
 * response ended there. */
static __always_inline __u64 response_body_bytes(struct http_conn *c, __u64 ubuf, __u64 n, __u64 now, __u32 *done)
{
	struct chunk_walk w = { .ubuf = ubuf, .len = n };
	__u64 take;

	if (!c || !done)
		return n;
	*done = 0;
	if (c->body == BM_NONE) {
		*done = 1;
		return 0;
	}
	if (c->body == BM_LENGTH) {
		take = (__u64)c->body_left < n ? (__u64)c->body_left : n;
		if (c->e.flags & HTTP_F_SSE)
			sse_scan(c, ubuf, take, now);
		c->body_left -= take;
		*done = c->body_left <= 0;
		return take;
	}
	if (c->body == BM_CLOSE) {
		if (c->e.flags & HTTP_F_SSE)
			sse_scan(c, ubuf, n, now);
		return n;
	}
	w.k = c->chunk;
	w.stop_at_data = 1;
#pragma clang loop unroll(disable)
	for (int r = 0; r < 8 && !w.done && w.off < n; r++) {
		chunk_walk(&w);
		if (w.data_len && (c->e.flags & HTTP_F_SSE))
			sse_scan(c, ubuf + w.data_from, w.data_len, now);
	}
	c->chunk = w.k;
	*done = w.done;
	return w.done ? w.off : n;
}

/* One step of a response through the n bytes sent at ubuf: the bytes it
 * took. A global function, checked once. */
__noinline __u64 response_step(struct http_conn *c, __u64 ubuf, __u64 n, __u64 now)
{
	__u64 took = 0;
	__u32 done = 0;

	if (!c)
		return n;
	if (c->state == HC_BODY && c->body == BM_CLOSE && c->q_head != c->q_tail) {
		char b[8] = {};

		/* no end was given, and the next response begins: this one ends */
		bpf_probe_read_user(b, sizeof(b), (void *)ubuf);
		if (b[0] == 'H' && b[1] == 'T' && b[2] == 'T' && b[3] == 'P' && b[4] == '/')
			end_response(c, HTTP_END_UNPARSED, now);
	}
	if (c->state == HC_IDLE || c->state == HC_NOT_HTTP)
		return n;   /* nothing was asked (a request before the attach) */
	if (c->state == HC_REQUEST)
		response_start(c, now);
	if (c->state == HC_HEADERS) {
		took = response_headers(c, ubuf, n);
		c->e.resp_bytes += took;
		if (c->state == HC_HEADERS)
			return n;
		if (c->e.status >= 100 && c->e.status < 200) {
			c->state = HC_REQUEST;   /* an interim response: the real one follows */
			c->e.flags &= ~(HTTP_F_SSE | HTTP_F_CHUNKED | HTTP_F_LENGTH);
			return took;
		}
		return took ? took : 0;
	}
	took = response_body_bytes(c, ubuf, n, now, &done);
	c->e.resp_bytes += took;
	if (done)
		end_response(c, HTTP_END_RESPONSE, now);
	return took;
}

__noinline __u64 request_step(struct http_conn *c, __u64 ubuf, __u64 n, __u64 start, __u64 now);

/* A piece's walk, one request or response step at a time: a callback
 * for each direction, so that neither program verifies the other's. */
struct piece_walk {
	struct http_conn *c;
	__u64 ubuf, n, off, start, now;
};

static long request_piece_step(__u64 i, void *ctx)
{
	struct piece_walk *w = ctx;

	if (w->off >= w->n)
		return 1;
	w->off += request_step(w->c, w->ubuf ? w->ubuf + w->off : 0, w->n - w->off, w->start, w->now);
	return 0;
}

static long response_piece_step(__u64 i, void *ctx)
{
	struct piece_walk *w = ctx;

	if (w->off >= w->n)
		return 1;
	w->off += response_step(w->c, w->ubuf ? w->ubuf + w->off : 0, w->n - w->off, w->now);
	return 0;
}

/* Enough steps for a read of a server's largest buffer of pipelined
 * requests (a few steps each): what a piece needs, it takes; most, two. */
#define PIECE_STEPS 8192

/* A piece of n bytes sent from user memory at ubuf (a write's buffer or
 * one iovec): the responses it carries, in order. */
static __always_inline int response_piece(struct http_conn *c, __u64 ubuf, __u64 n, __u64 now)
{
	struct piece_walk w = { .c = c, .ubuf = ubuf, .n = n, .now = now };

	if (!c)
		return 0;
	bpf_loop(PIECE_STEPS, response_piece_step, &w, 0);
	/* a body with no bytes left to take (BM_NONE) ends with its headers */
	if (c->state == HC_BODY && c->body == BM_NONE)
		end_response(c, HTTP_END_RESPONSE, now);
	return 0;
}

/* n bytes sent that cannot be read here (sendfile, splice, sendmmsg):
 * body bytes by their count. Before the headers were seen the response
 * can only end at the next one or the close. */
static __always_inline void response_opaque(struct http_conn *c, __u64 n, __u64 now)
{
	struct http_chunker *k = &c->chunk;

	if (c->state == HC_IDLE || c->state == HC_NOT_HTTP)
		return;
	c->e.resp_bytes += n;
	if (c->state != HC_BODY) {
		if (c->state == HC_REQUEST)
			c->e.resp_ns = now;
		c->state = HC_BODY;
		c->body = BM_CLOSE;
		c->opaque = 1;
		return;
	}
	if (c->body == BM_LENGTH) {
		c->body_left -= n;
		if (c->body_left <= 0)
			end_response(c, HTTP_END_RESPONSE, now);
	} else if (c->body == BM_CHUNKED && k->st == CK_DATA) {
		k->left = (__u64)k->left > n ? k->left - n : 0;
		if (!k->left)
			k->st = CK_DATA_END;
	}
}

/* ---- the reading of requests ---- */

/* buf at o starts with word (len bytes, exactly). */
static __always_inline int has_prefix(const char *buf, __u32 o, const char *word, int len)
{
	return word_match(buf, o, word, len, 0);
}

/* The method's length with its space if buf starts with one, else 0.
 * (Literals, not a table: the object linker misplaced a const table.) */
static __always_inline int method_len(const char *buf)
{
	if (has_prefix(buf, 0, "GET ", 4) || has_prefix(buf, 0, "PUT ", 4))
		return 4;
	if (has_prefix(buf, 0, "POST ", 5) || has_prefix(buf, 0, "HEAD ", 5))
		return 5;
	if (has_prefix(buf, 0, "PATCH ", 6))
		return 6;
	if (has_prefix(buf, 0, "DELETE ", 7))
		return 7;
	return has_prefix(buf, 0, "OPTIONS ", 8) ? 8 : 0;
}

static __always_inline int path_end(char ch)
{
	return ch == ' ' || ch == '?' || ch == '\r' || ch == '\n' || ch == 0;
}

/* Too little of the request line to parse yet: upper-case letters that may
 * still become a method, or a method whose path has not ended. */
static __always_inline int line_unfinished(const char *buf, int mlen, __u32 total)
{
	if (total >= HTTP_PRE_MAX)
		return 0;
	if (!mlen) {
		for (__u32 i = 0; i < 8 && i < total; i++)
			if (at(buf, i) < 'A' || at(buf, i) > 'Z')
				return 0;
		return 1;
	}
	for (__u32 i = 0; i < HTTP_PRE_MAX; i++) {
		if (mlen + i >= total)
			return 1;
		if (path_end(at(buf, mlen + i)))
			return 0;
	}
	return 0;
}

/* Bytes that open no request where one must start: on a new connection it
 * is not HTTP/1.x (each kind counted); after requests, a boundary lost. */
static __always_inline void not_a_request(struct http_conn *c, const char *buf)
{
	if (c->rq_seq) {
		COUNT(http_lost_boundary);
		c->rq_state = RQ_LOST;
		return;
	}
	if (at(buf, 0) == 0x16)   /* a TLS handshake record */
		COUNT(http_tls);
	else if (has_prefix(buf, 0, "PRI * HTTP/2", 12))
		COUNT(http_h2);
	else
		COUNT(http_unparsed);
	c->state = HC_NOT_HTTP;
}

/* A request line at ubuf (after any kept start of it): the bytes it took. */
__noinline __u64 request_start(struct http_conn *c, __u64 ubuf, __u64 n, __u64 start, __u64 now)
{
	struct scratch *sc = scratch();
	__u32 pre, len = n < 96 ? n : 96, total;
	int mlen;

	if (!c || !sc || !len)
		return n;
	pre = c->rq_state == RQ_PREFIX ? c->pre_len & (HTTP_PRE_MAX - 1) : 0;
	__builtin_memcpy(sc->buf, c->pre, HTTP_PRE_MAX);   /* all of it: no loop */
	/* the masks bound offset and size for the verifier; len is at most 96 */
	if (bpf_probe_read_user(sc->buf + BOUNDED(pre, HTTP_PRE_MAX - 1), BOUNDED(len - 1, 0x7f) + 1, (void *)ubuf))
		return n;
	total = pre + len;
	mlen = method_len(sc->buf);
	if (line_unfinished(sc->buf, mlen, total)) {
		if (c->rq_state != RQ_PREFIX)
			c->e.start_ns = start;   /* kept for when the line is whole */
		__builtin_memcpy(c->pre, sc->buf, HTTP_PRE_MAX);
		c->pre_len = total;
		c->rq_state = RQ_PREFIX;
		return n;
	}
	if (!mlen) {
		not_a_request(c, sc->buf);
		return n;
	}
	if (c->rq_state == RQ_PREFIX && c->state == HC_IDLE)
		start = c->e.start_ns;   /* timed from its first piece */
	begin_request(c, sc->buf, 0, mlen, total, start, now);
	request_bytes(c, pre);
	c->rq_state = RQ_HEAD;
	c->rq_first = 1;
	c->rq_line_len = pre;
	c->rq_length = -1;
	c->rq_chunked = 0;
	/* the headers' scan reads the line again, for its end: from the
	 * window when the piece is all there (a short request, whole) */
	c->rq_in_buf = !pre && len == n;
	return 0;
}

/* Request headers in the piece: the bytes they took of it. */
__noinline __u64 request_headers(struct http_conn *c, __u64 ubuf, __u64 n, int in_buf)
{
	struct hdr_scan h = {};
	__u32 len = n < HTTP_WIN ? n : HTTP_WIN;

	if (!c)
		return n;
	h.line_len = c->rq_line_len;
	h.first = c->rq_first;
	if (scan_window(&h, ubuf, len, in_buf))
		return n;
	c->rq_line_len = h.line_len;
	c->rq_first = h.first;
	if (!h.end) {
		/* a line cut by the window's end is read whole in the next one */
		if (len < n && h.last_start > 64 && len - h.last_start < 64) {
			c->rq_line_len = 0;
			return h.last_start;
		}
		return len;
	}
	if (h.flags & HTTP_F_CHUNKED) {
		c->rq_state = RQ_CHUNKED;
		__builtin_memset(&c->rq_chunk, 0, sizeof(c->rq_chunk));
	} else if ((h.flags & HTTP_F_LENGTH) && h.length > 0) {
		c->rq_state = RQ_BODY;
		c->rq_left = h.length;
	} else {
		c->rq_state = RQ_START;
	}
	return h.end;
}

/* One step of reading requests from the n bytes at ubuf (0: not readable
 * here): the bytes it took. A global function, checked once. */
__noinline __u64 request_step(struct http_conn *c, __u64 ubuf, __u64 n, __u64 start, __u64 now)
{
	struct scratch *sc = scratch();
	struct chunk_walk w = {};
	__u32 st;
	__u64 took = n;

	if (!c || !sc)
		return n;
	st = c->rq_state;
	if (st == RQ_LOST || c->state == HC_NOT_HTTP)
		return n;
	if (st == RQ_BODY) {
		took = (__u64)c->rq_left < n ? (__u64)c->rq_left : n;
		c->rq_left -= took;
		if (!c->rq_left)
			c->rq_state = RQ_START;
	} else if (!ubuf) {   /* bytes to parse that cannot be read */
		if (st != RQ_START || c->rq_seq)
			COUNT(http_lost_boundary);
		c->rq_state = RQ_LOST;
		return n;
	} else if (st == RQ_START || st == RQ_PREFIX) {
		took = request_start(c, ubuf, n, start, now);
	} else if (st == RQ_HEAD) {
		took = request_headers(c, ubuf, n, c->rq_in_buf);
		c->rq_in_buf = 0;
	} else {
		w.k = c->rq_chunk;
		w.ubuf = ubuf;
		w.len = n;
		chunk_walk(&w);
		c->rq_chunk = w.k;
		took = w.off;
		if (w.done)
			c->rq_state = RQ_START;
	}
	if (c->rq_state != RQ_PREFIX)
		request_bytes(c, took);
	return took;
}

/* A piece of n bytes received into user memory at ubuf: the requests in
 * it, each delimited. Bytes left when the steps ran out lose the
 * boundary, counted. */
static __always_inline int request_piece(struct http_conn *c, __u64 ubuf, __u64 n, __u64 start, __u64 now)
{
	struct piece_walk w = { .c = c, .ubuf = ubuf, .n = n, .start = start, .now = now };

	if (!c)
		return 0;
	bpf_loop(PIECE_STEPS, request_piece_step, &w, 0);
	if (w.off < n && c->rq_state != RQ_LOST) {
		COUNT(http_lost_boundary);
		c->rq_state = RQ_LOST;
	}
	return 0;
}

/* This thread read (part of) a request: what it hands the engine next
 * came from there (reqlink.bpf.h). */
static __always_inline void note_reading(struct http_conn *c)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct http_link l = { .sock = c->e.sock, .seq = c->rq_seq };

	if (c->rq_seq && c->state != HC_NOT_HTTP)
		bpf_map_update_elem(&http_reading, &tid, &l, BPF_ANY);
}

/* ---- the system call behind a send or a receive ---- */

struct iov_walk {
	struct http_conn *c;
	__u64 iov, left, start, now;
};

/* One iovec of a walk: its bytes, as a piece of the request or the response. */
static __always_inline long iov_step(__u64 i, struct iov_walk *w, int recv)
{
	struct iovec v;
	__u64 n;

	if (!w->left || bpf_probe_read_user(&v, sizeof(v), (void *)(w->iov + i * sizeof(v))))
		return 1;
	n = v.iov_len < w->left ? v.iov_len : w->left;
	if (recv)
		request_piece(w->c, (__u64)v.iov_base, n, w->start, w->now);
	else
		response_piece(w->c, (__u64)v.iov_base, n, w->now);
	w->left -= n;
	return 0;
}

static long iov_recv_step(__u64 i, void *ctx)
{
	return iov_step(i, ctx, 1);
}

static long iov_send_step(__u64 i, void *ctx)
{
	return iov_step(i, ctx, 0);
}

/* ret bytes received or sent on c's socket by the current system call:
 * its buffer, or each of its iovecs (any count the kernel takes); a call
 * whose bytes cannot be found (sendfile, splice, io_uring) by count. */
static __always_inline int http_bytes(struct http_conn *c, __u64 ret, const int recv, __u64 start, __u64 now)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct iov_walk w = { .c = c, .left = ret, .start = start, .now = now };
	__u64 nr, niov = 0;

	if (!c || !regs)
		return 0;
	nr = regs->orig_ax;   /* a BTF pointer: read directly, no helper */
	w.iov = regs->si;
	if (nr == (recv ? NR_read : NR_write) || nr == (recv ? NR_recvfrom : NR_sendto)) {
		if (recv)
			request_piece(c, w.iov, ret, start, now);
		else
			response_piece(c, w.iov, ret, now);
		return 0;
	}
	if (nr == (recv ? NR_readv : NR_writev)) {
		niov = regs->dx;
	} else if (nr == (recv ? NR_recvmsg : NR_sendmsg)) {
		struct user_msghdr msg;

		if (bpf_probe_read_user(&msg, sizeof(msg), (void *)w.iov))
			return 0;
		w.iov = (__u64)msg.msg_iov;
		niov = msg.msg_iovlen;
	} else if (recv) {
		request_piece(c, 0, ret, start, now);
		return 0;
	} else {
		response_opaque(c, ret, now);
		return 0;
	}
	bpf_loop(niov < 1024 ? niov : 1024, recv ? iov_recv_step : iov_send_step, &w, 0);
	return 0;
}

/* Each direction its own global function: a program verifies only its
 * own side's parsing (attach time: the verifier took ~0.9 s for each of
 * http_recv and http_send_length when both had both). */
__noinline int http_recv_bytes(struct http_conn *c, __u64 ret, __u64 start, __u64 now)
{
	return http_bytes(c, ret, 1, start, now);
}

__noinline int http_send_bytes(struct http_conn *c, __u64 ret, __u64 now)
{
	return http_bytes(c, ret, 0, 0, now);
}

/* ---- the programs ---- */

/* A TCP socket's bytes read by a traced process: a connection's first
 * bytes make it one. */
static __always_inline struct http_conn *new_conn(__u64 sk, __u32 root)
{
	struct sock *s = (void *)sk;
	struct http_conn *fresh, *c;
	__u32 zero = 0;

	if (BPF_CORE_READ(s, sk_type) != 1 /* SOCK_STREAM */ || BPF_CORE_READ(s, sk_protocol) != 6 /* TCP */)
		return 0;
	fresh = bpf_map_lookup_elem(&http_zero, &zero);
	if (!fresh || bpf_map_update_elem(&http_conns, &sk, fresh, BPF_NOEXIST) ||
	    !(c = bpf_map_lookup_elem(&http_conns, &sk))) {
		COUNT(http_table_full);
		return 0;
	}
	c->e.sock = sk;
	c->tgid = current_tgid();
	c->root = root;
	return c;
}

SEC("raw_tp/sock_recv_length")
int http_recv(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 sk = ctx->args[0], now, start, *arrived;
	int ret = (int)ctx->args[1], flags = (int)ctx->args[2], start_known;
	struct http_conn *c;
	__u32 root, port;

	if (ret <= 0 || (flags & 2 /* MSG_PEEK: a look, not a read */) || detaching || !http_watched())
		return 0;
	c = bpf_map_lookup_elem(&http_conns, &sk);
	if (c && c->state == HC_NOT_HTTP)
		return 0;
	start_known = c != 0;
	if (!c && (!(root = http_root()) || !(c = new_conn(sk, root))))
		return 0;
	now = bpf_ktime_get_ns();
	start = c->arrival_ns && c->arrival_ns <= now ? c->arrival_ns : now;
	c->arrival_ns = 0;   /* the next bytes' clock starts anew */
	if (!start_known && (arrived = bpf_map_lookup_elem(&http_arrivals, &sk))) {
		/* a new connection's first bytes, seen before it was one */
		if (*arrived && *arrived <= now)
			start = *arrived;
		bpf_map_delete_elem(&http_arrivals, &sk);
	}
	http_recv_bytes(c, ret, start, now);
	if (loaded & (LOADED_PROBES | LOADED_ENGINES))   /* an engine may take the link */
		note_reading(c);
	if (c->rq_seq == 1 && c->e.seq == 1 && c->state == HC_REQUEST) {
		/* a port that serves HTTP: its next connections are timed from arrival */
		port = BPF_CORE_READ((struct sock *)sk, __sk_common.skc_num);
		if (!bit_test(http_port_bits, PORT_MASK, port))
			bit_set(http_port_bits, PORT_MASK, port, 1);
	}
	return 0;
}

SEC("raw_tp/sock_send_length")
int http_send_length(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 sk = ctx->args[0];
	int ret = (int)ctx->args[1];
	struct http_conn *c;

	if (detaching || !http_watched() || !(c = bpf_map_lookup_elem(&http_conns, &sk)))
		return 0;
	if (c->state != HC_REQUEST && c->state != HC_HEADERS && c->state != HC_BODY)
		return 0;
	if (ret < 0) {
		if (ret == -32 || ret == -104)   /* EPIPE, ECONNRESET: the client went away */
			end_response(c, HTTP_END_RESET, bpf_ktime_get_ns());
		return 0;
	}
	http_send_bytes(c, ret, bpf_ktime_get_ns());
	return 0;
}

/* A segment with data on a traced connection, or on an established
 * socket of a port we serve: the first one since the last read starts the
 * next request's clock. A known connection keeps it in its own entry.
 * Kernels before 6.6 only: http_data_ready does this where it can. */
SEC("raw_tp/tcp_probe")
int http_tcp_probe(struct bpf_raw_tracepoint_args *ctx)
{
	struct sock *sk = (void *)ctx->args[0];
	struct sk_buff *skb = (void *)ctx->args[1];
	__u64 key = (__u64)sk, now;
	struct http_conn *c;
	unsigned char *head;
	__u16 th;
	__u8 doff = 0;

	if (!bit_test(http_port_bits, PORT_MASK, BPF_CORE_READ(sk, __sk_common.skc_num)))
		return 0;
	c = bpf_map_lookup_elem(&http_conns, &key);
	if (c && c->arrival_ns)
		return 0;
	head = BPF_CORE_READ(skb, head);
	th = BPF_CORE_READ(skb, transport_header);
	if (bpf_probe_read_kernel(&doff, 1, head + th + 12))
		return 0;
	if (BPF_CORE_READ(skb, len) <= (__u32)(doff >> 4) * 4)
		return 0;   /* no payload: an ACK */
	now = bpf_ktime_get_ns();
	if (c)
		c->arrival_ns = now;
	else
		bpf_map_update_elem(&http_arrivals, &key, &now, BPF_NOEXIST);
	return 0;
}

/* Data queued on a socket (Linux 6.6's sock:sk_data_ready, which fires
 * for data only, not for each ACK as tcp_probe does, and needs no look at
 * the segment): the first since the last read starts the next request's
 * clock. The hook of choice; tcp_probe is the fallback. It runs for every
 * socket on the host, so the port is looked at first: a socket of a port
 * no traced server serves costs a read and a test. A read through
 * bpf_rdonly_cast is a load, not a helper call. */
SEC("raw_tp/sk_data_ready")
int http_data_ready(struct bpf_raw_tracepoint_args *ctx)
{
	struct sock *sk = bpf_rdonly_cast((void *)ctx->args[0], bpf_core_type_id_kernel(struct sock));
	__u64 key = ctx->args[0], now;
	struct http_conn *c;

	if (!bit_test(http_port_bits, PORT_MASK, sk->__sk_common.skc_num))
		return 0;
	if ((c = bpf_map_lookup_elem(&http_conns, &key))) {
		if (!c->arrival_ns)
			c->arrival_ns = bpf_ktime_get_ns();
		return 0;
	}
	if (sk->__sk_common.skc_state != 1 /* TCP_ESTABLISHED: not the listener */ ||
	    sk->sk_protocol != 6 /* TCP */)
		return 0;
	now = bpf_ktime_get_ns();
	bpf_map_update_elem(&http_arrivals, &key, &now, BPF_NOEXIST);
	return 0;
}

/* The server closed (FIN_WAIT1, LAST_ACK) or the connection died (CLOSE;
 * from ESTABLISHED, a reset): its open request ends, and its state goes. */
SEC("raw_tp/inet_sock_set_state")
int http_sock_state(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 key = ctx->args[0];
	int old = (int)ctx->args[1], state = (int)ctx->args[2];
	struct http_conn *c;
	__u32 end;

	if (state != 4 /* FIN_WAIT1 */ && state != 9 /* LAST_ACK */ && state != 7 /* CLOSE */)
		return 0;
	if (state == 7)
		bpf_map_delete_elem(&http_arrivals, &key);
	if (!(c = bpf_map_lookup_elem(&http_conns, &key)))
		return 0;
	/* straight from ESTABLISHED to CLOSE: a reset, not a close (FIN) */
	end = c->opaque ? HTTP_END_UNPARSED : state == 7 && old == 1 ? HTTP_END_RESET : HTTP_END_CLOSE;
	if (c->state == HC_REQUEST || c->state == HC_HEADERS || c->state == HC_BODY)
		http_send(c, end, bpf_ktime_get_ns());
	else if (c->rq_state == RQ_PREFIX)   /* closed before a whole request line came */
		COUNT(http_unparsed);
	http_drop_pending(c);
	bpf_map_delete_elem(&http_conns, &key);
	return 0;
}

/* A traced process's child (a pre-fork server's worker) is traced too,
 * in the same tree, unless the process alone was asked for. */
SEC("raw_tp/sched_process_fork")
int http_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *parent = (void *)ctx->args[0], *child = (void *)ctx->args[1];
	__u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid);
	struct http_watch *w;

	if (ptgid == ctgid || !(w = bpf_map_lookup_elem(&http_pids, &ptgid)) || !(w->flags & HTTP_W_TREE))
		return 0;
	if (!bpf_map_update_elem(&http_pids, &ctgid, w, BPF_ANY))
		bit_set(http_pid_bits, PID_MASK, ctgid, 1);
	return 0;
}
