/* launch.h - "which target" for every command that traces (top, record,
 * profile): exactly one of -p PID, --binary PATH or -- CMD [ARGS...].
 *
 * Options: add launch_argp as an argp child and hand it a launch_opts in the
 * parent's ARGP_KEY_INIT; parse with ARGP_IN_ORDER so everything from the
 * first non-option on is the command (its own options stay its own):
 *
 *   static const struct argp_child kids[] = { { &launch_argp, 0, NULL, 0 }, { 0 } };
 *   case ARGP_KEY_INIT: state->child_inputs[0] = &o->target; break;
 *   argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, &o);
 *
 * The child rejects zero or several targets with one line at ARGP_KEY_END
 * (launch_opts_check says why, for callers that do not use argp).
 *
 * Running it:
 *
 *   struct launch l;
 *   launch_start(&l, &o->target, err, sizeof err);  // resolves the ELF; a
 *        // command is forked and waits, not yet exec'd
 *   session_open(...); session_attach(&s, l.target.elf, l.target.pid, ...);
 *   launch_release(&l, err, sizeof err);            // the command execs now,
 *        // so no probe hit of it is missed
 *   while (!launch_target_gone(&l)) ...poll...
 *   launch_end(&l);          // a command still running gets SIGTERM, is reaped
 *
 * l.target.pid is the pid to trace (the child for a command) or -1 for a
 * binary (every process that maps it, now and later). */
#ifndef SPANTRACE_LAUNCH_H
#define SPANTRACE_LAUNCH_H

#include <argp.h>
#include <stddef.h>
#include <sys/types.h>
#include "core/engines.h"
#include "core/options.h"
#include "core/target.h"

#define LAUNCH_PIDS_MAX 64

struct launch_opts {
	pid_t pid;               /* -p PID; 0 = not given */
	pid_t more_pids[LAUNCH_PIDS_MAX];   /* -p given again: their sockets are traced too */
	unsigned nmore_pids;
	int no_children;         /* --no-children: -p's process alone, not its children */
	const char *binary;      /* --binary PATH */
	enum engine_id engine;   /* --engine; ENGINE_AUTO = whichever the target has */
	char **cmd;              /* -- CMD ARGS...: NULL-terminated, into argv */
	/* Only for a command (the caller sets them, not launch_argp): */
	const char *cmd_output;  /* its stdout and stderr go here; NULL = ours */
	int cmd_stdin_null;      /* its stdin is /dev/null (e.g. we own the tty) */
	int probes_optional;     /* --opencl, --span: a target without `infer` probes
				  * is fine (target.elf is then empty) */
	const char *span_files[USER_SPAN_MAX];  /* --span uprobe files: one in llama.cpp */
	unsigned nspan_files;    /* is a reason to watch a command for its libllama */
	int http, no_http;       /* --http, --no-http */
};

enum launch_mode { LAUNCH_NONE = 0, LAUNCH_PID, LAUNCH_BINARY, LAUNCH_COMMAND };

struct launch {
	struct target target;    /* target.pid: traced pid, -1 for a binary */
	enum launch_mode mode;
	pid_t child;             /* command: our child until reaped, else 0 */
	int release_fd;          /* command: the child execs when we write here */
	int pidfd;               /* -p: readable once the process exits; -1 = use kill(pid, 0) */
	int gone;                /* the target has exited (or was reaped) */
	int status;              /* command: its wait status once reaped */
	int stopped;             /* command: launch_end had to SIGTERM it */
};

/* -p PID, --binary PATH and the command (ARGP_KEY_ARG). */
extern const struct argp launch_argp;

/* The children of a tracing command's argp: the target (launch_argp,
 * child_inputs[0]) and the shared options in mask (core/options.h,
 * child_inputs[1]). */
void tracing_argp_children(struct argp_child kids[3], unsigned mask, const struct common_opts *defaults);

/* 0 if exactly one kind of target is given (-p may be given several
 * times), else -1 and a one-line reason. */
int launch_opts_check(const struct launch_opts *o, char *err, size_t errlen);
/* Whether the run times HTTP requests from the sockets: asked for (--http,
 * --engine none, several -p), or by default for -p PID of a process
 * listening on TCP unless --no-http. */
int launch_wants_http(const struct launch_opts *o);
/* --binary's file for --http's scan: the probe file found, else the path. */
static inline const char *launch_binary_path(const struct launch *l, const struct launch_opts *o)
{
	return l->target.elf[0] ? l->target.elf : o->binary;
}
enum launch_mode launch_opts_mode(const struct launch_opts *o);
/* "pid", "binary", "command" (as in record's session line). */
const char *launch_mode_name(enum launch_mode m);

/* Checks the options, finds the probe ELF and, for a command, forks a child
 * that waits for launch_release(). 0, or -1 with err set and nothing left
 * running or open. */
int launch_start(struct launch *l, const struct launch_opts *o, char *err, size_t errlen);
/* The target of -p PID: our probes, else llama.cpp (engine forces one);
 * optional: a process with neither is fine (--opencl, --span). */
int target_resolve_pid(pid_t pid, enum engine_id engine, int optional, struct target *t, char *err,
		       size_t errlen);
/* The target of --binary PATH or a command: our probes, a static llama.cpp,
 * or, for a command, one it may load later (t->pending). */
int target_resolve_program(const char *prog, int is_command, enum engine_id engine, int optional,
			   struct target *t, char *err, size_t errlen);
/* Lets a waiting command exec (nothing to do for -p and --binary). */
int launch_release(struct launch *l, char *err, size_t errlen);
/* 1 once the traced process has exited (a command is reaped then, its status
 * kept in l->status); always 0 for a binary. Never blocks. */
int launch_target_gone(struct launch *l);
/* A command not yet released never execs; one still running gets SIGTERM;
 * either way it is reaped. Closes everything launch_start opened. */
void launch_end(struct launch *l);
/* "exited with status N" / "killed by signal N" for a reaped command
 * (prefixed "stopped with SIGTERM, " when launch_end stopped it), else
 * "exited" / "running"; "-" for a binary. */
void launch_describe_exit(const struct launch *l, char *buf, size_t size);
/* What a tracer that started a command exits with when the command failed
 * by itself, as strace and time do: its exit status, or 128 + the signal
 * that killed it, said on stderr. 0 when it succeeded, when we stopped it,
 * or for -p and --binary, whose processes are not ours to answer for. */
int launch_command_failure(const struct launch *l);

/* The building block: forks a child that execvp()s argv only after a byte
 * arrives on *release_fd (EOF instead: it exits 127 without running
 * anything). out_fd >= 0 becomes its stdout and stderr, in_fd >= 0 its stdin.
 * Returns the child's pid, or -1 with err set. */
pid_t launch_spawn_waiting(char *const argv[], int in_fd, int out_fd, int *release_fd,
			   char *err, size_t errlen);

#endif
