/* symbols.c - user and kernel symbolization (see symbols.h). */
#include "analysis/symbols.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include "core/grow.h"

/* A maps line is at most PATH_MAX of path plus ~80 bytes of fields; longer
 * lines are not from a sane kernel and are skipped whole. */
#define MAPS_LINE_MAX 8192
#define UNKNOWN "[unknown]"
/* No kernel function is this long; farther from a symbol is no match. */
#define KERNEL_FUNC_MAX (1u << 20)
/* An address in no mapping re-reads the maps (a dlopen since), but not more
 * often than this: junk addresses from a broken unwind must stay cheap. */
#define MISS_RELOAD_INTERVAL_NS 100000000ull

struct sym {
	uint64_t addr, size;
	const char *name;   /* into one of the file's string tables */
	int rank;           /* lower wins among aliases at one address */
};

struct load_seg {
	uint64_t vaddr, offset, filesz;
};

struct sym_file {
	dev_t dev;
	ino_t ino;
	char *base;           /* basename for fallbacks */
	struct sym *syms;
	size_t nsyms;
	struct load_seg *segs;
	size_t nsegs;
	char *strtabs[2];     /* copies of .strtab / .dynstr */
	struct sym_file *next;
};

struct sym_map {
	uint64_t start, end, pgoff;
	struct sym_file *file;        /* NULL for anonymous and [pseudo] mappings */
	char *name;           /* path or [vdso] etc. */
};

/* A JIT's /tmp/perf-PID.map: "START SIZE NAME" lines, hex, appended as
 * code is compiled (node --perf-basic-prof, python -X perf). */
struct jit_map {
	struct sym *syms;     /* sorted by addr; names into text */
	size_t nsyms;
	char *text;
	off_t loaded_size;    /* the file's size when read: it only grows */
};

struct sym_proc {
	pid_t pid;
	struct sym_map *maps;
	size_t nmaps;
	uint64_t miss_reload_ns;  /* last re-read caused by a miss */
	struct jit_map jit;
	struct sym_proc *next;
};

/* The C++ ABI's demangler (libstdc++): a C function, though C++'s own. */
char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

struct ksym {
	uint64_t addr;
	size_t name_off;
};

struct symbolizer {
	struct sym_file *files;
	struct sym_proc *procs;
	struct ksym *ksyms;
	size_t nksyms;
	char *knames;
	int kernel_loaded, kernel_ok;
};

struct symbolizer *sym_new(void)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	return calloc(1, sizeof(struct symbolizer));
}

static void free_file(struct sym_file *f)
{
	free(f->base);
	free(f->syms);
	free(f->segs);
	free(f->strtabs[0]);
	free(f->strtabs[1]);
	free(f);
}

static void clear_maps(struct sym_proc *p)
{
	for (size_t i = 0; i < p->nmaps; i++)
		free(p->maps[i].name);
	free(p->maps);
	p->maps = NULL;
	p->nmaps = 0;
}

static void clear_jit(struct jit_map *j)
{
	free(j->syms);
	free(j->text);
	*j = (struct jit_map){ 0 };
}

static void free_proc(struct sym_proc *p)
{
	clear_maps(p);
	clear_jit(&p->jit);
	free(p);
}

void sym_free(struct symbolizer *s)
{
	if (!s)
		return;
	while (s->files) {
		struct sym_file *next = s->files->next;
		free_file(s->files);
		s->files = next;
	}
	while (s->procs) {
		struct sym_proc *next = s->procs->next;
		free_proc(s->procs);
		s->procs = next;
	}
	free(s->ksyms);
	free(s->knames);
	free(s);
}

/* ---- ELF ---- */

static int sym_by_addr(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->rank - y->rank;
}

/* Globals name a function better than weak aliases or local labels. */
static int binding_rank(int bind)
{
	return bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
}

static int append_syms(struct sym_file *f, Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, int which)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	Elf_Scn *str_scn = elf_getscn(elf, sh->sh_link);
	Elf_Data *str = str_scn ? elf_getdata(str_scn, NULL) : NULL;
	if (!data || !str || !str->d_buf || str->d_size == 0 || sh->sh_entsize == 0)
		return 0;
	size_t n = sh->sh_size / sh->sh_entsize;
	char *strtab = malloc(str->d_size + 1);
	struct sym *syms = realloc(f->syms, (f->nsyms + n) * sizeof(*syms) + 1);
	if (!strtab || !syms) {
		free(strtab);
		if (syms)
			f->syms = syms;
		return -1;
	}
	f->syms = syms;
	memcpy(strtab, str->d_buf, str->d_size);
	strtab[str->d_size] = '\0'; /* a truncated table cannot run off */
	f->strtabs[which] = strtab;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym es;
		if (!gelf_getsym(data, (int)i, &es))
			break;
		int type = GELF_ST_TYPE(es.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || es.st_shndx == SHN_UNDEF ||
		    es.st_value == 0 || es.st_name >= str->d_size || strtab[es.st_name] == '\0')
			continue; /* an unnamed symbol would print as an empty frame */
		f->syms[f->nsyms++] = (struct sym){ .addr = es.st_value, .size = es.st_size,
					     .name = strtab + es.st_name,
					     .rank = binding_rank(GELF_ST_BIND(es.st_info)) };
	}
	return 0;
}

/* Sorts and keeps the best-ranked name per address. */
static void dedupe_syms(struct sym_file *f)
{
	/* a file without symbols has syms == NULL, which qsort must not get */
	if (f->nsyms < 2)
		return;
	qsort(f->syms, f->nsyms, sizeof(*f->syms), sym_by_addr);
	size_t out = 0;
	for (size_t i = 0; i < f->nsyms; i++)
		if (out == 0 || f->syms[out - 1].addr != f->syms[i].addr)
			f->syms[out++] = f->syms[i];
	f->nsyms = out;
}

static int load_segments(struct sym_file *f, Elf *elf)
{
	size_t n;
	if (elf_getphdrnum(elf, &n))
		return 0;
	f->segs = calloc(n ? n : 1, sizeof(*f->segs));
	if (!f->segs)
		return -1;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			f->segs[f->nsegs++] = (struct load_seg){ ph.p_vaddr, ph.p_offset, ph.p_filesz };
	}
	return 0;
}

/* Loads symbols and load segments; a file that is not ELF keeps neither,
 * which only means its addresses get the file+offset fallback. */
static int load_elf(struct sym_file *f, int fd)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return 0;
	int rc = 0;
	if (elf_kind(elf) == ELF_K_ELF) {
		rc = load_segments(f, elf);
		Elf_Scn *scn = NULL;
		while (rc == 0 && (scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh))
				continue;
			if (sh.sh_type == SHT_SYMTAB && !f->strtabs[0])
				rc = append_syms(f, elf, scn, &sh, 0);
			else if (sh.sh_type == SHT_DYNSYM && !f->strtabs[1])
				rc = append_syms(f, elf, scn, &sh, 1);
		}
		dedupe_syms(f);
	}
	elf_end(elf);
	return rc;
}

/* Opens a mapped file the way that survives deletion and namespaces. */
static int open_mapped(pid_t pid, const struct sym_map *m, const char *path)
{
	char p[MAPS_LINE_MAX + 64];
	snprintf(p, sizeof(p), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, m->start, m->end);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	snprintf(p, sizeof(p), "/proc/%d/root%s", (int)pid, path);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	return open(path, O_RDONLY | O_CLOEXEC);
}

static const char *basename_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* The cached file for (dev, ino), loading it on first sight. NULL only on
 * allocation failure; an unopenable file is cached without symbols. */
static struct sym_file *get_file(struct symbolizer *s, pid_t pid, const struct sym_map *m, dev_t dev, ino_t ino,
			 const char *path)
{
	for (struct sym_file *f = s->files; f; f = f->next)
		if (f->dev == dev && f->ino == ino)
			return f;
	struct sym_file *f = calloc(1, sizeof(*f));
	if (!f || !(f->base = strdup(basename_of(path)))) {
		free(f);
		return NULL;
	}
	f->dev = dev;
	f->ino = ino;
	int fd = open_mapped(pid, m, path);
	if (fd >= 0) {
		int rc = load_elf(f, fd);
		close(fd);
		if (rc) {
			free_file(f);
			return NULL;
		}
	}
	f->next = s->files;
	s->files = f;
	return f;
}

/* ---- /proc/PID/maps ---- */

/* Drops the rest of an overlong line. */
static void skip_line(FILE *fp)
{
	int c;
	while ((c = getc(fp)) != EOF && c != '\n')
		;
}

/* Parses one line; 1 = an executable mapping in *m, 0 = skip, -1 = ENOMEM. */
static int parse_maps_line(struct symbolizer *s, pid_t pid, char *line, struct sym_map *m)
{
	uint64_t start, end, pgoff;
	unsigned major, minor;
	unsigned long long ino;
	char perms[8];
	int path_at = 0;
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %llu %n",
		   &start, &end, perms, &pgoff, &major, &minor, &ino, &path_at) < 7 ||
	    strlen(perms) < 3 || perms[2] != 'x' || end <= start)
		return 0;
	char *path = line + path_at;
	path[strcspn(path, "\n")] = '\0';
	/* The kernel appends this to paths of unlinked files. */
	size_t len = strlen(path);
	static const char deleted[] = " (deleted)";
	if (len > sizeof(deleted) - 1 && !strcmp(path + len - (sizeof(deleted) - 1), deleted))
		path[len - (sizeof(deleted) - 1)] = '\0';
	*m = (struct sym_map){ .start = start, .end = end, .pgoff = pgoff };
	m->name = strdup(path[0] ? path : "[anon]");
	if (!m->name)
		return -1;
	if (ino != 0 && path[0] == '/') {
		m->file = get_file(s, pid, m, makedev(major, minor), (ino_t)ino, path);
		if (!m->file) {
			free(m->name);
			return -1;
		}
	}
	return 1;
}

static struct sym_proc *find_proc(struct symbolizer *s, pid_t pid)
{
	for (struct sym_proc *p = s->procs; p; p = p->next)
		if (p->pid == pid)
			return p;
	return NULL;
}

static int read_maps(struct symbolizer *s, struct sym_proc *p, const char *path)
{
	FILE *fp = fopen(path, "re");
	if (!fp)
		return -1;
	char *line = malloc(MAPS_LINE_MAX);
	size_t cap = 0;
	int rc = line ? 0 : -1;
	while (rc == 0 && fgets(line, MAPS_LINE_MAX, fp)) {
		if (!strchr(line, '\n') && !feof(fp)) {
			skip_line(fp);
			continue;
		}
		if (ARRAY_GROW(p->maps, cap, p->nmaps)) {
			rc = -1;
			break;
		}
		int got = parse_maps_line(s, p->pid, line, &p->maps[p->nmaps]);
		if (got < 0)
			rc = -1;
		else
			p->nmaps += (size_t)got;
	}
	free(line);
	fclose(fp);
	return rc;
}

/* Replaces p's maps with path's; on failure the old maps stay (a process
 * that exited keeps the maps read while it lived). An exited but unreaped
 * process (a zombie) has an empty maps file: that counts as a failure. */
static int reload_maps(struct symbolizer *s, struct sym_proc *p, const char *path)
{
	struct sym_proc fresh = { .pid = p->pid };
	if (read_maps(s, &fresh, path) || (fresh.nmaps == 0 && p->nmaps > 0)) {
		clear_maps(&fresh);
		return -1;
	}
	clear_maps(p);
	p->maps = fresh.maps;
	p->nmaps = fresh.nmaps;
	return 0;
}

static void proc_maps_path(pid_t pid, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/%d/maps", (int)pid);
}

int sym_load_maps_file(struct symbolizer *s, pid_t pid, const char *maps_path)
{
	struct sym_proc *p = find_proc(s, pid);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -1;
		p->pid = pid;
		p->next = s->procs;
		s->procs = p;
	}
	p->miss_reload_ns = 0;
	return reload_maps(s, p, maps_path);
}

int sym_load_pid(struct symbolizer *s, pid_t pid)
{
	char path[64];
	proc_maps_path(pid, path, sizeof(path));
	return sym_load_maps_file(s, pid, path);
}

void sym_forget_pid(struct symbolizer *s, pid_t pid)
{
	for (struct sym_proc **pp = &s->procs; *pp; pp = &(*pp)->next) {
		if ((*pp)->pid == pid) {
			struct sym_proc *p = *pp;
			*pp = p->next;
			free_proc(p);
			return;
		}
	}
}

/* ---- lookups ---- */

static uint64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const struct sym_map *find_map(const struct sym_proc *p, uint64_t addr)
{
	for (size_t i = 0; i < p->nmaps; i++)
		if (addr >= p->maps[i].start && addr < p->maps[i].end)
			return &p->maps[i];
	return NULL;
}

static uint64_t file_vaddr(const struct sym_file *f, uint64_t file_off)
{
	for (size_t i = 0; i < f->nsegs; i++) {
		const struct load_seg *g = &f->segs[i];
		if (file_off >= g->offset && file_off < g->offset + g->filesz)
			return file_off - g->offset + g->vaddr;
	}
	return file_off; /* no program headers: offsets are the best we have */
}

/* The last symbol at or below vaddr, if vaddr is within its size (symbols
 * without a size, common in assembly, extend to the next one). */
static const struct sym *find_sym(const struct sym_file *f, uint64_t vaddr)
{
	size_t lo = 0, hi = f->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (f->syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct sym *sym = &f->syms[lo - 1];
	if (sym->size && vaddr >= sym->addr + sym->size)
		return NULL;
	return sym;
}

/* ---- JIT maps and C++ names ---- */

static int jit_parse(struct jit_map *j)
{
	size_t cap = 0;

	for (char *line = j->text, *next; line && *line; line = next) {
		uint64_t start, size;
		int name_at = 0;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (sscanf(line, "%" SCNx64 " %" SCNx64 " %n", &start, &size, &name_at) < 2 || !name_at)
			continue;   /* not a map line: skipped, never guessed */
		if (ARRAY_GROW(j->syms, cap, j->nsyms))
			return -1;
		j->syms[j->nsyms++] = (struct sym){ start, size, line + name_at, 0 };
	}
	qsort(j->syms, j->nsyms, sizeof(*j->syms), sym_by_addr);
	return 0;
}

/* (Re)reads pid's perf map when it has grown: through its root, so a
 * process in a container is found by the name it wrote. */
static void jit_load(struct sym_proc *p)
{
	char path[96];
	struct stat st;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/root/tmp/perf-%d.map", (int)p->pid, (int)p->pid);
	if (stat(path, &st) && (snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)p->pid), stat(path, &st)))
		return;
	if (st.st_size == p->jit.loaded_size || !(fp = fopen(path, "re")))
		return;
	clear_jit(&p->jit);
	p->jit.text = calloc(1, (size_t)st.st_size + 1);
	if (p->jit.text && fread(p->jit.text, 1, (size_t)st.st_size, fp) == (size_t)st.st_size &&
	    !jit_parse(&p->jit))
		p->jit.loaded_size = st.st_size;
	else
		clear_jit(&p->jit);
	fclose(fp);
}

static const struct sym *jit_find(const struct jit_map *j, uint64_t addr)
{
	const struct sym_file f = { .syms = j->syms, .nsyms = j->nsyms };
	const struct sym *sym = find_sym(&f, addr);

	return sym && addr < sym->addr + sym->size ? sym : NULL;
}

/* name into buf, demangled when it is a C++ (Itanium ABI) name. */
static void put_name(const char *name, char *buf, size_t len)
{
	int status = -1;
	char *d = !strncmp(name, "_Z", 2) ? __cxa_demangle(name, NULL, NULL, &status) : NULL;

	snprintf(buf, len, "%s", d && !status ? d : name);
	free(d);
}

enum sym_result sym_user(struct symbolizer *s, pid_t pid, uint64_t addr, char *buf, size_t len)
{
	snprintf(buf, len, "%s", UNKNOWN);
	if (!find_proc(s, pid))
		sym_load_pid(s, pid); /* unreadable maps leave an empty entry */
	struct sym_proc *p = find_proc(s, pid);
	if (!p)
		return SYM_ERROR;
	const struct sym_map *m = find_map(p, addr);
	uint64_t now = monotonic_ns();
	if (!m && now - p->miss_reload_ns >= MISS_RELOAD_INTERVAL_NS) {
		p->miss_reload_ns = now;
		char path[64];
		proc_maps_path(pid, path, sizeof(path));
		reload_maps(s, p, path);
		m = find_map(p, addr);
	}
	if (!m)
		return SYM_FALLBACK;
	uint64_t file_off = addr - m->start + m->pgoff;
	if (!m->file) {
		const struct sym *jit = jit_find(&p->jit, addr);

		if (!jit) {
			jit_load(p);
			jit = jit_find(&p->jit, addr);
		}
		if (jit) {
			snprintf(buf, len, "%s", jit->name);
			return SYM_FOUND;
		}
		snprintf(buf, len, "%s+0x%" PRIx64, m->name, addr - m->start);
		return SYM_FALLBACK;
	}
	uint64_t vaddr = file_vaddr(m->file, file_off);
	const struct sym *sym = find_sym(m->file, vaddr);
	if (!sym) {
		snprintf(buf, len, "%s+0x%" PRIx64, m->file->base, vaddr);
		return SYM_FALLBACK;
	}
	put_name(sym->name, buf, len);
	return SYM_FOUND;
}

/* ---- kernel ---- */

static int ksym_by_addr(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int add_ksym(struct symbolizer *s, size_t *cap, size_t *names_len, size_t *names_cap,
		    uint64_t addr, const char *name)
{
	size_t need = strlen(name) + 1;
	/* room for the name, its NUL at knames[*names_len + need - 1] */
	if (ARRAY_GROW(s->knames, *names_cap, *names_len + need - 1) ||
	    ARRAY_GROW(s->ksyms, *cap, s->nksyms))
		return -1;
	memcpy(s->knames + *names_len, name, need);
	s->ksyms[s->nksyms++] = (struct ksym){ addr, *names_len };
	*names_len += need;
	return 0;
}

static void load_kallsyms(struct symbolizer *s)
{
	s->kernel_loaded = 1;
	FILE *fp = fopen("/proc/kallsyms", "re");
	if (!fp)
		return;
	char line[512], name[256], type;
	size_t cap = 0, names_len = 0, names_cap = 0;
	int nonzero = 0;
	uint64_t addr;
	while (fgets(line, sizeof(line), fp)) {
		if (!strchr(line, '\n') && !feof(fp)) {
			skip_line(fp);
			continue;
		}
		if (sscanf(line, "%" SCNx64 " %c %255s", &addr, &type, name) != 3)
			continue;
		/* Text symbols only: stacks hold code addresses. */
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		nonzero |= addr != 0;
		if (add_ksym(s, &cap, &names_len, &names_cap, addr, name))
			break;
	}
	fclose(fp);
	qsort(s->ksyms, s->nksyms, sizeof(*s->ksyms), ksym_by_addr);
	s->kernel_ok = nonzero && s->nksyms > 0;
}

int sym_kernel_available(struct symbolizer *s)
{
	if (!s->kernel_loaded)
		load_kallsyms(s);
	return s->kernel_ok;
}

enum sym_result sym_kernel(struct symbolizer *s, uint64_t addr, char *buf, size_t len)
{
	snprintf(buf, len, "%s", UNKNOWN);
	if (!sym_kernel_available(s))
		return SYM_FALLBACK;
	size_t lo = 0, hi = s->nksyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->ksyms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Past the last symbol (or far past any function) is not a match. */
	if (lo == 0 || addr - s->ksyms[lo - 1].addr > KERNEL_FUNC_MAX)
		return SYM_FALLBACK;
	snprintf(buf, len, "%s", s->knames + s->ksyms[lo - 1].name_off);
	return SYM_FOUND;
}

uint64_t sym_kernel_lookup_name(struct symbolizer *s, const char *name)
{
	if (!sym_kernel_available(s))
		return 0;
	for (size_t i = 0; i < s->nksyms; i++)
		if (!strcmp(s->knames + s->ksyms[i].name_off, name))
			return s->ksyms[i].addr;
	return 0;
}
