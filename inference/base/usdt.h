/* usdt.h - the engine's side of the probes: a semaphore and a fire function
 * for every row of spantrace/probes.def (the vocabulary and what each probe
 * says are there).
 *
 *   usdt_span_begin(kind, layer);    fires infer:span_begin when attached
 *   INFER_PROBE_ENABLED(op_begin)    whether a tracer is attached to it
 *
 * Every call of a fire function counts in infer_probe_calls[] (usdt.c;
 * trace.c's --stats "probes"), attached or not, so the engine's counts are what a
 * tracer that caught every hit would see. Each fire function is inlined
 * where it is called: one call, one probe site. */
#ifndef INFER_USDT_H
#define INFER_USDT_H

#include <stdint.h>
#include "spantrace/probes.h"

/* Calls of each probe's fire function (defined in usdt.c). */
extern uint64_t infer_probe_calls[PROBE_ID_COUNT];
#define INFER_PROBE_COUNT(nm) __atomic_fetch_add(&infer_probe_calls[PROBE_ID_##nm], 1, __ATOMIC_RELAXED)

#define INFER_UNPAREN(...) __VA_ARGS__
#define INFER_CALL(macro, args) macro args

#if defined(INFER_NO_PROBES)
#define INFER_PROBE_ENABLED(name) 0
#define PROBE(nm, ro, lv, ms, pg, doc, n, params, args, names, types) \
	static inline __attribute__((always_inline)) void usdt_##nm params \
	{ INFER_PROBE_COUNT(nm); }
#include "spantrace/probes.def"
#undef PROBE
#else
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
/* A 5-byte nop (0f 1f 44 00 00) instead of sdt.h's 1-byte one lets kernels
 * with optimized uprobes replace it with a call into a trampoline instead of
 * an int3 trap. That call pushes a return address below %rsp, so the engine
 * is built with -mno-red-zone: no live data may sit in the red zone. */
#if defined(__x86_64__)
#undef _SDT_NOP
#define _SDT_NOP .nops 5
#endif

/* Semaphores: the kernel increments them on attach, so argument work is
 * skipped when no tracer is attached. Defined once in usdt.c. */
#define INFER_SEMAPHORE(name) infer_##name##_semaphore
#define INFER_PROBE_ENABLED(name) __builtin_expect(INFER_SEMAPHORE(name) != 0, 0)

/* The count comes after the probe: at a begin it falls inside both the
 * engine's and the tracer's window, at an end outside both. */
#define PROBE(nm, ro, lv, ms, pg, doc, n, params, args, names, types) \
	extern volatile unsigned short INFER_SEMAPHORE(nm); \
	static inline __attribute__((always_inline)) void usdt_##nm params \
	{ \
		if (INFER_PROBE_ENABLED(nm)) \
			INFER_CALL(STAP_PROBE##n, (infer, nm, INFER_UNPAREN args)); \
		INFER_PROBE_COUNT(nm); \
	}
#include "spantrace/probes.def"
#undef PROBE
#endif /* INFER_NO_PROBES */

#endif /* INFER_USDT_H */
