/* opencl_attach.h - `--opencl`: where a target's OpenCL ICD loader is and the
 * uprobes on its entry points (bpf/opencl.bpf.h). Needs no preload and no
 * restart: the probes sit in libOpenCL.so.1, which every OpenCL program
 * calls through.
 *
 *   opencl_set_autoload(&s, on);      // in session_open, before load
 *   opencl_find_loader(pid, lib, sizeof lib, err, sizeof err);
 *   session_attach(&s, elf, pid, ...); opencl_attach(&s, lib, pid, ...);
 */
#ifndef SPANTRACE_OPENCL_ATTACH_H
#define SPANTRACE_OPENCL_ATTACH_H

#include <stddef.h>
#include <sys/types.h>

struct session;
struct spantrace_bpf;

/* The opencl programs are verified and loaded only when asked for; without
 * them their maps shrink to one entry. binary (--binary, else NULL): only
 * processes running that executable are traced, though the loader is
 * shared. 0, or -1 when a map cannot be sized or binary cannot be read. */
int opencl_set_autoload(struct spantrace_bpf *skel, int on, const char *binary);

/* The loader a pid has mapped (pid > 0), else the one the dynamic linker
 * gives for "libOpenCL.so.1" (a command not started yet, --binary). */
int opencl_find_loader(pid_t pid, char *lib, size_t liblen, char *err, size_t errlen);

/* Uprobes and uretprobes on lib's entry points, for pid (-1: every process).
 * Each function the loader lacks is an error: they are all OpenCL 1.0. */
int opencl_attach(struct session *s, const char *lib, pid_t pid, char *err, size_t errlen);

/* Both for a command's target: pid is the process to trace (-1: every
 * process); running says it already runs (-p), so its mapped loader is used. */
int opencl_attach_target(struct session *s, pid_t pid, int running, char *err, size_t errlen);

/* How many probe links opencl_attach makes. */
size_t opencl_probe_count(void);

#endif
