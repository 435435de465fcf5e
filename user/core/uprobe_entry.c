/* uprobe_entry.c - probe past endbr64 when the kernel emulates what follows
 * (see uprobe_entry.h). */
#include "core/uprobe_entry.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ENDBR64_LEN 4

static int skip_disabled(void)
{
	const char *v = getenv("SPANTRACE_NO_ENDBR_SKIP");

	return v && *v && strcmp(v, "0");
}

size_t uprobe_entry_skip(const uint8_t *code, size_t n)
{
#if defined(__x86_64__)
	static const uint8_t endbr64[ENDBR64_LEN] = { 0xf3, 0x0f, 0x1e, 0xfa };
	const uint8_t *b = code + ENDBR64_LEN;

	if (!code || n < ENDBR64_LEN + 1 || memcmp(code, endbr64, ENDBR64_LEN))
		return 0;
	/* push %rax..%rdi: one byte, emulated */
	if (b[0] >= 0x50 && b[0] <= 0x57)
		return ENDBR64_LEN;
	/* push %r8..%r15: REX.B 0x41 exactly (the kernel takes no other prefix) */
	if (n >= ENDBR64_LEN + 2 && b[0] == 0x41 && b[1] >= 0x50 && b[1] <= 0x57)
		return ENDBR64_LEN;
#else
	(void)code;
	(void)n;
#endif
	return 0;
}

/* The code bytes at a file offset; the count read (short at the file's end). */
static size_t read_code(int fd, uint64_t off, uint8_t *buf, size_t n)
{
	ssize_t got = pread(fd, buf, n, (off_t)off);

	return got > 0 ? (size_t)got : 0;
}

uint64_t uprobe_entry_offset(const char *path, uint64_t func_off)
{
	uint8_t b[ENDBR64_LEN + 2];
	size_t n;
	int fd;

	if (!path || !func_off || skip_disabled() || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return func_off;
	n = read_code(fd, func_off, b, sizeof(b));
	close(fd);
	return func_off + uprobe_entry_skip(b, n);
}

/* The file offset of vaddr through the PT_LOAD segment holding it; 0 if none. */
static uint64_t vaddr_to_offset(Elf *elf, uint64_t vaddr)
{
	GElf_Phdr ph;
	size_t nph;

	if (elf_getphdrnum(elf, &nph))
		return 0;
	for (size_t i = 0; i < nph; i++)
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr &&
		    vaddr < ph.p_vaddr + ph.p_filesz)
			return vaddr - ph.p_vaddr + ph.p_offset;
	return 0;
}

/* libbpf's rule: "func" is func or func@VERSION; a name with '@' only itself. */
static int name_matches(const char *sym, const char *func, size_t len, int qualified)
{
	if (strncmp(sym, func, len))
		return 0;
	return sym[len] == 0 || (!qualified && sym[len] == '@');
}

/* The one address of func's definitions in both symbol tables: 0 if none,
 * UINT64_MAX if they disagree (libbpf would refuse or pick by binding). */
static uint64_t func_vaddr(Elf *elf, const char *func)
{
	size_t len = strlen(func), shstrndx;
	int qualified = strchr(func, '@') != NULL;
	uint64_t found = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) ||
		    !sh.sh_entsize || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) ||
			    (GELF_ST_TYPE(sym.st_info) != STT_FUNC && GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC) ||
			    sym.st_shndx == SHN_UNDEF || !sym.st_value ||
			    !(name = elf_strptr(elf, sh.sh_link, sym.st_name)) || !name_matches(name, func, len, qualified))
				continue;
			if (GELF_ST_TYPE(sym.st_info) == STT_GNU_IFUNC)
				return UINT64_MAX; /* libbpf probes the resolver: leave it */
			if (found && found != sym.st_value)
				return UINT64_MAX;
			found = sym.st_value;
		}
	}
	return found;
}

uint64_t uprobe_func_offset(const char *path, const char *func)
{
	uint64_t vaddr, off = 0;
	Elf *elf;
	int fd;

	if (!path || !func || !*func || elf_version(EV_CURRENT) == EV_NONE ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF && (vaddr = func_vaddr(elf, func)) && vaddr != UINT64_MAX)
		off = vaddr_to_offset(elf, vaddr);
	if (elf)
		elf_end(elf);
	close(fd);
	return off;
}
