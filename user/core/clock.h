/* clock.h - the clocks records carry, and the offsets between them.
 * BPF timestamps are CLOCK_MONOTONIC (bpf_ktime_get_ns); PoCL's device
 * times are CLOCK_MONOTONIC_RAW; outputs for people use the wall clock. */
#ifndef SPANTRACE_CLOCK_H
#define SPANTRACE_CLOCK_H

#include <stdint.h>
#include <time.h>

int64_t clock_read_ns(clockid_t id);
uint64_t mono_now_ns(void);   /* CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns */

/* Offsets that turn kernel clocks into wall-clock ns since the epoch. */
struct wall_clock {
	int64_t mono_to_wall;   /* add to CLOCK_MONOTONIC ns */
	int64_t raw_to_wall;    /* add to CLOCK_MONOTONIC_RAW ns (OpenCL device times) */
};

void wall_clock_init(struct wall_clock *c);

/* CLOCK_MONOTONIC - CLOCK_MONOTONIC_RAW now: what puts a device whose
 * profiling clock is the host's raw monotonic clock (PoCL's CPU device) on
 * the host timeline. The tightest of several bracketed reads. */
int64_t clock_raw_to_mono_ns(void);

#endif
