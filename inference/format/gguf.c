/* gguf.c - the GGUF reader (see gguf.h).
 *
 * Layout: "GGUF", u32 version, u64 tensor count, u64 metadata count; the
 * metadata (key string, u32 type, value); the tensor infos (name, u32
 * n_dims, u64 ne[n_dims], u32 type, u64 offset); padding to
 * general.alignment; the data section. Strings are u64 length + bytes.
 * Everything is little-endian, as on every host this engine builds for. */
#include <stdlib.h>
#include <string.h>
#include "format/gguf.h"
#include "spantrace/probes.h"

#define MAX_KV      (1u << 20)
#define MAX_TENSORS (1u << 16)
#define MAX_STRING  (1u << 24)   /* a chat template is kilobytes; nothing is 16 MB */
#define MAX_ELEMS   ((uint64_t)1 << 40)
#define DEFAULT_ALIGNMENT 32

struct ggml_type_info {
	uint32_t block, bytes;   /* elements per block, bytes per block */
};

/* ggml's numbering (names: spantrace/probes.h, the tracer shows them too). */
static const struct ggml_type_info type_info[TENSOR_DTYPE_COUNT] = {
	[0] = { 1, 4 },      [1] = { 1, 2 },      [2] = { 32, 18 },    [3] = { 32, 20 },
	[6] = { 32, 22 },    [7] = { 32, 24 },    [8] = { 32, 34 },    [9] = { 32, 36 },
	[10] = { 256, 84 },  [11] = { 256, 110 }, [12] = { 256, 144 }, [13] = { 256, 176 },
	[14] = { 256, 210 }, [15] = { 256, 292 }, [16] = { 256, 66 },  [17] = { 256, 74 },
	[18] = { 256, 98 },  [19] = { 256, 50 },  [20] = { 32, 18 },   [21] = { 256, 110 },
	[22] = { 256, 82 },  [23] = { 256, 136 }, [24] = { 1, 1 },     [25] = { 1, 2 },
	[26] = { 1, 4 },     [27] = { 1, 8 },     [28] = { 1, 8 },     [29] = { 256, 56 },
	[30] = { 1, 2 },     [34] = { 256, 54 },  [35] = { 256, 66 },  [39] = { 32, 17 },
};
#define N_TYPES TENSOR_DTYPE_COUNT

const char *ggml_type_name(uint32_t type)
{
	return tensor_dtype_name(type);
}

uint32_t ggml_type_block(uint32_t type)
{
	return type < N_TYPES ? type_info[type].block : 0;
}

uint64_t ggml_type_bytes(uint32_t type, uint64_t n)
{
	uint32_t block = ggml_type_block(type);

	if (!block || n % block || n > MAX_ELEMS)
		return 0;
	return n / block * type_info[type].bytes;
}

/* ---- a bounds-checked cursor over the header ---- */

struct cursor {
	const uint8_t *p, *end, *base;
	InferError *err;
	int failed;
};

static int fail_at(struct cursor *c, const char *what)
{
	if (!c->failed)
		infer_fail(c->err, "gguf: truncated or corrupt at byte %zu: %s", (size_t)(c->p - c->base), what);
	c->failed = 1;
	return -1;
}

static int take(struct cursor *c, void *out, size_t n, const char *what)
{
	if (c->failed || (size_t)(c->end - c->p) < n)
		return fail_at(c, what);
	memcpy(out, c->p, n);
	c->p += n;
	return 0;
}

static int skip(struct cursor *c, uint64_t n, const char *what)
{
	if (c->failed || (uint64_t)(c->end - c->p) < n)
		return fail_at(c, what);
	c->p += n;
	return 0;
}

static int take_str(struct cursor *c, const char **s, uint32_t *len, const char *what)
{
	uint64_t n;

	if (take(c, &n, 8, what) || n > MAX_STRING)
		return fail_at(c, what);
	*s = (const char *)c->p;
	*len = (uint32_t)n;
	return skip(c, n, what);
}

/* Names and keys are text: a control byte in one is corruption, and would
 * break the one-line error that names it. */
static int has_control(const char *s, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return 1;
	return 0;
}

const char *gguf_clean(const char *s, uint32_t len, char *buf, size_t size)
{
	size_t n = 0;

	for (uint32_t i = 0; i < len && n + 1 < size; i++)
		buf[n++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	if (size)
		buf[n] = '\0';
	return buf;
}

static uint32_t scalar_bytes(uint32_t t)
{
	static const uint8_t size[GGUF_VTYPE_COUNT] = { [GGUF_U8] = 1, [GGUF_I8] = 1, [GGUF_U16] = 2,
		[GGUF_I16] = 2, [GGUF_U32] = 4, [GGUF_I32] = 4, [GGUF_F32] = 4, [GGUF_BOOL] = 1,
		[GGUF_U64] = 8, [GGUF_I64] = 8, [GGUF_F64] = 8 };
	return t < GGUF_VTYPE_COUNT ? size[t] : 0;
}

/* One metadata value of type t (not an array), skipped after checking. */
static int skip_value(struct cursor *c, uint32_t t)
{
	const char *s;
	uint32_t len;

	if (t == GGUF_STRING)
		return take_str(c, &s, &len, "a string value");
	if (!scalar_bytes(t)) {
		infer_fail(c->err, "gguf: metadata value of unknown type %u at byte %zu", t,
			   (size_t)(c->p - c->base));
		c->failed = 1;
		return -1;
	}
	return skip(c, scalar_bytes(t), "a value");
}

/* count elements of type t, skipped after checking; an element may itself
 * be an array (one level: no model nests deeper). */
static int skip_elements(struct cursor *c, uint32_t t, uint64_t count, int depth)
{
	uint64_t bytes;

	if (t != GGUF_ARRAY && t != GGUF_STRING && !scalar_bytes(t)) {
		infer_fail(c->err, "gguf: array of unknown element type %u at byte %zu", t,
			   (size_t)(c->p - c->base));
		return c->failed = 1, -1;
	}
	if (t == GGUF_ARRAY) {
		for (uint64_t i = 0; i < count; i++) {
			uint32_t et;
			uint64_t n;

			if (depth > 0)
				return fail_at(c, "arrays nested more than one deep");
			if (take(c, &et, 4, "an array type") || take(c, &n, 8, "an array length") ||
			    skip_elements(c, et, n, depth + 1))
				return -1;
		}
		return 0;
	}
	if (t != GGUF_STRING && scalar_bytes(t)) {
		if (__builtin_mul_overflow(count, scalar_bytes(t), &bytes))
			return fail_at(c, "an array longer than the file");
		return skip(c, bytes, "an array");
	}
	for (uint64_t i = 0; i < count; i++)
		if (skip_value(c, t))
			return -1;
	return 0;
}

static int read_kv(struct cursor *c, struct gguf_kv *kv)
{
	const char *key;

	if (take_str(c, &key, &kv->key_len, "a metadata key") || take(c, &kv->type, 4, "a value type"))
		return -1;
	kv->key = key;
	kv->count = 1;
	if (kv->key_len == 0 || has_control(key, kv->key_len)) {
		infer_fail(c->err, "gguf: a metadata key at byte %zu is empty or has a control character",
			   (size_t)((const uint8_t *)key - c->base));
		return c->failed = 1, -1;
	}
	if (kv->type != GGUF_ARRAY) {
		kv->value = c->p;
		return skip_value(c, kv->type);
	}
	if (take(c, &kv->elem_type, 4, "an array type") || take(c, &kv->count, 8, "an array length"))
		return -1;
	kv->value = c->p;
	return skip_elements(c, kv->elem_type, kv->count, 0);
}

/* ---- tensors ---- */

static int read_tensor_info(struct cursor *c, struct gguf_tensor *t, uint64_t index)
{
	const char *name;
	uint32_t len;
	uint64_t elems = 1;

	if (take_str(c, &name, &len, "a tensor name"))
		return -1;
	if (len == 0 || len > GGUF_NAME_MAX)
		return infer_fail(c->err, "gguf: tensor %llu has a name of %u bytes (1..%d)",
				  (unsigned long long)index, len, GGUF_NAME_MAX);
	memcpy(t->name, name, len);
	t->name[len] = '\0';
	if (has_control(name, len))
		return infer_fail(c->err, "gguf: tensor %llu has a control character in its name",
				  (unsigned long long)index);
	if (take(c, &t->n_dims, 4, "a tensor's dimension count"))
		return -1;
	if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
		return infer_fail(c->err, "gguf: tensor %s has %u dimensions (1..%d)", t->name, t->n_dims,
				  GGUF_MAX_DIMS);
	for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
		t->ne[d] = 1;
		if (d < t->n_dims && take(c, &t->ne[d], 8, "a tensor dimension"))
			return -1;
		if (t->ne[d] == 0 || t->ne[d] > MAX_ELEMS || __builtin_mul_overflow(elems, t->ne[d], &elems) ||
		    elems > MAX_ELEMS)
			return infer_fail(c->err, "gguf: tensor %s has an absurd dimension %llu", t->name,
					  (unsigned long long)t->ne[d]);
	}
	if (take(c, &t->type, 4, "a tensor type") || take(c, &t->offset, 8, "a tensor offset"))
		return -1;
	if (!ggml_type_block(t->type))
		return infer_fail(c->err, "gguf: tensor %s has unknown type %u", t->name, t->type);
	if (t->ne[0] % ggml_type_block(t->type))
		return infer_fail(c->err, "gguf: tensor %s: %s rows of %llu elements are not whole blocks of %u",
				  t->name, ggml_type_name(t->type), (unsigned long long)t->ne[0],
				  ggml_type_block(t->type));
	t->bytes = ggml_type_bytes(t->type, elems);
	return 0;
}

static int by_offset(const void *a, const void *b)
{
	const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
	const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(const struct gguf_tensor *const *)a)->name, (*(const struct gguf_tensor *const *)b)->name);
}

/* Every tensor aligned, inside the data section, none overlapping another,
 * no name twice. */
static int check_layout(struct gguf *g, const uint8_t *base, uint64_t size, InferError *err)
{
	uint64_t data_size = size - g->data_offset;
	const struct gguf_tensor **order = malloc((g->n_tensors ? g->n_tensors : 1) * sizeof(*order));
	int rc = 0;

	if (!order)
		return infer_fail(err, "gguf: out of memory for %llu tensors", (unsigned long long)g->n_tensors);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		struct gguf_tensor *t = &g->tensors[i];

		order[i] = t;
		if (t->offset % g->alignment) {
			rc = infer_fail(err, "gguf: tensor %s at offset %llu is not aligned to %llu", t->name,
					(unsigned long long)t->offset, (unsigned long long)g->alignment);
			goto out;
		}
		if (t->offset > data_size || t->bytes > data_size - t->offset) {
			rc = infer_fail(err, "gguf: tensor %s (%llu bytes at %llu) runs past the end of the file "
					"(data section of %llu bytes): truncated?", t->name,
					(unsigned long long)t->bytes, (unsigned long long)t->offset,
					(unsigned long long)data_size);
			goto out;
		}
		t->data = base + g->data_offset + t->offset;
	}
	qsort(order, g->n_tensors, sizeof(*order), by_offset);
	for (uint64_t i = 1; i < g->n_tensors; i++)
		if (order[i - 1]->offset + order[i - 1]->bytes > order[i]->offset) {
			rc = infer_fail(err, "gguf: tensors %s and %s overlap", order[i - 1]->name, order[i]->name);
			goto out;
		}
	qsort(order, g->n_tensors, sizeof(*order), by_name);
	for (uint64_t i = 1; i < g->n_tensors && !rc; i++)
		if (!strcmp(order[i - 1]->name, order[i]->name))
			rc = infer_fail(err, "gguf: tensor %s appears twice", order[i]->name);
out:
	free(order);
	return rc;
}

static int by_key(const void *a, const void *b)
{
	const struct gguf_kv *x = *(const struct gguf_kv *const *)a;
	const struct gguf_kv *y = *(const struct gguf_kv *const *)b;
	int c = memcmp(x->key, y->key, x->key_len < y->key_len ? x->key_len : y->key_len);

	return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* No metadata key twice: which copy a reader takes would decide how the
 * model runs (llama.cpp refuses such a file too). */
static int check_keys(const struct gguf *g, InferError *err)
{
	const struct gguf_kv **order = malloc((g->n_kv ? g->n_kv : 1) * sizeof(*order));
	int rc = 0;
	char name[96];

	if (!order)
		return infer_fail(err, "gguf: out of memory for %llu metadata keys", (unsigned long long)g->n_kv);
	for (uint64_t i = 0; i < g->n_kv; i++)
		order[i] = &g->kv[i];
	qsort(order, g->n_kv, sizeof(*order), by_key);
	for (uint64_t i = 1; i < g->n_kv && !rc; i++)
		if (!by_key(&order[i - 1], &order[i]))
			rc = infer_fail(err, "gguf: metadata key %s appears twice",
					gguf_clean(order[i]->key, order[i]->key_len, name, sizeof(name)));
	free(order);
	return rc;
}

static int read_header(struct cursor *c, struct gguf *g)
{
	char magic[4];

	if (take(c, magic, 4, "the magic"))
		return -1;
	if (memcmp(magic, "GGUF", 4))
		return infer_fail(c->err, "gguf: not a GGUF file (magic is not \"GGUF\")");
	if (take(c, &g->version, 4, "the version"))
		return -1;
	if (g->version != 2 && g->version != 3)
		return infer_fail(c->err, "gguf: version %u is not supported (2 or 3)", g->version);
	if (take(c, &g->n_tensors, 8, "the tensor count") || take(c, &g->n_kv, 8, "the metadata count"))
		return -1;
	if (g->n_tensors > MAX_TENSORS || g->n_kv > MAX_KV)
		return infer_fail(c->err, "gguf: %llu tensors and %llu metadata keys: absurd counts",
				  (unsigned long long)g->n_tensors, (unsigned long long)g->n_kv);
	g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof(*g->kv));
	g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof(*g->tensors));
	if (!g->kv || !g->tensors)
		return infer_fail(c->err, "gguf: out of memory for the header");
	return 0;
}

/* A uint32 power of two, as llama.cpp reads it (another type aborts it). */
static int read_alignment(struct gguf *g, InferError *err)
{
	const struct gguf_kv *kv = gguf_find(g, "general.alignment");
	uint64_t a = DEFAULT_ALIGNMENT;

	if (kv && kv->type != GGUF_U32)
		return infer_fail(err, "gguf: general.alignment is not a uint32 (type %u)", kv->type);
	if (gguf_get_uint(g, "general.alignment", 0, 1u << 16, &a, err))
		return -1;
	if (a == 0 || (a & (a - 1)))
		return infer_fail(err, "gguf: general.alignment %llu is not a power of two",
				  (unsigned long long)a);
	g->alignment = a;
	return 0;
}

int gguf_parse(struct gguf *g, const void *data, size_t size, InferError *err)
{
	struct cursor c = { .p = data, .end = (const uint8_t *)data + size, .base = data, .err = err };
	uint64_t pos;

	memset(g, 0, sizeof(*g));
	if (read_header(&c, g))
		goto fail;
	for (uint64_t i = 0; i < g->n_kv; i++)
		if (read_kv(&c, &g->kv[i]))
			goto fail;
	if (check_keys(g, err) || read_alignment(g, err))
		goto fail;
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (read_tensor_info(&c, &g->tensors[i], i))
			goto fail;
	pos = (uint64_t)(c.p - c.base);
	g->data_offset = (pos + g->alignment - 1) / g->alignment * g->alignment;
	if (g->data_offset > size) {
		infer_fail(err, "gguf: the file ends before its data section (%zu bytes): truncated", size);
		goto fail;
	}
	if (check_layout(g, data, size, err))
		goto fail;
	return 0;
fail:
	gguf_free(g);
	return -1;
}

void gguf_free(struct gguf *g)
{
	free(g->kv);
	free(g->tensors);
	memset(g, 0, sizeof(*g));
}

/* ---- lookups ---- */

const struct gguf_kv *gguf_find(const struct gguf *g, const char *key)
{
	size_t n = strlen(key);

	for (uint64_t i = 0; i < g->n_kv; i++)
		if (g->kv[i].key_len == n && !memcmp(g->kv[i].key, key, n))
			return &g->kv[i];
	return NULL;
}

const struct gguf_tensor *gguf_tensor(const struct gguf *g, const char *name)
{
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (!strcmp(g->tensors[i].name, name))
			return &g->tensors[i];
	return NULL;
}

/* An integer value as int64 (signed) or uint64; 0 if not an integer type. */
static int int_value(const struct gguf_kv *kv, int64_t *s, uint64_t *u, int *is_signed)
{
	const uint8_t *v = kv->value;
	union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
		uint64_t u64; int64_t i64; } x;

	memcpy(&x, v, scalar_bytes(kv->type) ? scalar_bytes(kv->type) : 1);
	*is_signed = 0;
	switch (kv->type) {
	case GGUF_U8: *u = x.u8; return 1;
	case GGUF_U16: *u = x.u16; return 1;
	case GGUF_U32: *u = x.u32; return 1;
	case GGUF_U64: *u = x.u64; return 1;
	case GGUF_I8: *s = x.i8; break;
	case GGUF_I16: *s = x.i16; break;
	case GGUF_I32: *s = x.i32; break;
	case GGUF_I64: *s = x.i64; break;
	default: return 0;
	}
	*is_signed = 1;
	return 1;
}

int gguf_get_uint(const struct gguf *g, const char *key, int required, uint64_t max, uint64_t *out,
		  InferError *err)
{
	const struct gguf_kv *kv = gguf_find(g, key);
	int64_t s = 0;
	uint64_t u = 0;
	int is_signed;

	if (!kv)
		return required ? infer_fail(err, "gguf: metadata %s is missing", key) : 0;
	if (kv->type == GGUF_ARRAY || !int_value(kv, &s, &u, &is_signed))
		return infer_fail(err, "gguf: metadata %s is not an integer", key);
	if (is_signed) {
		if (s < 0)
			return infer_fail(err, "gguf: metadata %s = %lld is negative", key, (long long)s);
		u = (uint64_t)s;
	}
	if (u > max)
		return infer_fail(err, "gguf: metadata %s = %llu is out of range (at most %llu)", key,
				  (unsigned long long)u, (unsigned long long)max);
	*out = u;
	return 0;
}

int gguf_get_f32(const struct gguf *g, const char *key, int required, float *out, InferError *err)
{
	const struct gguf_kv *kv = gguf_find(g, key);
	double d;

	if (!kv)
		return required ? infer_fail(err, "gguf: metadata %s is missing", key) : 0;
	if (kv->type == GGUF_F32) {
		float f;
		memcpy(&f, kv->value, 4);
		d = f;
	} else if (kv->type == GGUF_F64) {
		memcpy(&d, kv->value, 8);
	} else {
		return infer_fail(err, "gguf: metadata %s is not a float", key);
	}
	if (!(d == d) || d > 3.4e38 || d < -3.4e38)
		return infer_fail(err, "gguf: metadata %s is not a finite float", key);
	*out = (float)d;
	return 0;
}

int gguf_get_bool(const struct gguf *g, const char *key, int *out, InferError *err)
{
	const struct gguf_kv *kv = gguf_find(g, key);

	if (!kv)
		return 0;
	if (kv->type != GGUF_BOOL)
		return infer_fail(err, "gguf: metadata %s is not a bool", key);
	*out = *kv->value != 0;
	return 0;
}

int gguf_get_str(const struct gguf *g, const char *key, const char **s, uint32_t *len, InferError *err)
{
	const struct gguf_kv *kv = gguf_find(g, key);
	uint64_t n;

	if (!kv)
		return infer_fail(err, "gguf: metadata %s is missing", key);
	if (kv->type != GGUF_STRING)
		return infer_fail(err, "gguf: metadata %s is not a string", key);
	memcpy(&n, kv->value, 8);
	*s = (const char *)kv->value + 8;
	*len = (uint32_t)n;
	return 0;
}

void gguf_next_str(const uint8_t **cursor, const char **s, uint32_t *len)
{
	uint64_t n;

	memcpy(&n, *cursor, 8);
	*s = (const char *)*cursor + 8;
	*len = (uint32_t)n;
	*cursor += 8 + n;
}
