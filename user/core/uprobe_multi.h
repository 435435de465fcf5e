/* uprobe_multi.h - USDT and function probes through the kernel's
 * uprobe_multi links (Linux 6.6+), which Debian's libbpf 1.1 has no API for.
 *
 * Why: a classic uprobe link (libbpf's bpf_program__attach_usdt) costs
 * ~80-100 ms to close here, and the closes are serialized: ~1-2 s to end a
 * session. A uprobe_multi link is one fd per program; its close waits for one
 * RCU grace period, and closes done from parallel threads share it.
 *
 * The shim writes the same argument specs libbpf's usdt.bpf.h reads
 * (bpf_usdt_arg() finds them by the link's BPF cookie), passes the USDT
 * semaphores as reference-counter offsets (the kernel increments them while
 * attached), and falls back to libbpf's per-probe links when the kernel lacks
 * uprobe_multi or SPANTRACE_NO_UPROBE_MULTI=1 is set.
 *
 *   um = umulti_new();                         // before load
 *   if (umulti_enabled(um)) umulti_prepare(progs, n);
 *   load; umulti_set_specs_map(um, fd, value_size);
 *   umulti_attach(um, prog_fd, elf, pid, "infer", "alloc", cookie, ...);
 *   umulti_detach(um);                         // all links, in parallel
 */
#ifndef SPANTRACE_UPROBE_MULTI_H
#define SPANTRACE_UPROBE_MULTI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bpf_object;
struct bpf_program;
struct umulti;

/* 1 when this kernel has uprobe_multi links (probed once), else 0. */
int umulti_kernel_supported(void);

/* NULL on allocation failure. Enabled when the kernel supports it and the
 * environment does not turn it off. */
struct umulti *umulti_new(void);
void umulti_free(struct umulti *um);
int umulti_enabled(const struct umulti *um);

/* Before load: progs[0..n) are loaded for uprobe_multi attachment; only
 * programs attached through umulti_attach (a program loaded so refuses a
 * per-site link). 0 or -errno. */
int umulti_prepare(struct bpf_program *const *progs, size_t n);
/* After load: the map bpf_usdt_arg() reads (__bpf_usdt_specs). */
int umulti_set_specs_map(struct umulti *um, struct bpf_object *obj, char *err, size_t errlen);

/* Attaches prog_fd to every site of provider:probe in elf (pid -1: every
 * process). elf may be any path the kernel resolves to the file, including
 * /proc/PID/map_files/... usdt_cookie is what bpf_usdt_cookie() returns.
 * Returns 0, -ENOENT when elf has no such probe, or another -errno with a
 * message in err. */
int umulti_attach(struct umulti *um, int prog_fd, const char *elf, pid_t pid, const char *provider,
		  const char *probe, uint64_t usdt_cookie, char *err, size_t errlen);
/* A function probe: prog_fd (prepared) at file offset off of path, at its
 * return when retprobe; cookie is what bpf_get_attach_cookie() returns.
 * One link, closed with the others by umulti_detach. 0 or -errno. */
int umulti_attach_func(struct umulti *um, int prog_fd, const char *path, pid_t pid, uint64_t off, int retprobe,
		       uint64_t cookie);
/* Number of links held. */
size_t umulti_nlinks(const struct umulti *um);
/* Closes every link, in parallel threads (the grace periods overlap). */
void umulti_detach(struct umulti *um);

#endif
