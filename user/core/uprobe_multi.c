/* uprobe_multi.c - the smallest shim for uprobe_multi USDT links (see
 * uprobe_multi.h): raw BPF_LINK_CREATE, x86-64 USDT argument specs in the
 * layout of libbpf's usdt.bpf.h, semaphores as reference counters. */
#include "core/uprobe_multi.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "core/log.h"
#include "core/stapsdt.h"

/* From the kernel's UAPI (6.6+); Debian 12's linux/bpf.h predates them. */
#define UM_ATTACH_TYPE 48 /* BPF_TRACE_UPROBE_MULTI */
#define UM_MAX_ARGS 12    /* BPF_USDT_MAX_ARG_CNT in usdt.bpf.h */
#define UM_F_RETURN 1     /* BPF_F_UPROBE_MULTI_RETURN */

enum { UM_ARG_CONST, UM_ARG_REG, UM_ARG_REG_DEREF }; /* enum __bpf_usdt_arg_type */

/* struct __bpf_usdt_arg_spec / __bpf_usdt_spec, as usdt.bpf.h lays them out;
 * the map's value size is checked against this at attach. */
struct um_arg {
	uint64_t val_off;
	int32_t arg_type;
	int16_t reg_off;
	uint8_t arg_signed;
	int8_t arg_bitshift;
};

struct um_spec {
	struct um_arg args[UM_MAX_ARGS];
	uint64_t usdt_cookie;
	int16_t arg_cnt;
};

/* link_create's uprobe_multi member of union bpf_attr. */
struct um_link_attr {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, um_flags, pid;
};

struct umulti {
	int enabled;
	int specs_fd;
	unsigned specs_max;
	struct um_spec *specs;  /* written so far; index = spec id = cookie */
	unsigned nspecs;
	int *fds;
	size_t nfds;
};

static int sys_link_create(const struct um_link_attr *la)
{
	union bpf_attr attr;

	_Static_assert(sizeof(struct um_link_attr) <= sizeof(union bpf_attr), "attr size");
	memset(&attr, 0, sizeof(attr));
	memcpy(&attr, la, sizeof(*la));
	return (int)syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
}

/* A kernel with uprobe_multi loads a kprobe program for it and then fails
 * a link on a directory with EBADF (it wants a regular file); one without
 * rejects the attach type with EINVAL. */
static int probe_kernel(void)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = UM_ATTACH_TYPE);
	uint64_t off = 0;
	struct um_link_attr la = { .attach_type = UM_ATTACH_TYPE, .path = (uintptr_t)"/",
				   .offsets = (uintptr_t)&off, .cnt = 1 };
	int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "um_probe", "GPL", insns, 2, &o);
	int lfd, ok;

	if (fd < 0)
		return 0;
	la.prog_fd = (uint32_t)fd;
	lfd = sys_link_create(&la);
	ok = lfd < 0 && errno == EBADF;
	if (lfd >= 0)
		close(lfd);
	close(fd);
	return ok;
}

int umulti_kernel_supported(void)
{
	static int cached = -1;

	if (cached < 0)
		cached = probe_kernel();
	return cached;
}

struct umulti *umulti_new(void)
{
	struct umulti *um = calloc(1, sizeof(*um));
	const char *off = getenv("SPANTRACE_NO_UPROBE_MULTI");

	if (!um)
		return NULL;
	um->specs_fd = -1;
	um->enabled = !(off && *off && strcmp(off, "0")) && umulti_kernel_supported();
	st_debug("USDT links: %s", um->enabled ? "uprobe_multi" : "one uprobe per site (libbpf)");
	return um;
}

void umulti_free(struct umulti *um)
{
	if (!um)
		return;
	umulti_detach(um);
	free(um->specs);
	free(um);
}

int umulti_enabled(const struct umulti *um)
{
	return um && um->enabled;
}

int umulti_prepare(struct bpf_program *const *progs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (bpf_program__set_expected_attach_type(progs[i], UM_ATTACH_TYPE))
			return -EINVAL;
	return 0;
}

int umulti_set_specs_map(struct umulti *um, struct bpf_object *obj, char *err, size_t errlen)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, "__bpf_usdt_specs");

	if (!m || bpf_map__value_size(m) != sizeof(struct um_spec)) {
		snprintf(err, errlen, "the BPF object's USDT spec map is not the layout this shim writes");
		return -1;
	}
	um->specs_fd = bpf_map__fd(m);
	um->specs_max = bpf_map__max_entries(m);
	um->specs = calloc(um->specs_max, sizeof(*um->specs));
	if (!um->specs) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* ---- x86-64 argument specs: "4@%edi", "-4@%r12d", "8@-16(%rbp)", "4@$5" ---- */

#define REG(n) offsetof(struct user_regs_struct, n) /* same prefix as pt_regs */

static int reg_offset(const char *name)
{
	static const struct {
		const char *names[4];
		short off;
	} regs[] = {
		{ { "rax", "eax", "ax", "al" }, REG(rax) }, { { "rbx", "ebx", "bx", "bl" }, REG(rbx) },
		{ { "rcx", "ecx", "cx", "cl" }, REG(rcx) }, { { "rdx", "edx", "dx", "dl" }, REG(rdx) },
		{ { "rsi", "esi", "si", "sil" }, REG(rsi) }, { { "rdi", "edi", "di", "dil" }, REG(rdi) },
		{ { "rbp", "ebp", "bp", "bpl" }, REG(rbp) }, { { "rsp", "esp", "sp", "spl" }, REG(rsp) },
		{ { "rip", "rip", "rip", "rip" }, REG(rip) },
	};
	static const short rn[] = { REG(r8), REG(r9), REG(r10), REG(r11),
				    REG(r12), REG(r13), REG(r14), REG(r15) };
	char *end;
	long n;

	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		for (int k = 0; k < 4; k++)
			if (!strcmp(name, regs[i].names[k]))
				return regs[i].off;
	if (name[0] != 'r')
		return -1;
	n = strtol(name + 1, &end, 10);
	if (end == name + 1 || n < 8 || n > 15 || (*end && strcmp(end, "d") && strcmp(end, "w") && strcmp(end, "b")))
		return -1;
	return rn[n - 8];
}

/* The location part after '@'; 0 or -1. */
static int parse_location(const char *s, struct um_arg *a)
{
	char reg[16], *end;
	long long v;
	int off;

	if (s[0] == '$') {
		v = strtoll(s + 1, &end, 0);
		a->arg_type = UM_ARG_CONST;
		a->val_off = (uint64_t)v;
		return end != s + 1 && !*end ? 0 : -1;
	}
	if (s[0] == '%') {
		if (sscanf(s + 1, "%15[a-z0-9]", reg) != 1 || strlen(reg) != strlen(s + 1))
			return -1;
		a->arg_type = UM_ARG_REG;
	} else {
		v = strtoll(s, &end, 0);   /* "(%reg)" has no offset: v = 0 */
		if (end[0] != '(' || end[1] != '%' || sscanf(end + 2, "%15[a-z0-9])", reg) != 1 ||
		    strcmp(end + 2 + strlen(reg), ")"))
			return -1;
		a->arg_type = UM_ARG_REG_DEREF;
		a->val_off = (uint64_t)v;
	}
	off = reg_offset(reg);
	if (off < 0)
		return -1;
	a->reg_off = (int16_t)off;
	return 0;
}

/* One "SIZE@LOCATION" word. */
static int parse_arg(const char *w, struct um_arg *a)
{
	char *end;
	long sz = strtol(w, &end, 10);

	memset(a, 0, sizeof(*a));
	if (*end != '@' || !(labs(sz) == 1 || labs(sz) == 2 || labs(sz) == 4 || labs(sz) == 8))
		return -1;
	a->arg_signed = sz < 0;
	a->arg_bitshift = (int8_t)(64 - labs(sz) * 8);
	return parse_location(end + 1, a);
}

static int parse_spec(const char *args, struct um_spec *sp)
{
	char buf[256], *save = NULL, *w;

	memset(sp, 0, sizeof(*sp));
	snprintf(buf, sizeof(buf), "%s", args);
	for (w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		if (sp->arg_cnt >= UM_MAX_ARGS || parse_arg(w, &sp->args[sp->arg_cnt]))
			return -1;
		sp->arg_cnt++;
	}
	return 0;
}

/* The spec's id: an identical one already written, or the next free slot.
 * Every build of the engine shares its specs, so re-attaches add none. */
static int spec_id(struct umulti *um, const struct um_spec *sp)
{
	unsigned id;

	for (id = 0; id < um->nspecs; id++)
		if (!memcmp(&um->specs[id], sp, sizeof(*sp)))
			return (int)id;
	if (um->nspecs >= um->specs_max)
		return -ENOSPC;
	if (bpf_map_update_elem(um->specs_fd, &id, sp, BPF_ANY))
		return -errno;
	memcpy(&um->specs[um->nspecs++], sp, sizeof(*sp));
	return (int)id;
}

static int add_fd(struct umulti *um, int fd)
{
	int *nf = realloc(um->fds, (um->nfds + 1) * sizeof(*nf));

	if (!nf)
		return -ENOMEM;
	um->fds = nf;
	um->fds[um->nfds++] = fd;
	return 0;
}

/* The sites of provider:probe as offsets, semaphores and cookies (spec ids). */
struct um_sites {
	uint64_t *offs, *refs, *cookies;
	unsigned n;
};

static int collect_sites(struct umulti *um, const struct sdt_list *l, const char *provider,
			 const char *probe, uint64_t usdt_cookie, struct um_sites *s, char *err, size_t errlen)
{
	struct um_spec sp;
	int id;

	s->offs = calloc(l->n + 1, sizeof(uint64_t));
	s->refs = calloc(l->n + 1, sizeof(uint64_t));
	s->cookies = calloc(l->n + 1, sizeof(uint64_t));
	if (!s->offs || !s->refs || !s->cookies)
		return -ENOMEM;
	for (size_t i = 0; i < l->n; i++) {
		const struct sdt_probe *p = &l->probes[i];
		if (strcmp(p->provider, provider) || strcmp(p->name, probe))
			continue;
		if (!p->pc_off || parse_spec(p->args, &sp)) {
			snprintf(err, errlen, "%s:%s: cannot use its site or arguments '%s'", provider, probe, p->args);
			return -EINVAL;
		}
		sp.usdt_cookie = usdt_cookie;
		if ((id = spec_id(um, &sp)) < 0) {
			snprintf(err, errlen, "cannot store the USDT spec of %s:%s: %s", provider, probe, strerror(-id));
			return id;
		}
		s->offs[s->n] = p->pc_off;
		s->refs[s->n] = p->sema_off;
		s->cookies[s->n++] = (uint64_t)id;
	}
	return s->n ? 0 : -ENOENT;
}

static int link_sites(struct umulti *um, int prog_fd, const char *elf, pid_t pid, const struct um_sites *s,
		      uint32_t flags)
{
	struct um_link_attr la = {
		.prog_fd = (uint32_t)prog_fd, .attach_type = UM_ATTACH_TYPE,
		.path = (uintptr_t)elf, .offsets = (uintptr_t)s->offs,
		.ref_ctr_offsets = (uintptr_t)s->refs, .cookies = (uintptr_t)s->cookies,
		.cnt = s->n, .um_flags = flags, .pid = pid > 0 ? (uint32_t)pid : 0,
	};
	int fd = sys_link_create(&la), rc;

	if (fd < 0)
		return -errno;
	if ((rc = add_fd(um, fd))) {
		close(fd);
		return rc;
	}
	return 0;
}

int umulti_attach(struct umulti *um, int prog_fd, const char *elf, pid_t pid, const char *provider,
		  const char *probe, uint64_t usdt_cookie, char *err, size_t errlen)
{
	struct sdt_list l;
	struct um_sites s = { 0 };
	int rc;

	if (sdt_read(elf, &l, err, errlen))
		return -EINVAL;
	rc = collect_sites(um, &l, provider, probe, usdt_cookie, &s, err, errlen);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	if (!rc && (rc = link_sites(um, prog_fd, elf, pid, &s, 0)))
		snprintf(err, errlen, "cannot attach %s:%s in %s: %s", provider, probe, elf, strerror(-rc));
	free(s.offs);
	free(s.refs);
	free(s.cookies);
	sdt_free(&l);
	return rc;
}

int umulti_attach_func(struct umulti *um, int prog_fd, const char *path, pid_t pid, uint64_t off, int retprobe,
		       uint64_t cookie)
{
	uint64_t ref = 0;
	struct um_sites s = { .offs = &off, .refs = &ref, .cookies = &cookie, .n = 1 };

	return link_sites(um, prog_fd, path, pid, &s, retprobe ? UM_F_RETURN : 0);
}

size_t umulti_nlinks(const struct umulti *um)
{
	return um ? um->nfds : 0;
}

static void *close_one(void *arg)
{
	close((int)(intptr_t)arg);
	return NULL;
}

/* Each close waits out an RCU grace period; from one thread per link they
 * overlap. Where a thread cannot start, the close happens inline. */
void umulti_detach(struct umulti *um)
{
	pthread_t *th;
	char *started;

	if (!um || !um->nfds)
		return;
	th = calloc(um->nfds, sizeof(*th));
	started = calloc(um->nfds, 1);
	for (size_t i = 0; i < um->nfds; i++)
		if (th && started && !pthread_create(&th[i], NULL, close_one, (void *)(intptr_t)um->fds[i]))
			started[i] = 1;
		else
			close(um->fds[i]);
	for (size_t i = 0; started && i < um->nfds; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	free(th);
	free(started);
	free(um->fds);
	um->fds = NULL;
	um->nfds = 0;
}
