/* grow.h - room for more elements in an array that grows by doubling:
 * user/'s one doubling growth, of arrays and of byte buffers. */
#ifndef SPANTRACE_GROW_H
#define SPANTRACE_GROW_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Makes the array at *arrp (of elem-byte elements, *cap of them) hold at
 * least n + 1, doubling *cap (16 at first) as often as that takes. 0, or
 * -1 with the array and *cap untouched when memory runs out or the size
 * would overflow. */
static inline int grow_array(void *arrp, size_t *cap, size_t n, size_t elem)
{
	void *arr, *grown;
	size_t ncap;

	if (n < *cap)
		return 0;
	for (ncap = *cap ? *cap : 16; ncap <= n; ncap *= 2)
		if (ncap > SIZE_MAX / 2 / elem)
			return -1;
	memcpy(&arr, arrp, sizeof(arr));
	if (!(grown = realloc(arr, ncap * elem)))
		return -1;
	memcpy(arrp, &grown, sizeof(grown));
	*cap = ncap;
	return 0;
}

/* ARRAY_GROW(s->items, s->cap, s->n): room for s->items[s->n]. For a byte
 * buffer, ARRAY_GROW(b->data, b->cap, b->len + more) has room for more
 * bytes and a NUL. */
#define ARRAY_GROW(arr, cap, n) grow_array(&(arr), &(cap), (n), sizeof(*(arr)))

#endif
