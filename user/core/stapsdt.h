/* stapsdt.h - reads USDT (.note.stapsdt) probes and the build id from an ELF
 * file with libelf, and finds which ELF of a program holds a provider's
 * probes (the executable itself or one of its DT_NEEDED libraries). */
#ifndef SPANTRACE_STAPSDT_H
#define SPANTRACE_STAPSDT_H

#include <stddef.h>
#include <stdint.h>

struct sdt_probe {
	char provider[64];
	char name[64];
	char args[256];
	uint64_t pc;         /* link-time address, .stapsdt.base adjusted */
	uint64_t semaphore;  /* address, 0 if none; adjusted the same way */
	uint64_t base;       /* the note's own .stapsdt.base value */
	uint64_t pc_off;     /* pc as a file offset (what uprobes take), 0 if unmapped */
	uint64_t sema_off;   /* semaphore as a file offset, 0 if none */
};

struct sdt_list {
	struct sdt_probe *probes;
	size_t n;
	char build_id[41];   /* hex, "" when the file has none */
};

/* Reads every stapsdt note of `path`. 0, or -1 with a message in err. */
int sdt_read(const char *path, struct sdt_list *out, char *err, size_t errlen);
void sdt_free(struct sdt_list *l);
/* Number of probes of `provider` in `path` (0 when unreadable/none). */
size_t sdt_count_provider(const char *path, const char *provider);

/* Finds the ELF that holds `provider`'s probes for a program: `exe` itself,
 * else its DT_NEEDED libraries, searched via DT_RPATH, LD_LIBRARY_PATH,
 * DT_RUNPATH ($ORIGIN expanded) and the default directories, one level and
 * then their own needs. `exe` may be a library. 0 with the path in out, or -1
 * with a message. */
int sdt_find_provider_elf(const char *exe, const char *provider, char *out, size_t outlen,
			  char *err, size_t errlen);

/* The first n bytes of the code of `func`, a function in path's dynamic
 * symbol table. 0, or -1 (unreadable, no such function). */
int elf_func_bytes(const char *path, const char *func, uint8_t *buf, size_t n);

/* 1 if path defines the function func in its dynamic or its full symbol
 * table (a static executable keeps its functions in the latter), else 0. */
int elf_has_function(const char *path, const char *func);
/* path's GNU build id in hex; "" when it has none or is unreadable. */
void elf_build_id(const char *path, char out[41]);

/* A file's defined functions (dynamic and full symbol tables), read once:
 * elf_sym_offset gives the file offset of a function's code (what a uprobe
 * attaches at), 0 when the file has no such function. */
struct elf_syms;
struct elf_syms *elf_syms_open(const char *path);
uint64_t elf_sym_offset(const struct elf_syms *s, const char *name);
void elf_syms_close(struct elf_syms *s);

/* The program interpreter (dynamic linker) path names, NUL-terminated. 0, or -1
 * (a static executable, a script, unreadable). */
int elf_interp(const char *path, char *out, size_t size);

/* Resolves a command name like execvp would (PATH when it has no '/'). */
int resolve_command(const char *cmd, char *out, size_t outlen);

#endif
