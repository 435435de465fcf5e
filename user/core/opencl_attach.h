/* opencl_attach.h - `--opencl`: where a target's OpenCL ICD loader is and
 * which uprobes go on its entry points (bpf/opencl.bpf.h). Needs no preload
 * and no restart: the probes sit in libOpenCL.so.1, which every OpenCL
 * program calls through. The session loads the programs (core/session.c,
 * session_opts.opencl) and attaches them (core/session_attach.c,
 * session_attach_target). */
#ifndef SPANTRACE_OPENCL_ATTACH_H
#define SPANTRACE_OPENCL_ATTACH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One probe: a uretprobe (ret) or uprobe on the loader's func, run by
 * bpf/opencl.bpf.h's program prog. */
struct cl_probe {
	const char *func;
	int ret;
	const char *prog;
};

/* Every probe, in attach order: returns before entries, releases before
 * creates. Each function the loader lacks is an error: they are all OpenCL 1.0. */
const struct cl_probe *opencl_probes(size_t *n);
/* The maps only the OpenCL programs use (sized to 1 entry without them). */
const char *const *opencl_maps(size_t *n);
/* Where in func of lib to put its probes (0: the entry). */
size_t opencl_probe_offset(const char *lib, const char *func);
/* --opencl --binary: the executable the BPF side compares callers with. */
int opencl_exe_id(const char *binary, uint64_t *ino, uint32_t *dev);

/* The loader a pid has mapped (pid > 0), else the one the dynamic linker
 * gives for "libOpenCL.so.1" (a command not started yet, --binary). */
int opencl_find_loader(pid_t pid, char *lib, size_t liblen, char *err, size_t errlen);

#endif
