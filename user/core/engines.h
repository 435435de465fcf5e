/* engines.h - which engine a target runs, and the profiles of engines
 * traced through their exported functions rather than our probes.
 *
 * An engine profile is data (engines.c): each row names an exported
 * function (with older names as alternatives), the object it lives in, and
 * its role (spantrace.h enum engine_role); bpf/engines.bpf.h does the rest.
 * A function a build lacks is skipped and listed, never guessed. */
#ifndef SPANTRACE_ENGINES_H
#define SPANTRACE_ENGINES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include "spantrace.h"

enum engine_id {
	ENGINE_AUTO = 0,     /* not chosen: found from the target */
	ENGINE_INFER,        /* ours: the `infer` USDT probes */
	ENGINE_LLAMACPP,     /* llama.cpp: libllama + ggml, or one static executable */
	ENGINE_NONE,         /* --engine none: no engine probes; the sockets only (--http) */
	ENGINE_COUNT
};

static const char *const engine_names[ENGINE_COUNT] = { "auto", "infer", "llamacpp", "none" };

/* "auto", "infer", "llamacpp", "none". */
static inline const char *engine_name(enum engine_id e)
{
	return (unsigned)e < ENGINE_COUNT ? engine_names[e] : "unknown";
}

/* The --engine argument; -1 on anything else. Inline, so that option
 * parsers (and their fuzzers) need nothing of the attach side. */
static inline int engine_parse(const char *s, enum engine_id *out)
{
	for (unsigned e = 0; e < ENGINE_COUNT; e++)
		if (!strcmp(s, engine_names[e])) {
			*out = (enum engine_id)e;
			return 0;
		}
	return -1;
}

struct target;

/* llama.cpp in a running process: a mapped libllama (and libggml-base
 * beside it), or an executable that defines llama_decode. Fills t->elf,
 * t->shown, t->base, t->build_id and t->engine. 0, or -1 when absent. */
int engine_llamacpp_in_pid(pid_t pid, struct target *t);
/* The same for a file: a static executable or libllama itself. */
int engine_llamacpp_in_file(const char *path, struct target *t);

/* The knobs a profile's programs read (bpf/spantrace.h struct engine_abi;
 * the session sets them before load). */
struct engine_abi engine_abi_of(enum engine_id e);

/* One function of a profile, found in a target's files: attach a uprobe
 * (and a uretprobe, as its role wants) at path + off with cookie
 * ENGINE_COOKIE(role, kind). */
struct engine_hook {
	const char *path;        /* t->elf or t->base */
	char func[64];
	uint64_t off;            /* its code's file offset */
	unsigned role, kind;     /* enum engine_role, enum span_kind */
};

#define ENGINE_HOOKS_MAX 32

struct engine_plan {
	struct engine_hook hooks[ENGINE_HOOKS_MAX];
	size_t n;
	char missing[512];       /* functions the build lacks: "a,b" */
};

/* The profile of t (llama.cpp) resolved in t->elf and t->base, each file's
 * symbols read once. 0, or -1 with err set (unreadable symbols). */
int engine_plan(const struct target *t, struct engine_plan *p, char *err, size_t errlen);

#endif
