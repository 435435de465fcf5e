/* clock.c - clock reads and offsets (see clock.h). */
#include "core/clock.h"

int64_t clock_read_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t mono_now_ns(void)
{
	return (uint64_t)clock_read_ns(CLOCK_MONOTONIC);
}

void wall_clock_init(struct wall_clock *c)
{
	int64_t wall = clock_read_ns(CLOCK_REALTIME);

	c->mono_to_wall = wall - clock_read_ns(CLOCK_MONOTONIC);
	c->raw_to_wall = wall - clock_read_ns(CLOCK_MONOTONIC_RAW);
}

int64_t clock_raw_to_mono_ns(void)
{
	/* The raw read is bracketed by two monotonic reads; the narrowest
	 * bracket gives the least uncertain offset. */
	int64_t best_offset = 0, best_width = INT64_MAX;

	for (int i = 0; i < 16; i++) {
		int64_t before = clock_read_ns(CLOCK_MONOTONIC);
		int64_t raw = clock_read_ns(CLOCK_MONOTONIC_RAW);
		int64_t after = clock_read_ns(CLOCK_MONOTONIC);
		if (after - before < best_width) {
			best_width = after - before;
			best_offset = before + (after - before) / 2 - raw;
		}
	}
	return best_offset;
}
