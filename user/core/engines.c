/* engines.c - engine profiles (see engines.h): the llama.cpp table, where
 * its objects are, and the plan of what to attach where (the session
 * attaches it: core/session_attach.c). */
#include "core/engines.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/stapsdt.h"
#include "core/target.h"
#include "spantrace.h"

/* ---- the llama.cpp profile ---- */

enum engine_object { OBJ_LLAMA, OBJ_GGML };

struct engine_fn {
	enum engine_object obj;
	const char *funcs;       /* the function, then older names: "new|old|older" */
	enum engine_role role;
	unsigned kind;           /* FN_SPAN, FN_DECODE, FN_TOKENIZE: enum span_kind */
};

/* The rows of spantrace/llamacpp.def. */
static const struct engine_fn llamacpp_fns[] = {
#define FUNCTION(obj, names, role, kind, measures, doc) { OBJ_##obj, names, FN_##role, SPAN_##kind },
#include "spantrace/llamacpp.def"
#undef FUNCTION
};

#define NFNS (sizeof(llamacpp_fns) / sizeof(llamacpp_fns[0]))

/* llama_batch on x86-64 System V: 56 bytes, so passed in memory, just above
 * the return address at the entry. GGML_BACKEND_BUFFER_USAGE_WEIGHTS = 1,
 * _COMPUTE = 2. */
static const struct engine_abi llamacpp_abi = {
	.batch_stack_off = 8, .batch_size = 56,
	.b_n_tokens = 0, .b_token = 8, .b_embd = 16, .b_pos = 24, .b_n_seq_id = 32, .b_seq_id = 40,
	.b_logits = 48,
	.usage_weights = 1, .usage_compute = 2,
	.max_batch_tokens = 8192,
};

struct engine_abi engine_abi_of(enum engine_id e)
{
	static const struct engine_abi none;

	return e == ENGINE_LLAMACPP ? llamacpp_abi : none;
}

/* ---- where llama.cpp is ---- */

int engine_llamacpp_in_file(const char *path, struct target *t)
{
	if (!elf_has_function(path, "llama_decode"))
		return -1;
	snprintf(t->elf, sizeof(t->elf), "%s", path);
	snprintf(t->shown, sizeof(t->shown), "%s", path);
	/* ggml's backend functions: libggml-base beside libllama, or in the
	 * same file when it is static */
	if (!t->base[0]) {
		const char *slash = strrchr(path, '/');
		int dir = slash ? (int)(slash - path + 1) : 0;

		snprintf(t->base, sizeof(t->base), "%.*slibggml-base.so", dir, path);
	}
	if (!elf_has_function(t->base, "ggml_backend_buft_alloc_buffer"))
		snprintf(t->base, sizeof(t->base), "%s", path);
	elf_build_id(path, t->build_id);
	t->engine = ENGINE_LLAMACPP;
	return 0;
}

/* A mapped library's file by its path in the process's root when that is
 * the same inode: a map_files range can vanish while the dynamic linker is
 * still mapping the library's segments (seen in host mode's scans). */
static void stable_path(pid_t pid, char *elf, size_t size, const char *shown)
{
	char root[PATH_MAX + 32];
	struct stat a, b;

	if ((size_t)snprintf(root, sizeof(root), "/proc/%d/root%s", (int)pid, shown) < size &&
	    !stat(root, &a) && !stat(elf, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		memcpy(elf, root, strlen(root) + 1);
}

int engine_llamacpp_in_pid(pid_t pid, struct target *t)
{
	char elf[PATH_MAX], shown[PATH_MAX], exe[64];
	ssize_t n;

	t->base[0] = 0;
	if (!target_mapped_lib(pid, "libggml-base", elf, sizeof(elf), shown, sizeof(shown))) {
		stable_path(pid, elf, sizeof(elf), shown);
		snprintf(t->base, sizeof(t->base), "%s", elf);
	}
	/* "libllama." and not "libllama-common": the library, not its helpers */
	if (!target_mapped_lib(pid, "libllama.", elf, sizeof(elf), shown, sizeof(shown)) &&
	    (stable_path(pid, elf, sizeof(elf), shown), !engine_llamacpp_in_file(elf, t))) {
		snprintf(t->shown, sizeof(t->shown), "%s", shown);
		return 0;
	}
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	if (engine_llamacpp_in_file(exe, t))
		return -1;
	n = readlink(exe, shown, sizeof(shown) - 1);
	if (n > 0) {
		shown[n] = 0;
		snprintf(t->shown, sizeof(t->shown), "%s", shown);
	}
	return 0;
}

/* ---- the plan: the profile resolved in a target's files ---- */

/* The first of funcs' names ("new|old") that syms defines, into buf (its
 * code's file offset in *off); NULL if none. */
static const char *resolve(const struct elf_syms *syms, const char *funcs, char *buf, size_t size, uint64_t *off)
{
	const char *p = funcs;

	while (*p) {
		size_t n = strcspn(p, "|");

		if (n < size) {
			memcpy(buf, p, n);
			buf[n] = 0;
			if ((*off = elf_sym_offset(syms, buf)))
				return buf;
		}
		p += n + (p[n] == '|');
	}
	return NULL;
}

static void note_missing(struct engine_plan *p, const char *funcs)
{
	size_t used = strlen(p->missing), n = strcspn(funcs, "|");

	snprintf(p->missing + used, sizeof(p->missing) - used, "%s%.*s", used ? "," : "", (int)n, funcs);
}

static void plan_fill(const struct target *t, struct elf_syms *const syms[2], struct engine_plan *p)
{
	for (size_t i = 0; i < NFNS && p->n < ENGINE_HOOKS_MAX; i++) {
		const struct engine_fn *f = &llamacpp_fns[i];
		struct engine_hook *h = &p->hooks[p->n];

		if (!resolve(syms[f->obj], f->funcs, h->func, sizeof(h->func), &h->off)) {
			note_missing(p, f->funcs);
			continue;
		}
		h->path = f->obj == OBJ_LLAMA ? t->elf : t->base;
		h->role = f->role;
		h->kind = f->kind;
		p->n++;
	}
}

int engine_plan(const struct target *t, struct engine_plan *p, char *err, size_t errlen)
{
	struct elf_syms *syms[2] = { elf_syms_open(t->elf), NULL };
	int rc = 0;

	memset(p, 0, sizeof(*p));
	syms[OBJ_GGML] = strcmp(t->base, t->elf) ? elf_syms_open(t->base) : syms[OBJ_LLAMA];
	if (!syms[OBJ_LLAMA] || !syms[OBJ_GGML]) {
		snprintf(err, errlen, "cannot read the symbols of %s", !syms[OBJ_LLAMA] ? t->elf : t->base);
		rc = -1;
	} else {
		plan_fill(t, syms, p);
	}
	if (syms[OBJ_GGML] != syms[OBJ_LLAMA])
		elf_syms_close(syms[OBJ_GGML]);
	elf_syms_close(syms[OBJ_LLAMA]);
	return rc;
}
