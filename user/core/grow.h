/* grow.h - room for one more element in an array that grows by doubling. */
#ifndef SPANTRACE_GROW_H
#define SPANTRACE_GROW_H

#include <stdlib.h>
#include <string.h>

/* Makes the array at *arrp (of elem-byte elements, *cap of them) hold at
 * least n + 1. 0, or -1 with the array untouched when memory runs out. */
static inline int grow_array(void *arrp, size_t *cap, size_t n, size_t elem)
{
	void *arr, *grown;
	size_t ncap;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	memcpy(&arr, arrp, sizeof(arr));
	if (!(grown = realloc(arr, ncap * elem)))
		return -1;
	memcpy(arrp, &grown, sizeof(grown));
	*cap = ncap;
	return 0;
}

/* ARRAY_GROW(s->items, s->cap, s->n): room for s->items[s->n]. */
#define ARRAY_GROW(arr, cap, n) grow_array(&(arr), &(cap), (n), sizeof(*(arr)))

#endif
