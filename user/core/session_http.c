/* session_http.c - --http in the session (see session.h): which of its
 * programs load, its tracepoints, and the processes and listening ports
 * it watches (one pid, its tree, every process of a binary), and why a
 * watched tree has shown no request yet. */
#include "core/session_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "core/log.h"
#include "core/fleet.h"
#include "core/listen_ports.h"
#include "core/maps.h"
#include "core/proctree.h"
#include "core/features.h"

/* When a request's bytes reached the socket: sk_data_ready where the
 * kernel has it (once per read), else tcp_probe (once per segment, ACKs
 * too). used = 0: the one left out. */
static struct bpf_program *http_arrival_prog(struct session *s, int used)
{
	int ready = feature_present(FEAT_SK_DATA_READY) > 0;

	return ready == !!used ? s->skel->progs.http_data_ready : s->skel->progs.http_tcp_probe;
}

/* --http's programs (bpf/http.bpf.c: http_*) are verified and loaded only
 * when asked for; without them their maps shrink to one entry. */
int session_http_set_autoload(struct session *s, int on)
{
	struct bpf_map *maps[] = { s->skel->maps.http_conns, s->skel->maps.http_arrivals,
				   s->skel->maps.http_pending, s->skel->maps.http_pids,
				   s->skel->maps.http_reading, s->skel->maps.http_engine_reqs };
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, s->skel->obj)
		if (!strncmp(bpf_program__name(prog), "http_", 5))
			bpf_program__set_autoload(prog, on);
	if (on)   /* one clock for a request's arrival, not both */
		bpf_program__set_autoload(http_arrival_prog(s, 0), false);
	for (size_t i = 0; !on && i < sizeof(maps) / sizeof(maps[0]); i++)
		if (bpf_map__set_max_entries(maps[i], 1))
			return -1;
	return 0;
}

/* --http's raw tracepoints, once per session. */
static int attach_http(struct session *s, char *err, size_t errlen)
{
	struct bpf_program *progs[] = { s->skel->progs.http_recv, s->skel->progs.http_send_length,
					http_arrival_prog(s, 1), s->skel->progs.http_sock_state,
					s->skel->progs.http_fork };

	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		struct bpf_link *link = bpf_program__attach(progs[i]);

		if (!link || session_add_link(s, link)) {
			snprintf(err, errlen, "--http: cannot attach %s: %s", bpf_program__name(progs[i]),
				 strerror(errno));
			return -1;
		}
	}
	s->http_attached = 1;
	return 0;
}

/* Bit i of one of the programs' bit arrays (http_pid_bits in
 * reqlink.bpf.h, http_port_bits in http.bpf.h: shared memory), of nbits,
 * set or cleared. */
static void watch_bit(__u64 *bits, uint32_t nbits, uint32_t i, int on)
{
	if (i >= nbits)
		return;
	if (on)
		__atomic_fetch_or(&bits[i / 64], 1ull << (i % 64), __ATOMIC_SEQ_CST);
	else
		__atomic_fetch_and(&bits[i / 64], ~(1ull << (i % 64)), __ATOMIC_SEQ_CST);
}

/* One process's sockets, in root's tree, and the ports it listens on, so
 * that the first request on each new connection is timed from its
 * arrival too. */
static int watch_one(struct session *s, pid_t pid, pid_t root, char *err, size_t errlen)
{
	struct http_watch w = { .root = (uint32_t)root, .flags = s->http_alone ? 0 : HTTP_W_TREE };
	uint32_t ports[64], key = (uint32_t)pid;
	int n;

	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.http_pids), &key, &w, BPF_ANY)) {
		if (err)
			snprintf(err, errlen, "--http: cannot watch pid %d: %s", (int)pid, strerror(errno));
		return -1;
	}
	watch_bit(s->skel->bss->http_pid_bits, HTTP_PID_BITS, key, 1);
	n = http_listening_ports(pid, ports, 64);
	for (int i = 0; i < n; i++)
		watch_bit(s->skel->bss->http_port_bits, HTTP_PORT_BITS, ports[i], 1);
	st_debug("--http: %d listening port(s) of pid %d (tree %d)", n < 0 ? 0 : n, (int)pid, (int)root);
	return 0;
}

int session_http_watch(struct session *s, pid_t pid, char *err, size_t errlen)
{
	pid_t kids[HTTP_TREE_MAX];
	int n;

	if (!s->http || pid <= 0)
		return 0;
	if (!s->http_attached && attach_http(s, err, errlen))
		return -1;
	if (watch_one(s, pid, pid, err, errlen))
		return -1;
	if (s->http_alone)
		return 0;
	/* the children it has now (a pre-fork server's workers); those it
	 * forks from here on the kernel adds itself (http_fork). One gone
	 * meanwhile is no error. */
	n = proctree_descendants(pid, kids, HTTP_TREE_MAX);
	for (int i = 0; i < n; i++)
		watch_one(s, kids[i], pid, NULL, 0);
	return 0;
}

struct binary_watch {
	struct session *s;
	struct stat st;     /* the binary's inode */
	int failed;
	char *err;
	size_t errlen;
};

static void watch_pid(struct binary_watch *w, pid_t pid)
{
	/* one failure is told; the pass goes on for the others */
	if (session_http_watch(w->s, pid, w->failed ? NULL : w->err, w->failed ? 0 : w->errlen))
		w->failed = 1;
}

/* A process that maps the binary (a library with our probes) */
static void watch_if_binary(void *ctx, const struct fleet_proc *p)
{
	struct binary_watch *w = ctx;

	if (p->dev == w->st.st_dev && p->ino == w->st.st_ino)
		watch_pid(w, p->pid);
}

/* A process whose executable it is (any server: nginx, a Python) */
static void watch_exe(void *ctx, pid_t pid)
{
	watch_pid(ctx, pid);
}

int session_http_watch_binary(struct session *s, const char *elf, char *err, size_t errlen)
{
	static const struct fleet_callbacks cb = { NULL, watch_if_binary };
	struct binary_watch w = { .s = s, .err = err, .errlen = errlen };

	if (!s->http || !elf || !elf[0])
		return 0;
	if (stat(elf, &w.st)) {
		snprintf(err, errlen, "--http: %s: %s", elf, strerror(errno));
		return -1;
	}
	/* new processes only: each is watched once, as the fleet first sees it */
	if (!s->http_fleet && !(s->http_fleet = fleet_new(INFER_PROVIDER))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* every 30th pass looks at every process again: one that maps the
	 * binary late (dlopen) is found then */
	if (fleet_scan(s->http_fleet, &cb, &w, 30) || proctree_each_exe(&w.st, watch_exe, &w)) {
		snprintf(err, errlen, "--http: scanning /proc: %s", strerror(errno));
		return -1;
	}
	return w.failed ? -1 : 0;
}

int session_http_watch_more(struct session *s, const pid_t *pids, unsigned n, char *err, size_t errlen)
{
	for (unsigned i = 0; i < n; i++)
		if (session_http_watch(s, pids[i], err, errlen))
			return -1;
	return 0;
}

/* Why pid's tree has shown no HTTP request yet: one line, or 0 when it
 * has (or when nothing can be said). */
int session_http_silence(struct session *s, pid_t pid, char *why, size_t len)
{
	pid_t kids[HTTP_TREE_MAX];
	uint32_t ports[8];
	struct counters c;
	int n, nkids;

	if (!s->http_attached || s->delivered[EV_HTTP])
		return 0;
	maps_read_counters(s, &c);
	n = http_listening_ports(pid, ports, 8);
	nkids = s->http_alone ? 0 : proctree_descendants(pid, kids, HTTP_TREE_MAX);
	if (c.http_tls || c.http_h2)
		snprintf(why, len, "--http: pid %d's connections were %s (%llu), and nothing else: their requests "
			 "are not HTTP/1.x in the clear", (int)pid, c.http_tls ? "TLS" : "HTTP/2",
			 (unsigned long long)(c.http_tls ? c.http_tls : c.http_h2));
	else if (n <= 0 && nkids <= 0)
		snprintf(why, len, "--http: pid %d listens on no TCP port and has no children: no request of "
			 "its can be seen (is it the server?)", (int)pid);
	else if (n > 0 && s->http_alone)
		snprintf(why, len, "--http: pid %d listens on port %u but read no request (a pre-fork master "
			 "whose workers accept? --no-children leaves them out)", (int)pid, ports[0]);
	else if (n > 0)
		snprintf(why, len, "--http: no HTTP request yet in pid %d's tree (%d child process%s), which "
			 "listens on port %u: idle, or another process accepts its connections", (int)pid,
			 nkids < 0 ? 0 : nkids, nkids == 1 ? "" : "es", ports[0]);
	else
		snprintf(why, len, "--http: no HTTP request yet in pid %d's tree (%d child process%s, none of "
			 "the tree's listening sockets its own): idle, or not the server", (int)pid,
			 nkids < 0 ? 0 : nkids, nkids == 1 ? "" : "es");
	return 1;
}

/* A watched process is gone: its pid may come back as another program. */
void session_http_unwatch(struct session *s, pid_t pid)
{
	uint32_t key = (uint32_t)pid;

	if (s->http_attached) {
		bpf_map_delete_elem(bpf_map__fd(s->skel->maps.http_pids), &key);
		watch_bit(s->skel->bss->http_pid_bits, HTTP_PID_BITS, key, 0);
	}
}
