/* test_uprobe_entry.c - where an entry uprobe goes (core/uprobe_entry.h):
 * past endbr64 exactly when a push the kernel emulates follows, on byte
 * patterns and on a shared library assembled at test time (its offsets
 * checked against the symbol table). */
#include "core/uprobe_entry.h"
#include "check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define B(...) ((const uint8_t[]){ __VA_ARGS__ }), sizeof((const uint8_t[]){ __VA_ARGS__ })

static void test_patterns(void)
{
#if defined(__x86_64__)
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48)) == 4, "endbr64; push %%rbp");
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x50)) == 4, "endbr64; push %%rax (5 bytes read)");
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x53, 0x48)) == 4, "endbr64; push %%rbx");
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x57, 0x48)) == 4, "endbr64; push %%rdi");
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x54)) == 4, "endbr64; push %%r12");
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x57)) == 4, "endbr64; push %%r15");
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x50)) == 4, "endbr64; push %%r8");
	/* not emulated (or not a push): stay at the entry */
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83)) == 0, "endbr64; sub $x,%%rsp");
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x58)) == 0, "endbr64; pop %%r8");
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x49, 0x54)) == 0, "REX.WB push: the kernel takes 0x41 only");
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x66, 0x55)) == 0, "pushw %%bp");
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x58, 0x48)) == 0, "endbr64; pop %%rax");
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x41)) == 0, "REX byte with nothing after it");
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa)) == 0, "endbr64 alone (end of file)");
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfb, 0x55, 0x48)) == 0, "endbr32 is not endbr64");
	CHECK(uprobe_entry_skip(B(0x55, 0x48, 0x89, 0xe5, 0x55, 0x48)) == 0, "push %%rbp first: already emulated");
	CHECK(uprobe_entry_skip(NULL, 6) == 0, "NULL");
#else
	CHECK(uprobe_entry_skip(B(0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48)) == 0, "x86-64 only");
#endif
}

/* A library of known prologues (and a static `dup` beside a global one). */
static const char lib_s[] =
	"\t.text\n"
	"\t.globl f_rbp, f_r12, f_mov, f_plain, f_rbp2, dup\n"
	"\t.type f_rbp,@function\nf_rbp:\n\tendbr64\n\tpush %rbp\n\tpop %rbp\n\tret\n"
	"\t.type f_r12,@function\nf_r12:\n\tendbr64\n\tpush %r12\n\tpop %r12\n\tret\n"
	"\t.type f_mov,@function\nf_mov:\n\tendbr64\n\tmov %rdi,%rax\n\tret\n"
	"\t.type f_plain,@function\nf_plain:\n\tpush %rbp\n\tpop %rbp\n\tret\n"
	"\t.type f_rbp2,@function\nf_rbp2:\n\tendbr64\n\tpush %rbx\n\tpop %rbx\n\tret\n"
	"\t.type dup,@function\ndup:\n\tendbr64\n\tpush %rbp\n\tpop %rbp\n\tret\n";
static const char other_s[] =
	"\t.text\n"
	"\t.type dup,@function\ndup:\n\tendbr64\n\tpush %rbp\n\tpop %rbp\n\tret\n";

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* A symbol's file offset as nm and readelf see it (st_value; a -nostdlib
 * library built so maps its text at file offset == vaddr, checked below). */
static uint64_t nm_value(const char *lib, const char *func)
{
	char cmd[512], line[256];
	unsigned long long v = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm -D --defined-only %s 2>/dev/null | awk '$3 == \"%s\" { print $1 }'", lib,
		 func);
	if (!(p = popen(cmd, "r")))
		return 0;
	if (fgets(line, sizeof(line), p))
		v = strtoull(line, NULL, 16);
	pclose(p);
	return v;
}

/* How far past func's entry its probe goes, as session_attach.c finds it: the
 * function's offset by name, then the skip of the code there. */
static uint64_t func_skip(const char *path, const char *func)
{
	uint64_t off = uprobe_func_offset(path, func);

	return off ? uprobe_entry_offset(path, off) - off : 0;
}

static void test_library(void)
{
#if defined(__x86_64__)
	char dir[] = "/tmp/test_uprobe_entry.XXXXXX", lib[128], a[128], b[128], cmd[512];
	uint64_t o;

	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(a, sizeof(a), "%s/a.s", dir);
	snprintf(b, sizeof(b), "%s/b.s", dir);
	snprintf(lib, sizeof(lib), "%s/libt.so", dir);
	snprintf(cmd, sizeof(cmd), "cc -shared -nostdlib -o %s %s %s 2>/dev/null", lib, a, b);
	if (write_file(a, lib_s) || write_file(b, other_s) || system(cmd)) {
		printf("SKIP library checks: cannot assemble a library with cc\n");
		goto out;
	}
	o = nm_value(lib, "f_rbp");
	CHECK(o != 0, "nm finds f_rbp");
	/* the text segment of such a library starts at offset 0 == vaddr 0 */
	CHECK(uprobe_entry_offset(lib, o) == o + 4, "f_rbp by offset: +4 (got %#llx, entry %#llx)",
	      (unsigned long long)uprobe_entry_offset(lib, o), (unsigned long long)o);
	o = nm_value(lib, "f_mov");
	CHECK(o && uprobe_entry_offset(lib, o) == o, "f_mov by offset: unchanged");
	o = nm_value(lib, "f_plain");
	CHECK(o && uprobe_entry_offset(lib, o) == o, "f_plain by offset: unchanged");
	CHECK(uprobe_entry_offset(lib, 0) == 0, "offset 0 stays 0");
	CHECK(uprobe_entry_offset("/nonexistent/lib.so", 0x1000) == 0x1000, "unreadable file: unchanged");

	CHECK(func_skip(lib, "f_rbp") == 4, "f_rbp: +4");
	CHECK(func_skip(lib, "f_r12") == 4, "f_r12: +4");
	CHECK(func_skip(lib, "f_rbp2") == 4, "f_rbp2 (push %%rbx): +4");
	CHECK(func_skip(lib, "f_mov") == 0, "f_mov: 0");
	CHECK(func_skip(lib, "f_plain") == 0, "f_plain: 0");
	CHECK(func_skip(lib, "f_") == 0, "a prefix of names matches none");
	CHECK(func_skip(lib, "nosuch") == 0, "no such function");
	CHECK(func_skip(lib, "dup") == 0, "two addresses for one name: left alone");
	setenv("SPANTRACE_NO_ENDBR_SKIP", "1", 1);
	CHECK(func_skip(lib, "f_rbp") == 0, "SPANTRACE_NO_ENDBR_SKIP=1: 0");
	o = nm_value(lib, "f_rbp");
	CHECK(uprobe_entry_offset(lib, o) == o, "SPANTRACE_NO_ENDBR_SKIP=1: unchanged");
	unsetenv("SPANTRACE_NO_ENDBR_SKIP");
	/* a path relative to the working directory */
	if (getcwd(cmd, sizeof(cmd)) && !chdir(dir)) {
		CHECK(func_skip("./libt.so", "f_rbp") == 4, "./libt.so: +4");
		CHECK(!chdir(cmd), "chdir back");
	}
out:
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0, "rm %s", dir);
#endif
}

int main(void)
{
	test_patterns();
	test_library();
	return check_report();
}
