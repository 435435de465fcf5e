/* check.h - the assertion every unit test uses: count a failure, say where,
 * keep going so one run reports every broken check. main() ends with
 * `return check_report();`. */
#ifndef SPANTRACE_CHECK_H
#define SPANTRACE_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		failures++; \
		printf("FAIL %s:%d: ", __FILE__, __LINE__); \
		printf(__VA_ARGS__); \
		printf("\n"); \
	} \
} while (0)

static inline int check_report(void)
{
	if (failures)
		printf("%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}

#endif
