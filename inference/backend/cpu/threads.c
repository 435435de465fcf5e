/* threads.c - runs a forward's phases (phases.c) on the OpenMP threads.
 *
 * Threads: a forward is one OpenMP parallel region, not one per phase. It
 * is a list of phases (norm, q/k/v, rope, attention, ... classifier), each
 * cut into tiles that any thread takes from a shared counter; a thread
 * moves to the next phase when every tile of this one is done, spinning
 * briefly for the last ones. So a forward wakes the other threads once
 * (with OMP_WAIT_POLICY=passive a wake-up is a futex and an IPI, tens of
 * microseconds here), and a thread that loses its core holds back only the
 * tile it is in. The first thread fires every span, at the phase edges. */
#include <omp.h>
#include <sched.h>
#include "backend/cpu/arch.h"
#include "backend/cpu/phases.h"
#include "backend/cpu/threads.h"
#include "base/trace.h"

/* Below this many multiply-adds a forward runs on one thread: waking the
 * others costs more than it saves (stories260K decodes alone). */
#define PARALLEL_MIN_WORK (1L << 21)

/* ---- spans, fired by the first thread at the phase edges ---- */

/* qkv holds attn_norm and rope; ffn holds ffn_norm; logits holds final_norm. */
static void phase_enter(const Phase *ph)
{
	int l = ph->layer;

	switch (ph->kind) {
	case PH_ATTN_NORM:
		trace_span_begin(SPAN_LAYER, l);
		trace_span_begin(SPAN_QKV, l);
		trace_span_begin(SPAN_ATTN_NORM, l);
		break;
	case PH_ROPE:
		trace_span_begin(SPAN_ROPE, l);
		break;
	case PH_ATTENTION:
		trace_span_begin(SPAN_ATTENTION, l);
		break;
	case PH_ATTN_OUT:
		trace_span_begin(SPAN_ATTN_OUT, l);
		break;
	case PH_FFN_NORM:
		trace_span_begin(SPAN_FFN, l);
		trace_span_begin(SPAN_FFN_NORM, l);
		break;
	case PH_FINAL_NORM:
		trace_span_begin(SPAN_LOGITS, LAYER_NONE);
		trace_span_begin(SPAN_FINAL_NORM, LAYER_NONE);
		break;
	default:
		break;
	}
}

static void phase_leave(const Phase *ph)
{
	int l = ph->layer;

	switch (ph->kind) {
	case PH_ATTN_NORM:
		trace_span_end(SPAN_ATTN_NORM, l);
		break;
	case PH_ROPE:
		trace_span_end(SPAN_ROPE, l);
		trace_span_end(SPAN_QKV, l);
		break;
	case PH_ATTENTION:
		trace_span_end(SPAN_ATTENTION, l);
		break;
	case PH_ATTN_OUT:
		trace_span_end(SPAN_ATTN_OUT, l);
		break;
	case PH_FFN_NORM:
		trace_span_end(SPAN_FFN_NORM, l);
		break;
	case PH_FFN_DOWN:
		trace_span_end(SPAN_FFN, l);
		trace_span_end(SPAN_LAYER, l);
		break;
	case PH_FINAL_NORM:
		trace_span_end(SPAN_FINAL_NORM, LAYER_NONE);
		break;
	case PH_LOGITS:
		trace_span_end(SPAN_LOGITS, LAYER_NONE);
		break;
	default:
		break;
	}
}

/* ---- running the phases ---- */

/* Waits until every tile of a phase is done. The wait is for tiles other
 * threads are running, so it is short unless one lost its core: then,
 * after a while, give the core away rather than spin a time slice. */
static void wait_done(const PhaseCounters *pc, int tiles)
{
	for (unsigned spins = 0; __atomic_load_n(&pc->done, __ATOMIC_ACQUIRE) < tiles; spins++) {
		if (spins < 4096)
			cpu_relax();
		else
			sched_yield();
	}
}

/* Every thread of the region runs this: the phases in order, taking tiles
 * until a phase has none left, then waiting for its last ones. With quantized
 * weights a thread quantizes a product's input for itself before its first
 * tile: the input is whole only once the phase before has ended, and two
 * copies of a few KB cost less than one more wait. */
static void run_phases(CpuState *s, int first, int thread)
{
	for (int i = 0; i < s->n_phases; i++) {
		const Phase *ph = &s->phases[i];
		PhaseCounters *pc = &s->ctr[i];
		MatInput in = { NULL, NULL };
		int t, rows, n;

		in.x = phase_input(s, ph->kind, &rows, &n);
		if (first)
			phase_enter(ph);
		while ((t = __atomic_fetch_add(&pc->next, 1, __ATOMIC_RELAXED)) < ph->tiles) {
			if (in.x && s->quant && !in.q) {
				quantize_rows(in.x, rows, n, &s->quant[thread], phase_quant_forms(s, ph));
				in.q = &s->quant[thread];
			}
			run_tile(s, ph, t, &in, thread);
			__atomic_fetch_add(&pc->done, 1, __ATOMIC_RELEASE);
		}
		wait_done(pc, ph->tiles);
		if (first)
			phase_leave(ph);
	}
}

/* Multiply-adds of a forward over n tokens, roughly: the weights it reads. */
static long forward_work(const CpuState *s, int n, int n_out)
{
	const Config *c = &s->c;
	long layer = (long)c->dim * (c->dim + 2 * s->kv_dim) + (long)c->dim * c->dim +
		     3L * c->dim * c->hidden_dim;

	return layer * c->n_layers * n + (long)c->vocab_size * c->dim * n_out;
}

void run_forward(CpuState *s)
{
	for (int i = 0; i < s->n_phases; i++) {
		s->phases[i].tiles = phase_tiles(s, s->phases[i].kind);
		s->ctr[i].next = 0;
		s->ctr[i].done = 0;
	}
	/* num_threads: omp_set_num_threads at create set only the creating
	 * thread's count, and the HTTP engine forwards from another thread;
	 * each thread's scratch is sized for s->threads */
#pragma omp parallel num_threads(s->threads) if (forward_work(s, s->n, s->n_out) >= PARALLEL_MIN_WORK)
	run_phases(s, omp_get_thread_num() == 0, omp_get_thread_num());
}
