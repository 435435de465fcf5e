/* uprobe_entry.h - where to put a function's entry probe so the kernel can
 * emulate the probed instruction instead of single-stepping it.
 *
 * A function built with -fcf-protection (Ubuntu's default, and prebuilt
 * binaries such as node-llama-cpp's) opens with `endbr64` (f3 0f 1e fa).
 * The x86 uprobe code cannot emulate it: every hit is single-stepped out of
 * line, ~14 us here against ~0.4 us for an emulated instruction. When the
 * next instruction is one the kernel emulates (`push %reg`, arch/x86/kernel/
 * uprobes.c push_setup_xol_ops: 50+r, or 41 50+r), the probe goes on it,
 * 4 bytes in: endbr64 changes no register, flag or memory, so an entry
 * program reads the same arguments (registers and stack) and a uretprobe
 * still finds the return address at (%rsp).
 *
 * SPANTRACE_NO_ENDBR_SKIP=1 turns this off (for measuring). x86-64 only:
 * elsewhere every call returns its input. */
#ifndef SPANTRACE_UPROBE_ENTRY_H
#define SPANTRACE_UPROBE_ENTRY_H

#include <stddef.h>
#include <stdint.h>

/* How many bytes past a function's first byte to probe, given its first n
 * code bytes: 4 for endbr64 then an emulated push, else 0. */
size_t uprobe_entry_skip(const uint8_t *code, size_t n);

/* func_off (a function's file offset in path, what a uprobe attaches at),
 * or func_off + the skip of the code there. func_off unchanged when the
 * file is unreadable, the skip is off, or func_off is 0. */
uint64_t uprobe_entry_offset(const char *path, uint64_t func_off);

/* func's file offset in path, from its dynamic or full symbol table
 * ("func" also matching "func@VERSION", as libbpf matches): 0 when there
 * is no such function, it is an ifunc, or its definitions disagree. */
uint64_t uprobe_func_offset(const char *path, const char *func);

#endif