/* test_userspans.c - the --span table: specs parse into kinds and names,
 * bad specs are refused with a reason, and a user kind goes through the one
 * decoder and span_kind_name() like the engine's own. */
#include <string.h>
#include "check.h"
#include "core/events.h"
#include "core/userspans.h"

static void test_parse(void)
{
	char err[512];

	user_spans_reset();
	CHECK(user_span_add("uprobe:/bin/sh:main", err, sizeof(err)) == 0, "uprobe: %s", err);
	CHECK(user_span_add("usdt:/bin/sh:prov:a_begin,a_end:alpha", err, sizeof(err)) == 0, "usdt: %s", err);
	CHECK(user_span_add("uprobe:/bin/sh:other:renamed", err, sizeof(err)) == 0, "named uprobe: %s", err);
	CHECK(user_span_count() == 3, "three specs");
	CHECK(user_span_kind(0) == USER_SPAN_BASE && user_span_kind(2) == USER_SPAN_BASE + 2, "kinds from the base");
	CHECK(!strcmp(span_kind_name(USER_SPAN_BASE), "main"), "uprobe name defaults to the function");
	CHECK(!strcmp(span_kind_name(USER_SPAN_BASE + 1), "alpha"), "usdt name given");
	CHECK(!strcmp(span_kind_name(USER_SPAN_BASE + 2), "renamed"), "uprobe name given");
	CHECK(!strcmp(span_kind_name(USER_SPAN_BASE + 3), "unknown"), "past the table: unknown");
	CHECK(!strcmp(span_kind_name(SPAN_FFN), "ffn"), "engine names unchanged");
	CHECK(span_kind_known(USER_SPAN_BASE + 1) && !span_kind_known(USER_SPAN_BASE + 3) &&
	      !span_kind_known(SPAN_KIND_COUNT), "known kinds");
}

static void test_bad(void)
{
	static const char *const bad[] = {
		"", "uprobe", "uprobe:/bin/sh", "kprobe:/bin/sh:main", "usdt:/bin/sh:prov:a_begin",
		"usdt:/bin/sh:prov:a_begin,a_end:bad name", "uprobe:/no/such/file:main",
		"uprobe:/bin/sh:main", /* the name "main" again */
		"uprobe:/bin/sh:f:0123456789012345678901234567890123", "uprobe:/bin/sh:f:x:y",
	};
	char err[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		CHECK(user_span_add(bad[i], err, sizeof(err)) < 0 && strstr(err, "--span"), "refused '%s' (%s)",
		      bad[i], err);
	}
	CHECK(user_span_count() == 3, "nothing added by bad specs");
	for (int i = 3; i < USER_SPAN_MAX; i++) {
		char spec[64];
		snprintf(spec, sizeof(spec), "uprobe:/bin/sh:f%d", i);
		CHECK(user_span_add(spec, err, sizeof(err)) == 0, "spec %d: %s", i, err);
	}
	CHECK(user_span_add("uprobe:/bin/sh:one_too_many", err, sizeof(err)) < 0, "at most USER_SPAN_MAX");
}

static void test_decoder(void)
{
	struct span_event s = { .h = { .type = EV_SPAN }, .kind = USER_SPAN_BASE, .parent_kind = SPAN_KIND_COUNT,
				.layer = LAYER_NONE, .parent_layer = LAYER_NONE };

	CHECK(event_check(&s, sizeof(s)) == EVENT_OK, "a user span passes the decoder");
	s.parent_kind = USER_SPAN_BASE + 1;
	CHECK(event_check(&s, sizeof(s)) == EVENT_OK, "inside another user span");
	s.kind = USER_SPAN_BASE - 1;
	CHECK(event_check(&s, sizeof(s)) == EVENT_BAD_FIELD, "a kind between the two ranges is refused");
	user_spans_reset();
	s.kind = USER_SPAN_BASE;
	CHECK(event_check(&s, sizeof(s)) == EVENT_BAD_FIELD, "a user kind nobody defined is refused");
}

int main(void)
{
	test_parse();
	test_bad();
	test_decoder();
	return check_report();
}
