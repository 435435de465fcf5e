// SPDX-License-Identifier: GPL-2.0
/* http.bpf.c - --http: HTTP/1.x requests from a traced server's sockets
 * (http.bpf.h says what is tracked). Raw tracepoints only: sys_enter and
 * sys_exit for the server's reads, writes and closes, tcp_probe for when a
 * request's bytes reached the socket, inet_sock_set_state to forget a
 * closed socket. The one process of -p or -- CMD (target_tgid), else those
 * in http_pids. */
#include "core.bpf.h"
#include <bpf/bpf_core_read.h>
#include "requests.bpf.h"
#include "engines.bpf.h"
#include "http.bpf.h"

#define SCAN_MASK (HTTP_SCAN_MAX - 1)
/* x & mask that the compiler cannot fold away when it already knows x is
 * in range: the verifier needs to see the bound on the register itself. */
#define BOUNDED(x, mask) ({ __u64 v__ = (x); asm volatile("" : "+r"(v__)); v__ & (mask); })

/* x86-64 syscall numbers; elsewhere --http is refused before load */
enum {
	NR_read = 0, NR_write = 1, NR_close = 3, NR_readv = 19, NR_writev = 20,
	NR_sendto = 44, NR_recvfrom = 45, NR_sendmsg = 46, NR_recvmsg = 47,
};

enum call_kind { CALL_READ = 1, CALL_WRITE, CALL_WRITEV, CALL_SENDMSG };

struct http_call {
	__u64 arg;   /* the buffer, iovec array or msghdr */
	__u32 fd;
	__u32 kind;  /* enum call_kind */
	__u32 niov;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);            /* tid */
	__type(value, struct http_call);
} http_calls SEC(".maps");

struct scratch {
	char buf[HTTP_SCAN_MAX];
};

/* A zeroed connection to insert from (too large for the stack). Never written. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct http_conn);
} http_zero SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} http_scratch SEC(".maps");

/* The calling process's tgid when its sockets are traced, else 0. */
static __always_inline __u32 http_target(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (target_tgid)
		return tgid == target_tgid ? tgid : 0;
	return bpf_map_lookup_elem(&http_pids, &tgid) ? tgid : 0;
}

static __always_inline __u32 current_tgid(void)
{
	return bpf_get_current_pid_tgid() >> 32;
}

static __always_inline __u64 reg_arg(struct pt_regs *regs, int n)
{
	switch (n) {
	case 1: return BPF_CORE_READ(regs, di);
	case 2: return BPF_CORE_READ(regs, si);
	case 3: return BPF_CORE_READ(regs, dx);
	case 4: return BPF_CORE_READ(regs, r10);   /* the syscall ABI's fourth */
	default: return 0;
	}
}

/* ---- the socket behind a descriptor ---- */

/* The struct sock of fd in this process if it is a TCP socket, else 0. */
static __always_inline __u64 tcp_sock_of(__u32 fd, __u32 *port)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds, *file = 0;
	struct socket *so;
	struct sock *sk;

	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return 0;
	if ((BPF_CORE_READ(file, f_inode, i_mode) & 0170000) != 0140000)   /* S_IFSOCK */
		return 0;
	so = BPF_CORE_READ(file, private_data);
	sk = BPF_CORE_READ(so, sk);
	if (!sk || BPF_CORE_READ(sk, sk_type) != 1 /* SOCK_STREAM */ ||
	    BPF_CORE_READ(sk, sk_protocol) != 6 /* IPPROTO_TCP */)
		return 0;
	*port = BPF_CORE_READ(sk, __sk_common.skc_num);
	return (__u64)sk;
}

/* ---- a new request: the first read after the last response ---- */

/* buf starts with word (len bytes, exactly). */
static __always_inline int has_prefix(const char *buf, const char *word, int len)
{
	for (int k = 0; k < len; k++)
		if (buf[k] != word[k])
			return 0;
	return 1;
}

/* The method's length with its space if buf starts with one, else 0.
 * (Literals, not a table: the object linker misplaced a const table.) */
static __always_inline int method_len(const char *buf)
{
	if (has_prefix(buf, "GET ", 4) || has_prefix(buf, "PUT ", 4))
		return 4;
	if (has_prefix(buf, "POST ", 5) || has_prefix(buf, "HEAD ", 5))
		return 5;
	if (has_prefix(buf, "PATCH ", 6))
		return 6;
	if (has_prefix(buf, "DELETE ", 7))
		return 7;
	return has_prefix(buf, "OPTIONS ", 8) ? 8 : 0;
}

static __always_inline int path_end(char ch)
{
	return ch == ' ' || ch == '?' || ch == '\r' || ch == '\n' || ch == 0;
}

/* The method and the path up to '?', ' ' or its end into the event; buf
 * holds total bytes of the request. */
static __always_inline void parse_request_line(struct http_conn *c, const char *buf, int mlen, __u32 total)
{
	int i;

	for (i = 0; i < HTTP_METHOD_LEN - 1 && i < mlen - 1; i++)
		c->e.method[i] = buf[i];
	for (i = 0; i < HTTP_PATH_LEN - 1; i++) {
		char ch = buf[(mlen + i) & SCAN_MASK];

		if (mlen + i >= total) {   /* the line went on past what was read */
			c->e.flags |= HTTP_F_PATH_CUT;
			return;
		}
		if (path_end(ch))
			return;
		c->e.path[i] = ch;
	}
	if (!path_end(buf[(mlen + i) & SCAN_MASK]))
		c->e.flags |= HTTP_F_PATH_CUT;
}

/* Too little of the request line to parse yet: upper-case letters that may
 * still become a method, or a method whose path has not ended. */
static __always_inline int line_unfinished(const char *buf, int mlen, __u32 total)
{
	if (total >= HTTP_PRE_MAX)
		return 0;
	if (!mlen) {
		for (__u32 i = 0; i < 8 && i < total; i++)
			if (buf[i] < 'A' || buf[i] > 'Z')
				return 0;
		return 1;
	}
	for (__u32 i = 0; i < HTTP_PRE_MAX; i++) {
		if (mlen + i >= total)
			return 1;
		if (path_end(buf[(mlen + i) & SCAN_MASK]))
			return 0;
	}
	return 0;
}

static __always_inline void start_request(struct http_conn *c, __u64 sk, __u32 port, __u64 now)
{
	__u64 *arrived = bpf_map_lookup_elem(&http_arrivals, &sk);
	__u32 seq = c->e.seq + 1, one = 1;

	__builtin_memset(c, 0, sizeof(*c));
	fill_header(&c->e.h, EV_HTTP, now);
	c->e.sock = sk;
	c->e.seq = seq;
	c->e.read_ns = now;
	c->e.start_ns = now;
	if (arrived && *arrived && *arrived <= now) {
		c->e.start_ns = *arrived;
		c->e.flags |= HTTP_F_ARRIVAL;
	}
	bpf_map_delete_elem(&http_arrivals, &sk);   /* the next request's bytes start anew */
	bpf_map_update_elem(&http_ports, &port, &one, BPF_ANY);
	c->state = HC_REQUEST;
}

/* This thread read (part of) c's request: what it hands the engine next
 * came from there (reqlink.bpf.h). */
static __always_inline void note_reading(struct http_conn *c)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct http_link l = { .sock = c->e.sock, .seq = c->e.seq };

	if (c->state == HC_REQUEST)
		bpf_map_update_elem(&http_reading, &tid, &l, BPF_ANY);
}

/* A read of n bytes at ubuf on fd: a request's start, or more of it. A
 * request line that comes in pieces (a slow client) is kept in c->pre
 * until it can be parsed, timed from its first piece. */
/* A global function: the verifier checks it once, on its own. */
__noinline int http_on_read(__u32 fd, __u64 ubuf, __s64 n, __u64 now)
{
	struct http_conn_key key = { .tgid = current_tgid(), .fd = fd };
	struct http_conn *c = bpf_map_lookup_elem(&http_conns, &key);
	struct scratch *s;
	__u32 zero = 0, port = 0, len = n < 96 ? n : 96, pre = 0, total;
	__u64 sk;
	int mlen;

	if (c && c->state == HC_NOT_HTTP)
		return 0;
	if (c && c->state != HC_IDLE && c->state != HC_PREFIX) {   /* more of the request (a body) */
		c->e.req_bytes += n;
		note_reading(c);
		return 0;
	}
	sk = tcp_sock_of(fd, &port);
	if (!sk || !(s = bpf_map_lookup_elem(&http_scratch, &zero)))
		return 0;
	if (c && c->state == HC_PREFIX) {
		pre = c->pre_len & (HTTP_PRE_MAX - 1);
		__builtin_memcpy(s->buf, c->pre, HTTP_PRE_MAX);   /* all of it: no loop */
	}
	/* the masks bound offset and size for the verifier; len is at most 96 */
	if (bpf_probe_read_user(s->buf + BOUNDED(pre, HTTP_PRE_MAX - 1), BOUNDED(len, 0x7f), (void *)ubuf))
		return 0;
	total = pre + len;
	if (!c) {
		struct http_conn *fresh = bpf_map_lookup_elem(&http_zero, &zero);

		if (!fresh || bpf_map_update_elem(&http_conns, &key, fresh, BPF_NOEXIST) ||
		    !(c = bpf_map_lookup_elem(&http_conns, &key))) {
			COUNT(http_table_full);
			return 0;
		}
	} else if (c->state == HC_IDLE && c->e.sock != sk) {
		c->e.seq = 0;   /* the fd now names another socket */
	}
	if (c->state != HC_PREFIX) {   /* a new request: its clock starts at its first piece */
		start_request(c, sk, port, now);
		c->e.req_bytes = 0;
	}
	c->e.req_bytes += n;
	mlen = method_len(s->buf);
	if (line_unfinished(s->buf, mlen, total)) {
		__builtin_memcpy(c->pre, s->buf, HTTP_PRE_MAX);
		c->pre_len = total;
		c->state = HC_PREFIX;
		return 0;
	}
	if (!mlen) {
		COUNT_N(http_tls, s->buf[0] == 0x16);   /* a TLS handshake record */
		COUNT_N(http_unparsed, s->buf[0] != 0x16);
		c->state = HC_NOT_HTTP;
		return 0;
	}
	parse_request_line(c, s->buf, mlen, total);
	c->no_body = s->buf[0] == 'H';   /* HEAD */
	c->state = HC_REQUEST;
	note_reading(c);
	return 0;
}

/* ---- the response, scanned as it is written ---- */

struct scan {
	struct http_conn *c;
	const char *buf;
	__u32 n;
	__u32 base;     /* where the body starts in this write */
	__u32 body;     /* body bytes in this write */
	__u32 nstarts;  /* header lines begun in this write */
	__u32 starts[32];
	__u64 now;
};

/* buf at i starts with the lower-case word (case-insensitively). */
static __always_inline int starts_with(const char *buf, __u32 i, const char *word, int len)
{
	for (int k = 0; k < len; k++) {
		char ch = buf[(i + k) & SCAN_MASK];

		if (ch >= 'A' && ch <= 'Z')
			ch += 'a' - 'A';
		if (ch != word[k])
			return 0;
	}
	return 1;
}

/* The offset of a header value: past the name and any spaces. */
static __always_inline __u32 value_at(const char *buf, __u32 i)
{
	for (int k = 0; k < 8 && buf[i & SCAN_MASK] == ' '; k++)
		i++;
	return i;
}

static __always_inline __s64 value_number(const char *buf, __u32 i)
{
	__s64 v = 0;
	int digits = 0;

	for (int k = 0; k < 20; k++) {
		char ch = buf[(i + k) & SCAN_MASK];

		if (ch < '0' || ch > '9')
			break;
		v = v * 10 + (ch - '0');
		digits++;
	}
	return digits ? v : -1;
}

/* Header line i of this write: the three that tell where the body ends. */
static long header_line(__u64 j, void *ctx)
{
	struct scan *sc = ctx;
	struct http_conn *c = sc->c;
	__u32 i = sc->starts[j & 31];

	if (starts_with(sc->buf, i, "content-type:", 13)) {
		if (starts_with(sc->buf, value_at(sc->buf, i + 13), "text/event-stream", 17))
			c->e.flags |= HTTP_F_SSE;
	} else if (starts_with(sc->buf, i, "transfer-encoding:", 18)) {
		if (starts_with(sc->buf, value_at(sc->buf, i + 18), "chunked", 7))
			c->e.flags |= HTTP_F_CHUNKED;
	} else if (starts_with(sc->buf, i, "content-length:", 15)) {
		__s64 v = value_number(sc->buf, value_at(sc->buf, i + 15));

		if (v >= 0) {
			c->e.flags |= HTTP_F_LENGTH;
			c->body_left = v;
		}
	}
	return 0;
}

/* The headers, byte by byte to their blank line: where lines start. */
static long header_byte(__u64 i, void *ctx)
{
	struct scan *sc = ctx;
	struct http_conn *c = sc->c;
	char ch = sc->buf[i & SCAN_MASK];

	if (ch == '\n') {
		if (c->line_len == 0) {   /* the blank line: the headers end */
			c->state = HC_BODY;
			c->dmatch = 0;
			sc->base = i + 1;
			return 1;
		}
		c->line_len = 0;
	} else if (ch != '\r') {
		if (c->line_len == 0 && sc->nstarts < 32)
			sc->starts[sc->nstarts++ & 31] = i;
		c->line_len++;
	}
	return 0;
}

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

/* An event-stream body: "data:" at a line's start is one event. */
static long body_byte(__u64 i, void *ctx)
{
	struct scan *sc = ctx;
	struct http_conn *c = sc->c;
	char ch = sc->buf[(sc->base + i) & SCAN_MASK];

	if (ch == '\n') {
		c->dmatch = 0;
	} else if (c->dmatch < 5) {
		if (ch == "data:"[c->dmatch & 7]) {
			if (++c->dmatch == 5)
				count_event(c, sc->now);
		} else {
			c->dmatch = 6;
		}
	}
	return 0;
}

/* The status line's code, on the response's first write. */
static __always_inline void response_start(struct http_conn *c, const char *buf, __u64 now)
{
	__u32 code = 0;

	c->e.resp_ns = now;
	c->state = HC_HEADERS;
	c->line_len = 0;
	if (buf[0] == 'H' && buf[1] == 'T' && buf[2] == 'T' && buf[3] == 'P' && buf[4] == '/')
		for (int k = 9; k < 12; k++)
			if (buf[k] >= '0' && buf[k] <= '9')
				code = code * 10 + (buf[k] - '0');
	c->e.status = code;
	if ((code >= 100 && code < 200) || code == 204 || code == 304)
		c->no_body = 1;
}

/* Has the response ended with this write? */
static __always_inline int response_done(struct http_conn *c)
{
	if (c->state != HC_BODY)
		return 0;
	if (c->no_body)
		return 1;
	if (c->e.flags & HTTP_F_LENGTH)
		return c->body_left <= 0;
	/* the last chunk: "\n0\r\n\r\n" (after the previous chunk's CRLF or the headers) */
	return (c->e.flags & HTTP_F_CHUNKED) && (c->tail & 0xffffffffffffull) == 0x0a300d0a0d0aull;
}

/* n bytes written from user memory at ubuf. A global function, checked
 * once, not once per iovec it is called for. */
__noinline int http_written(struct http_conn *c, __u64 ubuf, __u64 n, __u64 now)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&http_scratch, &zero);
	struct scan sc = { .c = c, .now = now };
	__u8 last[16] = {};
	__u32 k = n < 8 ? n : 8, len = n < SCAN_MASK ? n : SCAN_MASK;

	if (!c || !s || !len)
		return 0;
	sc.n = len;
	sc.buf = s->buf;
	if (bpf_probe_read_user(s->buf, BOUNDED(len, SCAN_MASK), (void *)ubuf))
		return 0;
	if (c->state == HC_REQUEST)
		response_start(c, s->buf, now);
	if (c->state == HC_HEADERS) {
		sc.base = n;   /* no body in this write unless the headers end in it */
		bpf_loop(sc.n, header_byte, &sc, 0);
		bpf_loop(sc.nstarts, header_line, &sc, 0);
	}
	if (c->state == HC_BODY && sc.base <= n) {
		__u32 before = c->e.events;
		__u64 last = c->e.last_event_ns;

		if ((c->e.flags & HTTP_F_SSE) && sc.base < sc.n)
			bpf_loop(sc.n - sc.base, body_byte, &sc, 0);
		/* the gaps to this write's events, into the histogram here and
		 * not per byte (the verifier's cost): the first from the last
		 * write's, the rest 0 */
		if (before && c->e.events > before)
			agg_add_n(current_tgid(), AGG_KIND_HTTP_ITL, LAYER_NONE, now - last, c->e.events - before, 0);
		sc.body = n - sc.base;   /* past what was scanned: counted, not read */
	}
	c->e.resp_bytes += n;
	c->body_left -= sc.body;
	if (k && !bpf_probe_read_user(last, BOUNDED(k, 0xf), (void *)(ubuf + n - k))) {
		for (__u32 j = 0; j < 8 && j < k; j++)
			c->tail = (c->tail << 8) | last[j];
	}
	if (c->state == HC_BODY && c->no_body && c->e.status >= 100 && c->e.status < 200) {
		c->state = HC_REQUEST;   /* an interim response: the real one follows */
		c->no_body = 0;
		c->e.flags &= ~(HTTP_F_SSE | HTTP_F_CHUNKED | HTTP_F_LENGTH);
		return 0;
	}
	if (response_done(c)) {
		http_send(current_tgid(), c, HTTP_END_RESPONSE, now);
		c->state = HC_IDLE;
	}
	return 0;
}

/* A global function: the verifier checks it once, on its own. */
__noinline int http_on_write(struct http_call *call, __s64 ret, __u64 now)
{
	struct http_conn_key key = { .tgid = current_tgid() };
	struct http_conn *c;
	struct iovec iov[HTTP_IOV_MAX] = {};
	__u64 left = ret, iovp, arg;
	__u32 niov, kind;

	if (!call)
		return 0;
	key.fd = call->fd;
	arg = iovp = call->arg;
	niov = call->niov;
	kind = call->kind;
	c = bpf_map_lookup_elem(&http_conns, &key);

	if (!c || (c->state != HC_REQUEST && c->state != HC_HEADERS && c->state != HC_BODY))
		return 0;
	if (ret < 0) {
		if (ret == -32 || ret == -104) {   /* EPIPE, ECONNRESET: the client went away */
			http_send(key.tgid, c, HTTP_END_RESET, now);
			c->state = HC_IDLE;
		}
		return 0;
	}
	if (kind == CALL_WRITE) {
		http_written(c, arg, ret, now);
		return 0;
	}
	if (kind == CALL_SENDMSG) {
		struct user_msghdr msg;

		if (bpf_probe_read_user(&msg, sizeof(msg), (void *)arg))
			return 0;
		iovp = (__u64)msg.msg_iov;
		niov = msg.msg_iovlen;
	}
	if (bpf_probe_read_user(iov, sizeof(iov), (void *)iovp))
		return 0;
	for (int i = 0; i < HTTP_IOV_MAX && i < niov && left; i++) {
		__u64 len = iov[i].iov_len < left ? iov[i].iov_len : left;

		http_written(c, (__u64)iov[i].iov_base, len, now);
		left -= len;
		if (c->state == HC_IDLE)
			return 0;
	}
	if (left)   /* past the iovecs looked at: counted */
		c->e.resp_bytes += left;
	return 0;
}

static __always_inline void on_close(__u32 tgid, __u32 fd, __u64 now)
{
	struct http_conn_key key = { .tgid = tgid, .fd = fd };
	struct http_conn *c = bpf_map_lookup_elem(&http_conns, &key);

	if (!c)
		return;
	if (c->state == HC_REQUEST || c->state == HC_HEADERS || c->state == HC_BODY)
		http_send(key.tgid, c, HTTP_END_CLOSE, now);
	else if (c->state == HC_PREFIX)   /* closed before a whole request line came */
		COUNT(http_unparsed);
	bpf_map_delete_elem(&http_arrivals, &c->e.sock);
	bpf_map_delete_elem(&http_conns, &key);
}

/* ---- the programs ---- */

SEC("raw_tp/sys_enter")
int http_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	struct pt_regs *regs = (void *)ctx->args[0];
	long id = (long)ctx->args[1];
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct http_call call = {};
	__u32 tgid = http_target();

	if (!tgid || detaching)
		return 0;
	switch (id) {
	case NR_recvfrom:
		if (reg_arg(regs, 4) & 2)   /* MSG_PEEK: a look, not a read (cpp-httplib's keep-alive check) */
			return 0;
		/* fall through */
	case NR_read:
		call.kind = CALL_READ;
		break;
	case NR_write:
	case NR_sendto:
		call.kind = CALL_WRITE;
		break;
	case NR_writev:
		call.kind = CALL_WRITEV;
		call.niov = reg_arg(regs, 3);
		break;
	case NR_sendmsg:
		call.kind = CALL_SENDMSG;
		break;
	case NR_close:
		on_close(tgid, reg_arg(regs, 1), bpf_ktime_get_ns());
		return 0;
	default:
		return 0;
	}
	call.fd = reg_arg(regs, 1);
	call.arg = reg_arg(regs, 2);
	bpf_map_update_elem(&http_calls, &tid, &call, BPF_ANY);
	return 0;
}

SEC("raw_tp/sys_exit")
int http_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__s64 ret = (__s64)ctx->args[1];
	struct http_call *p, call;
	__u64 now;

	if (!http_target() || !(p = bpf_map_lookup_elem(&http_calls, &tid)))
		return 0;
	call = *p;
	bpf_map_delete_elem(&http_calls, &tid);
	now = bpf_ktime_get_ns();
	if (call.kind == CALL_READ) {
		if (ret > 0)
			http_on_read(call.fd, call.arg, ret, now);
	} else {
		http_on_write(&call, ret, now);
	}
	return 0;
}

/* A segment with data on an established socket of a port we serve: the
 * first one since the last read starts the next request's clock. */
SEC("raw_tp/tcp_probe")
int http_tcp_probe(struct bpf_raw_tracepoint_args *ctx)
{
	struct sock *sk = (void *)ctx->args[0];
	struct sk_buff *skb = (void *)ctx->args[1];
	__u32 port = BPF_CORE_READ(sk, __sk_common.skc_num);
	__u64 key = (__u64)sk, now;
	unsigned char *head;
	__u16 th;
	__u8 doff = 0;

	if (!bpf_map_lookup_elem(&http_ports, &port))
		return 0;
	head = BPF_CORE_READ(skb, head);
	th = BPF_CORE_READ(skb, transport_header);
	if (bpf_probe_read_kernel(&doff, 1, head + th + 12))
		return 0;
	if (BPF_CORE_READ(skb, len) <= (__u32)(doff >> 4) * 4)
		return 0;   /* no payload: an ACK */
	now = bpf_ktime_get_ns();
	bpf_map_update_elem(&http_arrivals, &key, &now, BPF_NOEXIST);
	return 0;
}

SEC("raw_tp/inet_sock_set_state")
int http_sock_state(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 key = ctx->args[0];

	if ((int)ctx->args[2] == 7 /* TCP_CLOSE */)
		bpf_map_delete_elem(&http_arrivals, &key);
	return 0;
}
