/* test_events.c - the one decoder: every record type passes at its exact
 * size and fails one byte short; unknown types and every out-of-range enum
 * field are rejected; the dispatch hands a record to each sink in order,
 * skips NULL handlers, stops at the first error and hands on nothing that
 * failed. */
#include <string.h>
#include "check.h"
#include "core/events.h"

static char calls[64];
static size_t ncalls;

static int note(char who, int rc)
{
	if (ncalls + 1 < sizeof(calls))
		calls[ncalls++] = who;
	calls[ncalls] = '\0';
	return rc;
}

static int a_span(void *ctx, const struct span_event *e) { return note('a', 0); }
static int b_span(void *ctx, const struct span_event *e) { return note('b', *(int *)ctx); }
static int b_token(void *ctx, const struct token_event *e) { return note('t', 0); }

static const struct event_handlers sink_a = { .span = a_span };
static const struct event_handlers sink_b = { .span = b_span, .token = b_token };

static void test_sizes(void)
{
	unsigned char buf[512];

	for (unsigned t = 1; t < EV_TYPE_COUNT; t++) {
		size_t n = event_record_size(t);
		memset(buf, 0, sizeof(buf));
		((struct event_header *)buf)->type = t;
		CHECK(n >= sizeof(struct event_header), "type %u has a size", t);
		CHECK(event_check(buf, n) == EVENT_OK, "%s passes at %zu bytes", event_type_name(t), n);
		CHECK(event_check(buf, n - 1) == EVENT_SHORT, "%s one byte short", event_type_name(t));
		CHECK(event_check(buf, n + 8) == EVENT_OK, "%s with a tail", event_type_name(t));
	}
	CHECK(event_check(buf, 3) == EVENT_SHORT, "shorter than a header");
	((struct event_header *)buf)->type = 0;
	CHECK(event_check(buf, sizeof(buf)) == EVENT_UNKNOWN_TYPE, "type 0");
	((struct event_header *)buf)->type = EV_TYPE_COUNT;
	CHECK(event_check(buf, sizeof(buf)) == EVENT_UNKNOWN_TYPE, "type past the table");
	CHECK(!strcmp(event_type_name(EV_KERNEL), "kernel") && !strcmp(event_type_name(99), "unknown"), "names");
}

static void test_fields(void)
{
	struct span_event s = { .h = { .type = EV_SPAN } };
	struct alloc_event a = { .h = { .type = EV_FREE } };
	struct kernel_event k = { .h = { .type = EV_KERNEL } };
	struct sample_event m = { .h = { .type = EV_SAMPLE } };

	s.parent_kind = SPAN_KIND_COUNT;   /* no parent */
	s.layer = s.parent_layer = LAYER_NONE;
	CHECK(event_check(&s, sizeof(s)) == EVENT_OK, "a top-level span");
#define BAD(rec, field, value) do { __typeof__(rec) r = rec; r.field = value; \
	CHECK(event_check(&r, sizeof(r)) == EVENT_BAD_FIELD, #field " = " #value); } while (0)
	BAD(s, kind, SPAN_KIND_COUNT);
	BAD(s, parent_kind, SPAN_KIND_COUNT + 1);
	BAD(s, depth, SPAN_STACK_DEPTH);
	BAD(s, ncounters, PERF_COUNTERS_MAX + 1);
	BAD(s, layer, -2);
	BAD(s, parent_layer, -2);
	BAD(a, pool, POOL_COUNT);
	BAD(a, unknown, 2);
	BAD(k, kernel_id, KERNEL_COUNT);
	BAD(k, layer, -5);
	BAD(m, kind, SPAN_KIND_COUNT + 1);
#undef BAD
	CHECK(event_check(&a, sizeof(a)) == EVENT_OK && event_check(&k, sizeof(k)) == EVENT_OK &&
	      event_check(&m, sizeof(m)) == EVENT_OK, "zeroed records of those types pass");
}

static void test_dispatch(void)
{
	struct span_event s = { .h = { .type = EV_SPAN } };
	struct token_event t = { .h = { .type = EV_TOKEN } };
	int ok = 0, fail = -5;
	struct event_sink sinks[] = { { &sink_a, NULL }, { &sink_b, &ok } };
	struct event_sink failing[] = { { &sink_b, &fail }, { &sink_a, NULL } };
	enum event_verdict v;

	s.parent_kind = SPAN_KIND_COUNT;
	ncalls = 0;
	CHECK(event_dispatch(&s, sizeof(s), sinks, 2, &v) == 0 && v == EVENT_OK && !strcmp(calls, "ab"),
	      "a span to both sinks, in order: %s", calls);
	ncalls = 0;
	CHECK(event_dispatch(&t, sizeof(t), sinks, 2, &v) == 0 && !strcmp(calls, "t"), "NULL handler skipped: %s", calls);
	ncalls = 0;
	CHECK(event_dispatch(&s, sizeof(s), failing, 2, &v) == -5 && !strcmp(calls, "b"),
	      "the first error stops the dispatch: %s", calls);
	ncalls = 0;
	s.kind = 77;
	CHECK(event_dispatch(&s, sizeof(s), sinks, 2, &v) == 0 && v == EVENT_BAD_FIELD && ncalls == 0,
	      "a rejected record reaches no sink");
	CHECK(event_dispatch(&s, 10, sinks, 2, &v) == 0 && v == EVENT_SHORT && ncalls == 0, "nor does a short one");
}

int main(void)
{
	test_sizes();
	test_fields();
	test_dispatch();
	printf("events: %d failures\n", failures);
	return check_report();
}
