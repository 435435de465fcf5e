/* test_folded - folded-stack aggregation: line order and frame order,
 * merging of repeated stacks, separator sanitizing, the per-span top table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/folded.h"

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; \
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static char *write_to_string(const struct folded *fd, int top, size_t top_n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	int rc = top ? folded_write_top(fd, f, top_n) : folded_write(fd, f);
	fclose(f);
	if (rc) {
		free(buf);
		return NULL;
	}
	return buf;
}

int main(void)
{
	struct folded *fd = folded_new();
	if (!fd)
		return 1;
	/* Stacks arrive innermost first, as bpf_get_stackid stores them. */
	const char *matvec[] = { "matvec_f32", "attention_head", "forward", "main" };
	const char *softmax[] = { "softmax", "attention_head", "forward", "main" };
	const char *ffn[] = { "matvec_f32", "ffn", "forward", "main" };
	const char *weird[] = { "op;er\nator", "main" };
	CHECK(folded_add(fd, "attention", matvec, 4, 3) == 0, "add");
	CHECK(folded_add(fd, "attention", softmax, 4, 1) == 0, "add");
	CHECK(folded_add(fd, "attention", matvec, 4, 2) == 0, "add repeat");
	CHECK(folded_add(fd, "ffn", ffn, 4, 4) == 0, "add");
	CHECK(folded_add(fd, "ffn", NULL, 0, 1) == 0, "add empty stack");
	CHECK(folded_add(fd, "[no span]", weird, 2, 1) == 0, "add weird");
	CHECK(folded_total(fd) == 12, "total %llu", (unsigned long long)folded_total(fd));
	CHECK(folded_stacks(fd) == 5, "stacks %zu", folded_stacks(fd));

	char *text = write_to_string(fd, 0, 0);
	const char *expect =
		"[no span];main;op:er ator 1\n"
		"attention;main;forward;attention_head;matvec_f32 5\n"
		"attention;main;forward;attention_head;softmax 1\n"
		"ffn 1\n"
		"ffn;main;forward;ffn;matvec_f32 4\n";
	CHECK(text && !strcmp(text, expect), "folded output:\n%s\nexpected:\n%s", text ? text : "(null)", expect);
	free(text);

	struct folded_top_entry top[4];
	uint64_t total = 0;
	int n = folded_top(fd, "attention", top, 4, &total);
	CHECK(n == 2 && total == 6, "attention top n=%d total=%llu", n, (unsigned long long)total);
	if (n == 2) {
		CHECK(!strcmp(top[0].function, "matvec_f32") && top[0].self == 5, "top[0] %s %llu",
		      top[0].function, (unsigned long long)top[0].self);
		CHECK(top[0].share > 83.3 && top[0].share < 83.4, "share %.3f", top[0].share);
		CHECK(!strcmp(top[1].function, "softmax") && top[1].self == 1, "top[1]");
	}
	folded_top_free(top, n > 0 ? (size_t)n : 0);
	n = folded_top(fd, "ffn", top, 1, &total);
	CHECK(n == 1 && total == 5 && top[0].self == 4, "ffn top limited to 1");
	folded_top_free(top, n > 0 ? (size_t)n : 0);
	n = folded_top(fd, "ffn", top, 4, &total);
	CHECK(n == 2 && !strcmp(top[1].function, "[unknown]") && top[1].self == 1, "empty stack leaf");
	folded_top_free(top, n > 0 ? (size_t)n : 0);
	n = folded_top(fd, "attn", top, 4, &total);
	CHECK(n == 0 && total == 0, "prefix of a span name must not match");

	text = write_to_string(fd, 1, 3);
	CHECK(text && strstr(text, "span attention: 6 samples (50.0% of 12)") &&
	      strstr(text, "span ffn: 5 samples") &&
	      strstr(text, "attention") < strstr(text, "span ffn"), "top table:\n%s", text ? text : "");
	free(text);

	/* Enough distinct stacks to force the table to grow several times. */
	for (int i = 0; i < 5000; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%d", i);
		const char *frames[] = { name, "main" };
		if (folded_add(fd, "grow", frames, 2, 1)) {
			CHECK(0, "add during growth");
			break;
		}
	}
	CHECK(folded_stacks(fd) == 5005 && folded_total(fd) == 5012, "after growth");
	folded_free(fd);

	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("test_folded: all checks passed\n");
	return 0;
}
