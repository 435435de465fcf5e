/* symbols.h - address -> function name for user stacks (per process, from
 * /proc/PID/maps and the mapped files' ELF symbol tables) and kernel stacks
 * (/proc/kallsyms).
 *
 * User addresses: the executable mapping containing addr gives the file
 * offset (addr - map start + map offset); the file's PT_LOAD program headers
 * turn that into the ELF virtual address (offset - p_offset + p_vaddr), which
 * is what .symtab/.dynsym values are, for PIE executables and shared objects
 * alike. Files are opened through /proc/PID/map_files (works for deleted and
 * namespaced files), else /proc/PID/root/PATH, else PATH; each file's symbols
 * are loaded once (keyed by device and inode) and shared by all processes.
 *
 * A process's maps are read on its first lookup; call sym_load_pid while the
 * process is alive when it may exit before its samples are symbolized. An
 * address outside every known mapping re-reads the maps once (dlopen). */
#ifndef SPANTRACE_SYMBOLS_H
#define SPANTRACE_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct symbolizer;

enum sym_result {
	SYM_ERROR = -1,    /* allocation failure; buf holds "[unknown]" */
	SYM_FALLBACK = 0,  /* no symbol: buf holds "file+0xVADDR" or "[unknown]" */
	SYM_FOUND = 1,     /* buf holds the function name */
};

struct symbolizer *sym_new(void);   /* NULL on allocation failure */
void sym_free(struct symbolizer *s);

/* Reads /proc/PID/maps now (replacing what was known). -1 if unreadable. */
int sym_load_pid(struct symbolizer *s, pid_t pid);
/* Reads maps for pid from another file (a saved copy, or a test's). */
int sym_load_maps_file(struct symbolizer *s, pid_t pid, const char *maps_path);
/* Forgets a process's maps (after exec, or when its pid may be reused). */
void sym_forget_pid(struct symbolizer *s, pid_t pid);

/* Function containing a user address of pid; the name goes to buf. */
enum sym_result sym_user(struct symbolizer *s, pid_t pid, uint64_t addr, char *buf, size_t len);

/* Function containing a kernel address (kallsyms read on first use). */
enum sym_result sym_kernel(struct symbolizer *s, uint64_t addr, char *buf, size_t len);
/* Whether kallsyms gave real addresses (root, or kptr_restrict off). */
int sym_kernel_available(struct symbolizer *s);

/* Address of a kernel symbol by name, 0 if unknown (for tests). */
uint64_t sym_kernel_lookup_name(struct symbolizer *s, const char *name);

#endif
