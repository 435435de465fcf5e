/* test_grow.c - core/grow.h's ARRAY_GROW: 16 at first, doubling as often
 * as the wanted index takes (a byte buffer's len + more), nothing changed
 * when the size would overflow, and the elements kept. */
#include "core/grow.h"
#include "check.h"

#include <stdint.h>

static void test_array(void)
{
	int *v = NULL;
	size_t n = 0, cap = 0;

	CHECK(ARRAY_GROW(v, cap, n) == 0 && v && cap == 16, "first: 16");
	for (n = 0; n < 1000; n++) {
		if (ARRAY_GROW(v, cap, n))
			break;
		v[n] = (int)n;
	}
	CHECK(n == 1000 && cap == 1024, "1000 elements: cap %zu", cap);
	for (size_t i = 0; i < n; i++)
		if (v[i] != (int)i) {
			CHECK(0, "element %zu kept", i);
			break;
		}
	CHECK(ARRAY_GROW(v, cap, 10) == 0 && cap == 1024, "room already: cap unchanged");
	free(v);
}

static void test_bytes(void)
{
	char *b = NULL;
	size_t cap = 0;

	CHECK(ARRAY_GROW(b, cap, 100) == 0 && cap == 128, "101 bytes at once: %zu", cap);
	CHECK(ARRAY_GROW(b, cap, 127) == 0 && cap == 128, "byte 127 fits in 128");
	CHECK(ARRAY_GROW(b, cap, 128) == 0 && cap == 256, "byte 128 doubles");
	CHECK(ARRAY_GROW(b, cap, 5000) == 0 && cap == 8192, "several doublings at once: %zu", cap);
	b[5000] = 'x';
	free(b);
}

static void test_overflow(void)
{
	struct big { char x[1 << 20]; } *v = NULL;
	size_t cap = 0;
	char *b = NULL;
	size_t bcap = 0;

	CHECK(ARRAY_GROW(v, cap, SIZE_MAX / 2) == -1 && !v && cap == 0, "overflow: -1, untouched");
	CHECK(ARRAY_GROW(b, bcap, SIZE_MAX - 1) == -1 && !b && bcap == 0, "bytes overflow: -1, untouched");
}

int main(void)
{
	test_array();
	test_bytes();
	test_overflow();
	return check_report();
}
