/* opencl_attach.c - finds the OpenCL ICD loader and plans the uprobes of
 * bpf/opencl.bpf.h on it (see opencl_attach.h); core/session_attach.c attaches. */
#include "core/opencl_attach.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "core/log.h"
#include "core/stapsdt.h"
#include "core/target.h"

#define LOADER_SONAME "libOpenCL.so.1"

/* Returns before entries (an entry whose return is not armed would leave
 * its pending state behind), releases before creates (a buffer whose
 * release went unseen would stay live). prog: bpf/opencl.bpf.h's program. */
static const struct cl_probe probes[] = {
	{ "clFinish", 1, "cl_finish_ret" },
	{ "clWaitForEvents", 1, "cl_wait_ret" },
	{ "clBuildProgram", 1, "cl_build_ret" },
	{ "clEnqueueReadBuffer", 1, "cl_read_ret" },
	{ "clEnqueueWriteBuffer", 1, "cl_write_ret" },
	{ "clEnqueueMapBuffer", 1, "cl_map_ret" },
	{ "clCreateKernel", 1, "cl_create_kernel_ret" },
	{ "clEnqueueNDRangeKernel", 1, "cl_ndrange_ret" },
	{ "clGetEventProfilingInfo", 1, "cl_profiling_ret" },
	{ "clCreateBuffer", 1, "cl_create_buf_ret" },
	{ "clReleaseEvent", 0, "cl_release_event_entry" },
	{ "clReleaseMemObject", 0, "cl_release_mem_entry" },
	{ "clRetainMemObject", 0, "cl_retain_mem_entry" },
	{ "clFinish", 0, "cl_finish_entry" },
	{ "clWaitForEvents", 0, "cl_wait_entry" },
	{ "clBuildProgram", 0, "cl_build_entry" },
	{ "clEnqueueReadBuffer", 0, "cl_read_entry" },
	{ "clEnqueueWriteBuffer", 0, "cl_write_entry" },
	{ "clEnqueueMapBuffer", 0, "cl_map_entry" },
	{ "clCreateKernel", 0, "cl_create_kernel_entry" },
	{ "clEnqueueNDRangeKernel", 0, "cl_ndrange_entry" },
	{ "clGetEventProfilingInfo", 0, "cl_profiling_entry" },
	{ "clCreateBuffer", 0, "cl_create_buf_entry" },
};

/* The maps only these programs use: one entry each without them. */
static const char *const maps[] = { "cl_pending", "cl_enqueues", "cl_names", "cl_mems", "cl_ctxmem", "cl_events" };

const struct cl_probe *opencl_probes(size_t *n)
{
	*n = sizeof(probes) / sizeof(probes[0]);
	return probes;
}

const char *const *opencl_maps(size_t *n)
{
	*n = sizeof(maps) / sizeof(maps[0]);
	return maps;
}

int opencl_exe_id(const char *binary, uint64_t *ino, uint32_t *dev)
{
	struct stat st;

	if (stat(binary, &st))
		return -1;
	*ino = st.st_ino;
	/* the kernel's s_dev encoding: major << 20 | minor */
	*dev = (uint32_t)(major(st.st_dev) << 20 | minor(st.st_dev));
	return 0;
}

/* The path the dynamic linker resolves the soname to. Loading the ICD
 * loader runs no driver: ocl-icd reads its vendors on the first call. */
static int loader_from_linker(char *lib, size_t liblen, char *err, size_t errlen)
{
	struct link_map *lm = NULL;
	char real[PATH_MAX];
	void *h = dlopen(LOADER_SONAME, RTLD_LAZY | RTLD_LOCAL);

	if (!h) {
		snprintf(err, errlen, "--opencl: cannot find %s (install ocl-icd-libopencl1): %s",
			 LOADER_SONAME, dlerror());
		return -1;
	}
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm || !lm->l_name[0] || !realpath(lm->l_name, real)) {
		snprintf(err, errlen, "--opencl: cannot tell where %s is", LOADER_SONAME);
		dlclose(h);
		return -1;
	}
	dlclose(h);
	if ((size_t)snprintf(lib, liblen, "%s", real) >= liblen) {
		snprintf(err, errlen, "--opencl: path of %s too long", LOADER_SONAME);
		return -1;
	}
	return 0;
}

int opencl_find_loader(pid_t pid, char *lib, size_t liblen, char *err, size_t errlen)
{
	char shown[PATH_MAX];

	if (pid <= 0)
		return loader_from_linker(lib, liblen, err, errlen);
	if (target_mapped_lib(pid, "libOpenCL.so", lib, liblen, shown, sizeof(shown))) {
		snprintf(err, errlen, "--opencl: process %d has not loaded the OpenCL ICD loader (%s)",
			 (int)pid, LOADER_SONAME);
		return -1;
	}
	st_debug("OpenCL loader of pid %d: %s", (int)pid, shown);
	return 0;
}

/* Where in func to put its probes. A uprobe on an instruction the kernel
 * cannot emulate is single-stepped out of line: ~16 us a hit in this VM.
 * ocl-icd's entry points all open with `mov disp32(%rip),%rax`, then either
 * `push %reg` (those with stack arguments) or `test %rax,%rax ; jcc rel8`.
 * The kernel emulates the push and the jump, so a probe on either costs
 * ~1 us. Before it nothing has touched the stack or an argument register:
 * the entry program reads the same arguments, and a uretprobe there finds
 * the return address at sp just as at the entry. Any other prologue: the
 * entry itself. */
size_t opencl_probe_offset(const char *lib, const char *func)
{
	static const uint8_t head[] = { 0x48, 0x8b, 0x05 }, test[] = { 0x48, 0x85, 0xc0 };
	uint8_t b[12];

	if (elf_func_bytes(lib, func, b, sizeof(b)) || memcmp(b, head, sizeof(head)))
		return 0;
	if (b[7] >= 0x50 && b[7] <= 0x57)                  /* push %rax..%rdi */
		return 7;
	if (!memcmp(b + 7, test, sizeof(test)) && (b[10] == 0x74 || b[10] == 0x75))   /* je/jne */
		return 10;
	return 0;
}
