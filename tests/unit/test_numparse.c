/* test_numparse.c - the number rules every flag, variable and config value
 * follows: whole string, digits first, finite, in range, and no change to
 * *out on error. */
#include "core/numparse.h"
#include "check.h"

#include <stdint.h>

static void test_uint(void)
{
	uint64_t v = 7;
	CHECK(parse_uint("0", 0, 10, &v) == 0 && v == 0, "0");
	CHECK(parse_uint("10", 0, 10, &v) == 0 && v == 10, "upper bound is inclusive");
	CHECK(parse_uint("18446744073709551615", 0, UINT64_MAX, &v) == 0 && v == UINT64_MAX, "max");
	v = 7;
	CHECK(parse_uint("11", 0, 10, &v) < 0 && v == 7, "above range, out untouched");
	CHECK(parse_uint("0", 1, 10, &v) < 0, "below range");
	CHECK(parse_uint("-1", 0, UINT64_MAX, &v) < 0, "minus does not wrap");
	CHECK(parse_uint("+1", 0, 10, &v) < 0, "plus sign");
	CHECK(parse_uint(" 1", 0, 10, &v) < 0, "leading space");
	CHECK(parse_uint("1 ", 0, 10, &v) < 0, "trailing space");
	CHECK(parse_uint("1x", 0, 10, &v) < 0, "trailing junk");
	CHECK(parse_uint("", 0, 10, &v) < 0, "empty");
	CHECK(parse_uint(NULL, 0, 10, &v) < 0, "NULL");
	CHECK(parse_uint("18446744073709551616", 0, UINT64_MAX, &v) < 0, "overflow");
	CHECK(parse_uint("0x10", 0, 100, &v) < 0, "hex");
}

static void test_real(void)
{
	double d = 7;
	CHECK(parse_real("0.5", 0, 1, &d) == 0 && d == 0.5, "0.5");
	CHECK(parse_real(".5", 0, 1, &d) == 0 && d == 0.5, ".5");
	CHECK(parse_real("1e-3", 0, 1, &d) == 0 && d == 1e-3, "exponent");
	CHECK(parse_real("-1", -2, 0, &d) == 0 && d == -1, "negative where allowed");
	d = 7;
	CHECK(parse_real("-1", 0, 1, &d) < 0 && d == 7, "negative below range, out untouched");
	CHECK(parse_real("nan", 0, 1, &d) < 0, "nan");
	CHECK(parse_real("inf", 0, 1e300, &d) < 0, "inf");
	CHECK(parse_real("1e999", 0, 1e300, &d) < 0, "overflow to inf");
	CHECK(parse_real("0x1p-1", 0, 1, &d) < 0, "hex float");
	CHECK(parse_real("+1", 0, 2, &d) < 0, "plus sign");
	CHECK(parse_real(" 1", 0, 2, &d) < 0, "leading space");
	CHECK(parse_real("1s", 0, 2, &d) < 0, "trailing unit");
	CHECK(parse_real("", 0, 2, &d) < 0, "empty");
	CHECK(parse_real_above("0", 0, 10, &d) < 0, "zero is not above zero");
	CHECK(parse_real_above("0.001", 0, 10, &d) == 0 && d == 0.001, "just above zero");
	CHECK(parse_real_above("11", 0, 10, &d) < 0, "above the cap");
}

static void test_size(void)
{
	uint64_t v;
	CHECK(parse_size("0", &v) == 0 && v == 0, "0");
	CHECK(parse_size("123", &v) == 0 && v == 123, "123");
	CHECK(parse_size("4k", &v) == 0 && v == 4096, "4k");
	CHECK(parse_size("16M", &v) == 0 && v == 16u << 20, "16M");
	CHECK(parse_size("2GiB", &v) == 0 && v == 2ull << 30, "2GiB");
	CHECK(parse_size("7B", &v) == 0 && v == 7, "7B");
	CHECK(parse_size("", &v) < 0, "empty");
	CHECK(parse_size(" 1", &v) < 0, "leading space");
	CHECK(parse_size("+1", &v) < 0, "plus sign");
	CHECK(parse_size("1MM", &v) < 0, "double suffix");
	CHECK(parse_size("18446744073709551616", &v) < 0, "overflow");
	CHECK(parse_size("17179869184G", &v) < 0, "overflow by suffix");
}

int main(void)
{
	test_uint();
	test_real();
	test_size();
	return check_report();
}
