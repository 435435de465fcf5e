/* userspans_attach.c - attaches the --span table (core/userspans.h) to the
 * programs of bpf/userspans.bpf.h, the span kind in each link's cookie. */
#include "core/userspans.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "core/session.h"
#include "spantrace.h"
#include "spantrace.skel.h"

/* One end (end != 0) or begin of span i. */
static struct bpf_link *attach_one(struct spantrace_bpf *sk, size_t i, int end, pid_t pid)
{
	const struct user_span *u = user_span_get(i);
	__u64 cookie = user_span_kind(i);

	if (u->type == US_UPROBE) {
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = u->func, .retprobe = end != 0, .bpf_cookie = cookie);
		return bpf_program__attach_uprobe_opts(end ? sk->progs.user_fn_return : sk->progs.user_fn_entry,
						       pid, u->path, 0, &uo);
	}
	LIBBPF_OPTS(bpf_usdt_opts, so, .usdt_cookie = cookie);
	return bpf_program__attach_usdt(end ? sk->progs.user_usdt_end : sk->progs.user_usdt_begin, pid, u->path,
					u->func, end ? u->end : u->begin, &so);
}

int user_spans_attach(struct session *s, pid_t pid, char *err, size_t errlen)
{
	for (int end = 1; end >= 0; end--) {
		for (size_t i = 0; i < user_span_count(); i++) {
			struct bpf_link *link = attach_one(s->skel, i, end, pid);

			if (!link) {
				const struct user_span *u = user_span_get(i);
				snprintf(err, errlen, "--span %s: cannot attach %s in %s: %s", u->name,
					 u->type == US_UPROBE ? u->func : (end ? u->end : u->begin), u->path,
					 strerror(errno));
				return -1;
			}
			if (session_add_link(s, link)) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
		}
	}
	return 0;
}
