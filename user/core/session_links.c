/* session_links.c - the links a session keeps (see session.h): each
 * attach's bpf_link, held until session_detach (session.c) destroys them
 * in reverse order. Below the attaches (session_attach.c) and --http's
 * (session_http.c), which both keep their links here. */
#include "core/session.h"

#include <stdlib.h>
#include <bpf/libbpf.h>

int session_add_link(struct session *s, struct bpf_link *link)
{
	struct bpf_link **nl = realloc(s->links, (s->nlinks + 1) * sizeof(*nl));

	if (!nl) {
		bpf_link__destroy(link);
		return -1;
	}
	s->links = nl;
	s->links[s->nlinks++] = link;
	return 0;
}
