/* gguf.h - a strict reader of GGUF v2/v3 files (llama.cpp's model format),
 * over a buffer the caller owns (the mmapped file).
 *
 * gguf_parse() checks the whole file before anyone sees a pointer into it:
 * every count, string and array against the bytes left; every tensor's
 * dimensions, type, alignment and extent against the data section, and no
 * two tensors overlapping. Afterwards lookups cannot read out of bounds. */
#ifndef INFER_GGUF_H
#define INFER_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include "base/error.h"

/* Metadata value types, as the format numbers them. */
enum gguf_vtype {
	GGUF_U8 = 0, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL,
	GGUF_STRING, GGUF_ARRAY, GGUF_U64, GGUF_I64, GGUF_F64, GGUF_VTYPE_COUNT
};

/* ggml tensor types this engine computes with (others are parsed, sized
 * and refused by name where a model needs them). */
enum ggml_type { GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q8_0 = 8, GGML_Q4_K = 12, GGML_Q6_K = 14 };

#define GGUF_MAX_DIMS 4
#define GGUF_NAME_MAX 64   /* tensor names longer than this are refused */

struct gguf_kv {
	const char *key;        /* not NUL-terminated: key_len bytes */
	uint32_t key_len;
	uint32_t type;          /* enum gguf_vtype */
	const uint8_t *value;   /* the value's bytes (an array: its first element) */
	uint32_t elem_type;     /* arrays: the elements' type */
	uint64_t count;         /* arrays: elements; else 1 */
};

struct gguf_tensor {
	char name[GGUF_NAME_MAX + 1];
	uint32_t n_dims;
	uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the innermost (contiguous) dimension */
	uint32_t type;              /* ggml type */
	uint64_t offset;            /* from the data section's start */
	uint64_t bytes;
	const void *data;
};

struct gguf {
	uint32_t version;
	uint64_t n_kv, n_tensors;
	struct gguf_kv *kv;
	struct gguf_tensor *tensors;
	uint64_t alignment;
	uint64_t data_offset;       /* where the data section starts in the file */
};

/* Parses and validates size bytes at data; on failure g is left empty and
 * err says what is wrong, and where. */
int gguf_parse(struct gguf *g, const void *data, size_t size, InferError *err);
void gguf_free(struct gguf *g);

const struct gguf_kv *gguf_find(const struct gguf *g, const char *key);
const struct gguf_tensor *gguf_tensor(const struct gguf *g, const char *name);

/* Typed metadata reads. Each fails, naming the key, when it is missing (and
 * required) or of another type; integers of any width are accepted when
 * the value fits. A missing optional key leaves *out alone and returns 0. */
int gguf_get_uint(const struct gguf *g, const char *key, int required, uint64_t max, uint64_t *out,
		  InferError *err);
int gguf_get_f32(const struct gguf *g, const char *key, int required, float *out, InferError *err);
int gguf_get_bool(const struct gguf *g, const char *key, int *out, InferError *err);
/* A string value: *s points into the file, *len its bytes (no NUL). */
int gguf_get_str(const struct gguf *g, const char *key, const char **s, uint32_t *len, InferError *err);
/* Walks an array of strings that gguf_parse validated: *cursor starts at
 * kv->value, and each call gives the next string and moves past it. */
void gguf_next_str(const uint8_t **cursor, const char **s, uint32_t *len);

/* A string from the file, fit for a one-line message: control bytes become
 * '?', cut to size - 1 bytes. Returns buf. */
const char *gguf_clean(const char *s, uint32_t len, char *buf, size_t size);

/* Names and sizes of the ggml types. */
const char *ggml_type_name(uint32_t type);
/* Bytes of n elements of type (n a multiple of its block), 0 if unknown. */
uint64_t ggml_type_bytes(uint32_t type, uint64_t n);
uint32_t ggml_type_block(uint32_t type);  /* elements per block, 0 if unknown */

#endif
