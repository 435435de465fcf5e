/* opencl_attach.c - finds the OpenCL ICD loader and attaches the uprobes of
 * bpf/opencl.bpf.h to it (see opencl_attach.h). */
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
#include <bpf/libbpf.h>
#include "core/log.h"
#include "core/session.h"
#include "core/stapsdt.h"
#include "core/target.h"
#include "spantrace.skel.h"

#define LOADER_SONAME "libOpenCL.so.1"

struct cl_probe {
	const char *func;
	int ret;                        /* uretprobe */
	struct bpf_program *(*prog)(struct spantrace_bpf *sk);
};

#define PROG(name) static struct bpf_program *p_##name(struct spantrace_bpf *sk) { return sk->progs.name; }
PROG(cl_finish_entry) PROG(cl_finish_ret) PROG(cl_wait_entry) PROG(cl_wait_ret)
PROG(cl_build_entry) PROG(cl_build_ret) PROG(cl_read_entry) PROG(cl_read_ret)
PROG(cl_write_entry) PROG(cl_write_ret) PROG(cl_map_entry) PROG(cl_map_ret)
PROG(cl_create_kernel_entry) PROG(cl_create_kernel_ret) PROG(cl_ndrange_entry) PROG(cl_ndrange_ret)
PROG(cl_profiling_entry) PROG(cl_profiling_ret) PROG(cl_create_buf_entry) PROG(cl_create_buf_ret)
PROG(cl_retain_mem_entry) PROG(cl_release_mem_entry) PROG(cl_release_event_entry)
#undef PROG

/* Returns before entries (an entry whose return is not armed would leave
 * its pending state behind), releases before creates (a buffer whose
 * release went unseen would stay live). */
static const struct cl_probe probes[] = {
	{ "clFinish", 1, p_cl_finish_ret },
	{ "clWaitForEvents", 1, p_cl_wait_ret },
	{ "clBuildProgram", 1, p_cl_build_ret },
	{ "clEnqueueReadBuffer", 1, p_cl_read_ret },
	{ "clEnqueueWriteBuffer", 1, p_cl_write_ret },
	{ "clEnqueueMapBuffer", 1, p_cl_map_ret },
	{ "clCreateKernel", 1, p_cl_create_kernel_ret },
	{ "clEnqueueNDRangeKernel", 1, p_cl_ndrange_ret },
	{ "clGetEventProfilingInfo", 1, p_cl_profiling_ret },
	{ "clCreateBuffer", 1, p_cl_create_buf_ret },
	{ "clReleaseEvent", 0, p_cl_release_event_entry },
	{ "clReleaseMemObject", 0, p_cl_release_mem_entry },
	{ "clRetainMemObject", 0, p_cl_retain_mem_entry },
	{ "clFinish", 0, p_cl_finish_entry },
	{ "clWaitForEvents", 0, p_cl_wait_entry },
	{ "clBuildProgram", 0, p_cl_build_entry },
	{ "clEnqueueReadBuffer", 0, p_cl_read_entry },
	{ "clEnqueueWriteBuffer", 0, p_cl_write_entry },
	{ "clEnqueueMapBuffer", 0, p_cl_map_entry },
	{ "clCreateKernel", 0, p_cl_create_kernel_entry },
	{ "clEnqueueNDRangeKernel", 0, p_cl_ndrange_entry },
	{ "clGetEventProfilingInfo", 0, p_cl_profiling_entry },
	{ "clCreateBuffer", 0, p_cl_create_buf_entry },
};

#define NPROBES (sizeof(probes) / sizeof(probes[0]))

size_t opencl_probe_count(void)
{
	return NPROBES;
}

/* --binary: the executable the BPF side compares each caller's with. */
static int set_exe_filter(struct spantrace_bpf *skel, const char *binary)
{
	struct stat st;

	if (stat(binary, &st))
		return -1;
	skel->rodata->cl_exe_ino = st.st_ino;
	/* the kernel's s_dev encoding: major << 20 | minor */
	skel->rodata->cl_exe_dev = (__u32)(major(st.st_dev) << 20 | minor(st.st_dev));
	return 0;
}

int opencl_set_autoload(struct spantrace_bpf *skel, int on, const char *binary)
{
	struct bpf_map *maps[] = { skel->maps.cl_pending, skel->maps.cl_enqueues, skel->maps.cl_names,
				   skel->maps.cl_mems, skel->maps.cl_ctxmem, skel->maps.cl_events };

	for (size_t i = 0; i < NPROBES; i++)
		bpf_program__set_autoload(probes[i].prog(skel), on);
	for (size_t i = 0; !on && i < sizeof(maps) / sizeof(maps[0]); i++)
		if (bpf_map__set_max_entries(maps[i], 1))
			return -1;
	return on && binary ? set_exe_filter(skel, binary) : 0;
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
static size_t probe_offset(const char *lib, const char *func)
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

int opencl_attach(struct session *s, const char *lib, pid_t pid, char *err, size_t errlen)
{
	for (size_t i = 0; i < NPROBES; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = probes[i].func, .retprobe = probes[i].ret != 0);
		size_t off = probe_offset(lib, probes[i].func);
		struct bpf_link *link;

		st_debug("--opencl: %s%s at +%zu", probes[i].func, probes[i].ret ? " (return)" : "", off);
		link = bpf_program__attach_uprobe_opts(probes[i].prog(s->skel), pid, lib, off, &uo);
		if (!link) {
			snprintf(err, errlen, "--opencl: cannot attach %s%s in %s: %s", probes[i].func,
				 probes[i].ret ? " (return)" : "", lib, strerror(errno));
			return -1;
		}
		if (session_add_link(s, link)) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	return 0;
}

int opencl_attach_target(struct session *s, pid_t pid, int running, char *err, size_t errlen)
{
	char lib[PATH_MAX];

	/* A command is not exec'd yet: its loader is the one ld.so would give. */
	if (opencl_find_loader(running ? pid : -1, lib, sizeof(lib), err, errlen))
		return -1;
	return opencl_attach(s, lib, pid > 0 ? pid : -1, err, errlen);
}
