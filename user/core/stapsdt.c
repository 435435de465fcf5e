/* stapsdt.c - USDT notes, build ids and library resolution via libelf. */
#include "core/stapsdt.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/grow.h"

#define NT_STAPSDT 3

struct elf_file {
	int fd;
	Elf *elf;
	size_t shstrndx;
};

static int elf_file_open(const char *path, struct elf_file *f, char *err, size_t errlen)
{
	f->elf = NULL;
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (elf_version(EV_CURRENT) == EV_NONE)
		goto bad;
	f->elf = elf_begin(f->fd, ELF_C_READ, NULL);
	if (!f->elf || elf_kind(f->elf) != ELF_K_ELF || elf_getshdrstrndx(f->elf, &f->shstrndx))
		goto bad;
	return 0;
bad:
	snprintf(err, errlen, "%s: not an ELF file", path);
	if (f->elf)
		elf_end(f->elf);
	close(f->fd);
	return -1;
}

static void elf_file_close(struct elf_file *f)
{
	elf_end(f->elf);
	close(f->fd);
}

static Elf_Scn *find_section(struct elf_file *f, const char *name, GElf_Shdr *shdr)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(f->elf, scn))) {
		const char *sname;
		if (!gelf_getshdr(scn, shdr))
			continue;
		sname = elf_strptr(f->elf, f->shstrndx, shdr->sh_name);
		if (sname && !strcmp(sname, name))
			return scn;
	}
	return NULL;
}

/* Copies a NUL-terminated string from a note descriptor, bounded by its end. */
static const char *take_string(const char *p, const char *end, char *dst, size_t dstlen)
{
	size_t n = strnlen(p, end - p);

	if (p + n >= end)
		return NULL;
	snprintf(dst, dstlen, "%.*s", (int)n, p);
	return p + n + 1;
}

static int parse_sdt_note(const char *desc, size_t len, int is64, uint64_t base_addr,
			  int have_base, struct sdt_probe *p)
{
	size_t asz = is64 ? 8 : 4;
	const char *s, *end = desc + len;
	uint64_t v[3] = { 0, 0, 0 };

	if (len < 3 * asz + 3)
		return -1;
	for (int i = 0; i < 3; i++) {
		if (is64) {
			memcpy(&v[i], desc + i * 8, 8);
		} else {
			uint32_t w;
			memcpy(&w, desc + i * 4, 4);
			v[i] = w;
		}
	}
	p->pc = v[0];
	p->base = v[1];
	p->semaphore = v[2];
	/* Prelink or strip may move sections: the note records where
	 * .stapsdt.base was at link time, the section says where it is now. */
	if (have_base) {
		p->pc += base_addr - p->base;
		if (p->semaphore)
			p->semaphore += base_addr - p->base;
	}
	s = desc + 3 * asz;
	if (!(s = take_string(s, end, p->provider, sizeof(p->provider))))
		return -1;
	if (!(s = take_string(s, end, p->name, sizeof(p->name))))
		return -1;
	if (s < end)
		take_string(s, end, p->args, sizeof(p->args));
	else
		p->args[0] = 0;
	return 0;
}

static void read_build_id(struct elf_file *f, char *out)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;

	out[0] = 0;
	while ((scn = elf_nextscn(f->elf, scn))) {
		Elf_Data *data;
		GElf_Nhdr nhdr;
		size_t off = 0, name_off, desc_off, next;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		while (data && (next = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
			const char *name = (const char *)data->d_buf + name_off;
			if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 && !memcmp(name, "GNU", 4)) {
				const unsigned char *d = (const unsigned char *)data->d_buf + desc_off;
				size_t n = nhdr.n_descsz > 20 ? 20 : nhdr.n_descsz;
				for (size_t i = 0; i < n; i++)
					sprintf(out + 2 * i, "%02x", d[i]);
				return;
			}
			off = next;
		}
	}
}

/* A link-time address as a file offset, through the PT_LOAD segment that
 * holds it (uprobes and their reference counters take file offsets). */
static uint64_t vaddr_to_off(struct elf_file *f, uint64_t addr)
{
	size_t n;
	GElf_Phdr ph;

	if (!addr || elf_getphdrnum(f->elf, &n))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (gelf_getphdr(f->elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
		    addr >= ph.p_vaddr && addr < ph.p_vaddr + ph.p_memsz)
			return addr - ph.p_vaddr + ph.p_offset;
	return 0;
}

static int append_probe(struct sdt_list *l, const struct sdt_probe *p)
{
	struct sdt_probe *np = realloc(l->probes, (l->n + 1) * sizeof(*np));

	if (!np)
		return -1;
	l->probes = np;
	l->probes[l->n++] = *p;
	return 0;
}

int sdt_read(const char *path, struct sdt_list *out, char *err, size_t errlen)
{
	struct elf_file f;
	GElf_Shdr shdr, base_shdr;
	Elf_Scn *scn;
	Elf_Data *data;
	int have_base, is64;
	size_t off = 0, name_off, desc_off, next;
	GElf_Nhdr nhdr;

	memset(out, 0, sizeof(*out));
	if (elf_file_open(path, &f, err, errlen))
		return -1;
	read_build_id(&f, out->build_id);
	is64 = gelf_getclass(f.elf) == ELFCLASS64;
	have_base = find_section(&f, ".stapsdt.base", &base_shdr) != NULL;
	scn = find_section(&f, ".note.stapsdt", &shdr);
	data = scn ? elf_getdata(scn, NULL) : NULL;
	while (data && (next = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
		struct sdt_probe p;
		const char *name = (const char *)data->d_buf + name_off;

		off = next;
		if (nhdr.n_type != NT_STAPSDT || nhdr.n_namesz != 8 || memcmp(name, "stapsdt", 8))
			continue;
		if (parse_sdt_note((const char *)data->d_buf + desc_off, nhdr.n_descsz, is64,
				   base_shdr.sh_addr, have_base, &p))
			continue;
		p.pc_off = vaddr_to_off(&f, p.pc);
		p.sema_off = vaddr_to_off(&f, p.semaphore);
		if (append_probe(out, &p)) {
			snprintf(err, errlen, "out of memory reading %s", path);
			elf_file_close(&f);
			sdt_free(out);
			return -1;
		}
	}
	elf_file_close(&f);
	return 0;
}

void sdt_free(struct sdt_list *l)
{
	free(l->probes);
	l->probes = NULL;
	l->n = 0;
}

size_t sdt_count_provider(const char *path, const char *provider)
{
	struct sdt_list l;
	char err[256];
	size_t n = 0;

	if (sdt_read(path, &l, err, sizeof(err)))
		return 0;
	for (size_t i = 0; i < l.n; i++)
		n += !strcmp(l.probes[i].provider, provider);
	sdt_free(&l);
	return n;
}

/* ---- library resolution ---- */

struct dyn_info {
	char *needed[64];
	size_t nneeded;
	char rpath[PATH_MAX];
	char runpath[PATH_MAX];
};

static void dyn_info_free(struct dyn_info *d)
{
	for (size_t i = 0; i < d->nneeded; i++)
		free(d->needed[i]);
	d->nneeded = 0;
}

static int read_dynamic(const char *path, struct dyn_info *d)
{
	struct elf_file f;
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	char err[256];

	memset(d, 0, sizeof(*d));
	if (elf_file_open(path, &f, err, sizeof(err)))
		return -1;
	while ((scn = elf_nextscn(f.elf, scn))) {
		Elf_Data *data;
		GElf_Dyn dyn;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_DYNAMIC)
			continue;
		data = elf_getdata(scn, NULL);
		for (size_t i = 0; data && shdr.sh_entsize && i < shdr.sh_size / shdr.sh_entsize; i++) {
			const char *s;
			if (!gelf_getdyn(data, i, &dyn))
				break;
			if (dyn.d_tag != DT_NEEDED && dyn.d_tag != DT_RPATH && dyn.d_tag != DT_RUNPATH)
				continue;
			s = elf_strptr(f.elf, shdr.sh_link, dyn.d_un.d_val);
			if (!s)
				continue;
			if (dyn.d_tag == DT_NEEDED && d->nneeded < 64) {
				char *copy = strdup(s);
				if (copy)
					d->needed[d->nneeded++] = copy;
			} else if (dyn.d_tag == DT_RPATH) {
				snprintf(d->rpath, sizeof(d->rpath), "%s", s);
			} else if (dyn.d_tag == DT_RUNPATH) {
				snprintf(d->runpath, sizeof(d->runpath), "%s", s);
			}
		}
		break;
	}
	elf_file_close(&f);
	return 0;
}

/* Looks for `lib` in each ':'-separated dir of `dirs`, $ORIGIN = origin. */
static int search_dirs(const char *dirs, const char *origin, const char *lib, char *out, size_t outlen)
{
	const char *p = dirs;

	while (p && *p) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);
		char dir[PATH_MAX], cand[PATH_MAX];

		if (len && len < sizeof(dir)) {
			memcpy(dir, p, len);
			dir[len] = 0;
			int n;
			if (!strncmp(dir, "$ORIGIN", 7))
				n = snprintf(cand, sizeof(cand), "%s%s/%s", origin, dir + 7, lib);
			else if (!strncmp(dir, "${ORIGIN}", 9))
				n = snprintf(cand, sizeof(cand), "%s%s/%s", origin, dir + 9, lib);
			else
				n = snprintf(cand, sizeof(cand), "%s/%s", dir, lib);
			if (n > 0 && (size_t)n < sizeof(cand) && access(cand, R_OK) == 0) {
				snprintf(out, outlen, "%s", cand);
				return 0;
			}
		}
		p = colon ? colon + 1 : NULL;
	}
	return -1;
}

static int find_library(const struct dyn_info *d, const char *origin, const char *lib,
			char *out, size_t outlen)
{
	static const char defaults[] = "/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib64:/usr/lib64:/lib:/usr/lib:/usr/local/lib";

	if (strchr(lib, '/')) {
		snprintf(out, outlen, "%s", lib);
		return access(out, R_OK);
	}
	/* The dynamic loader's order: RPATH (only without RUNPATH),
	 * LD_LIBRARY_PATH, RUNPATH, then the defaults. */
	if (!d->runpath[0] && d->rpath[0] && !search_dirs(d->rpath, origin, lib, out, outlen))
		return 0;
	if (getenv("LD_LIBRARY_PATH") && !search_dirs(getenv("LD_LIBRARY_PATH"), origin, lib, out, outlen))
		return 0;
	if (d->runpath[0] && !search_dirs(d->runpath, origin, lib, out, outlen))
		return 0;
	return search_dirs(defaults, origin, lib, out, outlen);
}

static int find_provider_rec(const char *elf, const char *provider, int depth, char *out, size_t outlen)
{
	struct dyn_info d;
	char real[PATH_MAX], origin[PATH_MAX], lib[PATH_MAX];
	char *slash;
	int found = -1;

	if (sdt_count_provider(elf, provider)) {
		snprintf(out, outlen, "%s", elf);
		return 0;
	}
	if (depth >= 2 || !realpath(elf, real) || read_dynamic(real, &d))
		return -1;
	snprintf(origin, sizeof(origin), "%s", real);
	slash = strrchr(origin, '/');
	if (slash)
		*slash = 0;
	for (size_t i = 0; i < d.nneeded && found; i++)
		if (!find_library(&d, origin, d.needed[i], lib, sizeof(lib)) &&
		    sdt_count_provider(lib, provider)) {
			snprintf(out, outlen, "%s", lib);
			found = 0;
		}
	/* Then one level deeper (a library that needs the probe library). */
	for (size_t i = 0; i < d.nneeded && found; i++)
		if (!find_library(&d, origin, d.needed[i], lib, sizeof(lib)))
			found = find_provider_rec(lib, provider, depth + 1, out, outlen);
	dyn_info_free(&d);
	return found;
}

int sdt_find_provider_elf(const char *exe, const char *provider, char *out, size_t outlen,
			  char *err, size_t errlen)
{
	struct elf_file f;

	if (elf_file_open(exe, &f, err, errlen))
		return -1;
	elf_file_close(&f);
	if (find_provider_rec(exe, provider, 0, out, outlen) == 0)
		return 0;
	snprintf(err, errlen, "%s: no '%s' USDT probes in it or the libraries it needs", exe, provider);
	return -1;
}

int resolve_command(const char *cmd, char *out, size_t outlen)
{
	const char *path = getenv("PATH");

	if (strchr(cmd, '/')) {
		snprintf(out, outlen, "%s", cmd);
		return access(cmd, X_OK);
	}
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *colon = strchr(path, ':');
		size_t len = colon ? (size_t)(colon - path) : strlen(path);
		char cand[PATH_MAX];

		snprintf(cand, sizeof(cand), "%.*s/%s", (int)(len ? len : 1), len ? path : ".", cmd);
		if (access(cand, X_OK) == 0) {
			snprintf(out, outlen, "%s", cand);
			return 0;
		}
		if (!colon)
			break;
		path = colon + 1;
	}
	errno = ENOENT;
	return -1;
}

/* ---- a function's first bytes (core/opencl_attach.c picks its probe site) ---- */
/* func's address in the symbol table of type (SHT_DYNSYM or SHT_SYMTAB), or 0. */
static uint64_t sym_addr(struct elf_file *f, const char *func, GElf_Word type)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	GElf_Sym sym;

	while ((scn = elf_nextscn(f->elf, scn))) {
		Elf_Data *d;
		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != type || !shdr.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < shdr.sh_size / shdr.sh_entsize; i++) {
			const char *name;
			if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value)
				continue;
			name = elf_strptr(f->elf, shdr.sh_link, sym.st_name);
			if (name && !strcmp(name, func))
				return sym.st_value;
		}
	}
	return 0;
}

static uint64_t dynsym_addr(struct elf_file *f, const char *func)
{
	return sym_addr(f, func, SHT_DYNSYM);
}

int elf_has_function(const char *path, const char *func)
{
	struct elf_file f;
	char err[PATH_MAX + 64];
	int found;

	if (elf_file_open(path, &f, err, sizeof(err)))
		return 0;
	found = sym_addr(&f, func, SHT_DYNSYM) || sym_addr(&f, func, SHT_SYMTAB);
	elf_file_close(&f);
	return found;
}

void elf_build_id(const char *path, char out[41])
{
	struct elf_file f;
	char err[PATH_MAX + 64];

	out[0] = 0;
	if (elf_file_open(path, &f, err, sizeof(err)))
		return;
	read_build_id(&f, out);
	elf_file_close(&f);
}

/* ---- a file's functions, read once (core/engines.c attaches many) ---- */
struct elf_sym {
	char *name;
	uint64_t off;      /* file offset of its code */
};

struct elf_syms {
	struct elf_sym *v;
	size_t n, cap;
};

static int sym_cmp(const void *a, const void *b)
{
	return strcmp(((const struct elf_sym *)a)->name, ((const struct elf_sym *)b)->name);
}

/* The file offset of vaddr, through the PT_LOAD segment that holds it; 0 if none. */
static uint64_t vaddr_offset(struct elf_file *f, uint64_t vaddr)
{
	GElf_Phdr ph;
	size_t nph;

	for (size_t i = 0; !elf_getphdrnum(f->elf, &nph) && i < nph; i++)
		if (gelf_getphdr(f->elf, (int)i, &ph) && ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr &&
		    vaddr < ph.p_vaddr + ph.p_filesz)
			return vaddr - ph.p_vaddr + ph.p_offset;
	return 0;
}

static int syms_add_table(struct elf_file *f, Elf_Scn *scn, const GElf_Shdr *shdr, struct elf_syms *s)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	GElf_Sym sym;

	for (size_t i = 0; d && i < shdr->sh_size / shdr->sh_entsize; i++) {
		const char *name;
		uint64_t off;

		if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value ||
		    !(name = elf_strptr(f->elf, shdr->sh_link, sym.st_name)) || !*name ||
		    !(off = vaddr_offset(f, sym.st_value)))
			continue;
		if (ARRAY_GROW(s->v, s->cap, s->n))
			return -1;
		if (!(s->v[s->n].name = strdup(name)))
			return -1;
		s->v[s->n++].off = off;
	}
	return 0;
}

struct elf_syms *elf_syms_open(const char *path)
{
	struct elf_syms *s = calloc(1, sizeof(*s));
	char err[PATH_MAX + 64];
	struct elf_file f;
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	int rc = 0;

	if (!s || elf_file_open(path, &f, err, sizeof(err))) {
		free(s);
		return NULL;
	}
	while (!rc && (scn = elf_nextscn(f.elf, scn)))
		if (gelf_getshdr(scn, &shdr) && (shdr.sh_type == SHT_DYNSYM || shdr.sh_type == SHT_SYMTAB) &&
		    shdr.sh_entsize)
			rc = syms_add_table(&f, scn, &shdr, s);
	elf_file_close(&f);
	if (rc) {
		elf_syms_close(s);
		return NULL;
	}
	qsort(s->v, s->n, sizeof(*s->v), sym_cmp);
	return s;
}

uint64_t elf_sym_offset(const struct elf_syms *s, const char *name)
{
	struct elf_sym key = { .name = (char *)name }, *hit;

	hit = s && s->n ? bsearch(&key, s->v, s->n, sizeof(*s->v), sym_cmp) : NULL;
	return hit ? hit->off : 0;
}

void elf_syms_close(struct elf_syms *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].name);
	free(s->v);
	free(s);
}

int elf_interp(const char *path, char *out, size_t size)
{
	struct elf_file f;
	char err[PATH_MAX + 64];
	GElf_Phdr ph;
	size_t nph;
	int rc = -1;

	if (elf_file_open(path, &f, err, sizeof(err)))
		return -1;
	for (size_t i = 0; !elf_getphdrnum(f.elf, &nph) && i < nph && rc; i++) {
		if (!gelf_getphdr(f.elf, (int)i, &ph) || ph.p_type != PT_INTERP || !ph.p_filesz ||
		    ph.p_filesz > size)
			continue;
		if (pread(f.fd, out, ph.p_filesz, (off_t)ph.p_offset) == (ssize_t)ph.p_filesz &&
		    out[ph.p_filesz - 1] == 0)
			rc = 0;
	}
	elf_file_close(&f);
	return rc;
}

int elf_func_bytes(const char *path, const char *func, uint8_t *buf, size_t n)
{
	struct elf_file f;
	char err[PATH_MAX + 64];
	uint64_t addr;
	GElf_Phdr ph;
	size_t nph;
	int rc = -1;

	if (elf_file_open(path, &f, err, sizeof(err)))
		return -1;
	addr = dynsym_addr(&f, func);
	for (size_t i = 0; addr && !elf_getphdrnum(f.elf, &nph) && i < nph && rc; i++) {
		if (!gelf_getphdr(f.elf, (int)i, &ph) || ph.p_type != PT_LOAD || addr < ph.p_vaddr ||
		    addr + n > ph.p_vaddr + ph.p_filesz)
			continue;
		if (pread(f.fd, buf, n, (off_t)(addr - ph.p_vaddr + ph.p_offset)) == (ssize_t)n)
			rc = 0;
		break;
	}
	elf_file_close(&f);
	return rc;
}
