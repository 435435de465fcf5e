/* target.h - what to attach to: a live pid, a command to start, or every
 * process of a binary. Finds the ELF that holds the `infer` probes. */
#ifndef SPANTRACE_TARGET_H
#define SPANTRACE_TARGET_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

struct target {
	pid_t pid;               /* traced pid (pid/command), -1 for a binary */
	char elf[PATH_MAX];      /* file that holds the probes (llama.cpp: libllama
				  * or the executable), as we open it */
	char shown[PATH_MAX];    /* the same as the target sees it (for output) */
	char build_id[41];
	int engine;              /* enum engine_id (core/engines.h); 0: none yet */
	char base[PATH_MAX];     /* llama.cpp: where ggml's backend functions are */
	int pending;             /* a command whose engine may load later (dlopen) */
};

/* -p PID: the mapped file of PID with `infer` notes (via /proc/PID/root). */
int target_from_pid(pid_t pid, struct target *t, char *err, size_t errlen);
/* -- CMD / --binary PATH: the program or a library it needs. */
int target_from_program(const char *prog, int search_path, struct target *t, char *err,
			size_t errlen);

/* --opencl: a target without `infer` probes is fine, its OpenCL calls are
 * traced in the loader. target_or_opencl is target_from_program that, with
 * opencl set, accepts a program that exists but has no probes; and
 * target_pid_without_probes a live pid. Either leaves t->elf empty. */
int target_or_opencl(const char *prog, int search_path, int opencl, struct target *t, char *err,
		     size_t errlen);
int target_pid_without_probes(pid_t pid, struct target *t);

/* The first file mapped by pid whose base name starts with prefix (e.g.
 * "libOpenCL.so"): elf gets a path to open, shown its name. 0 or -1. */
int target_mapped_lib(pid_t pid, const char *prefix, char *elf, size_t elflen, char *shown,
		      size_t shownlen);

/* Parses a positive pid; -1 on bad text. */
pid_t parse_pid(const char *s);

#endif
