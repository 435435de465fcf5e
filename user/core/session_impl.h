/* session_impl.h - the calls between the session's files and for nothing
 * else. They call downward only: session.c (open, load, read, detach,
 * close) reads the engine's probe table from session_attach.c (the
 * attaches) and sizes --http's programs through session_http.c (--http);
 * both keep their links in session_links.c. */
#ifndef SPANTRACE_SESSION_IMPL_H
#define SPANTRACE_SESSION_IMPL_H

#include <stddef.h>
#include "core/session.h"
#include "spantrace.skel.h"

struct engine_probe {
	struct bpf_program *prog;
	unsigned id;         /* enum probe_id: the row of spantrace/probes.def */
};

/* session_attach.c: the program of each row of probes.def. */
struct bpf_program *session_probe_program(const struct spantrace_bpf *sk, unsigned id);

/* session_attach.c: every row, in the order they are attached: every END,
 * then every MARK, then every BEGIN (probes.def says why). */
size_t session_engine_probes(const struct spantrace_bpf *sk, struct engine_probe out[PROBE_ID_COUNT]);

/* session_http.c: --http's programs (bpf/http.bpf.c: http_*) are verified
 * and loaded only when asked for; without them their maps shrink to one
 * entry. */
int session_http_set_autoload(struct session *s, int on);

#endif
