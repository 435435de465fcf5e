/* statereq.h - asks a running engine to re-fire its state (live
 * allocations, pool peaks, KV figures, weight tensors) through the state_*
 * probes, so a tracer that attaches late starts from the engine's own
 * figures (inference/base/state.h says why the engine re-emits rather than
 * exposing a table). Call it after session_attach. */
#ifndef SPANTRACE_STATEREQ_H
#define SPANTRACE_STATEREQ_H

#include <sys/types.h>

/* Sends the engine's state signal (SIGRTMIN + INFER_STATE_SIGNAL_OFFSET),
 * but only when pid blocks it, i.e. runs an engine that waits for it: to any
 * other process the signal would be fatal. 1 sent, 0 not an engine that
 * supports it, -1 error (errno). */
int state_request(pid_t pid);
/* Why a state_request failed (errno err), naming CAP_KILL when another
 * user's process could not be signalled. */
const char *state_request_error(int err);

/* Binary mode: state_request() to every process that maps the inode of
 * elf (found as host mode finds engines, core/fleet.h). Returns how many
 * were asked, or -1. */
int state_request_binary(const char *elf);

#endif
