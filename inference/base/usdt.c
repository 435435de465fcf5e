/* usdt.c - the probes' semaphores and call counts (see usdt.h): defined
 * once, beside nothing else, so every object with a probe site (trace.c,
 * pool.c, state.c) links with just this file. */
#include "base/usdt.h"

#ifndef INFER_NO_PROBES
/* The kernel bumps these when a uprobe with a semaphore is attached. */
#define PROBE(nm, ro, lv, ms, pg, doc, n, params, args, names, types) \
	volatile unsigned short INFER_SEMAPHORE(nm) __attribute__((section(".probes"), used));
#include "spantrace/probes.def"
#undef PROBE
#endif

uint64_t infer_probe_calls[PROBE_ID_COUNT];
