/* launch.c - the target of a tracing command: parse, resolve, start a
 * command held until the probes are armed, notice when the target is gone. */
#include "core/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "core/engines.h"
#include "core/listen_ports.h"
#include "core/log.h"
#include "core/stapsdt.h"
#include "spantrace/probes.h"

#define TERM_GRACE_MS 2000  /* a command gets this long after SIGTERM, then SIGKILL */

/* ---- options ---- */
enum { OPT_BINARY = 0x4c00, OPT_ENGINE, OPT_HTTP, OPT_NO_HTTP, OPT_NO_CHILDREN };

static const struct argp_option launch_options[] = {
	{ "pid", 'p', "PID", 0,
	  "Trace this running process, and for --http its children too (a pre-fork server's workers, "
	  "present and future). Given several times: the sockets of each (--engine none)", 0 },
	{ "no-children", OPT_NO_CHILDREN, NULL, 0, "-p's process alone, not its children", 0 },
	{ "binary", OPT_BINARY, "PATH", 0, "Trace every process of this binary (or library), now and later", 0 },
	{ "engine", OPT_ENGINE, "NAME", 0,
	  "infer (our probes), llamacpp (llama.cpp's exported functions) or none (only the HTTP requests on "
	  "its sockets: --http); default: whichever the target has, and for a command also a libllama it "
	  "loads later", 0 },
	{ "http", OPT_HTTP, NULL, 0,
	  "Also every HTTP/1.x request on the target's sockets, any server: method, path, status, arrival, "
	  "first event, end, SSE events (no body leaves the kernel; with --binary, each of its processes). "
	  "Joined with the engine's request where it is known. On by default for -p PID of a process that "
	  "listens on TCP", 0 },
	{ "no-http", OPT_NO_HTTP, NULL, 0, "Not the HTTP requests, even for -p PID of a listening server", 0 },
	{ 0 },
};

enum launch_mode launch_opts_mode(const struct launch_opts *o)
{
	if ((o->pid > 0) + !!o->binary + !!o->cmd != 1)
		return LAUNCH_NONE;
	return o->pid > 0 ? LAUNCH_PID : o->binary ? LAUNCH_BINARY : LAUNCH_COMMAND;
}

const char *launch_mode_name(enum launch_mode m)
{
	switch (m) {
	case LAUNCH_PID: return "pid";
	case LAUNCH_BINARY: return "binary";
	case LAUNCH_COMMAND: return "command";
	default: return "none";
	}
}

int launch_opts_check(const struct launch_opts *o, char *err, size_t errlen)
{
	int n = (o->pid > 0) + !!o->binary + !!o->cmd;

	if (n != 1) {
		snprintf(err, errlen, "give exactly one target: -p PID, --binary PATH, or -- CMD [ARGS...] (%s)",
			 n ? "got several" : "got none");
		return -1;
	}
	if (!o->cmd && (o->cmd_output || o->cmd_stdin_null)) {
		snprintf(err, errlen, "the command's output can only be redirected for -- CMD");
		return -1;
	}
	if (o->no_http && (o->http || o->engine == ENGINE_NONE)) {
		snprintf(err, errlen, "--no-http contradicts %s", o->http ? "--http" : "--engine none");
		return -1;
	}
	if (o->nmore_pids && o->engine != ENGINE_AUTO && o->engine != ENGINE_NONE) {
		snprintf(err, errlen, "several -p trace each one's HTTP requests on its sockets (--engine none); "
			 "an engine's probes follow one process: give one -p");
		return -1;
	}
	if (o->nmore_pids && o->no_http) {
		snprintf(err, errlen, "several -p trace their sockets: --no-http leaves nothing to trace");
		return -1;
	}
	return 0;
}

int launch_wants_http(const struct launch_opts *o)
{
	uint32_t port;

	if (o->http || o->engine == ENGINE_NONE || o->nmore_pids)
		return 1;
	return !o->no_http && o->pid > 0 && http_listening_ports(o->pid, &port, 1) > 0;
}

static error_t launch_parse(int key, char *arg, struct argp_state *state)
{
	struct launch_opts *o = state->input;
	char err[256];

	switch (key) {
	case 'p': {
		pid_t pid = parse_pid(arg);

		if (pid < 0)
			argp_error(state, "invalid pid '%s'", arg);
		else if (o->pid <= 0)
			o->pid = pid;
		else if (o->nmore_pids >= LAUNCH_PIDS_MAX)
			argp_error(state, "at most %d -p", LAUNCH_PIDS_MAX + 1);
		else
			o->more_pids[o->nmore_pids++] = pid;
		break;
	}
	case OPT_NO_CHILDREN:
		o->no_children = 1;
		break;
	case OPT_BINARY:
		o->binary = arg;
		break;
	case OPT_HTTP:
		o->http = o->probes_optional = 1;
		break;
	case OPT_NO_HTTP:
		o->no_http = 1;
		break;
	case OPT_ENGINE:
		if (engine_parse(arg, &o->engine) || o->engine == ENGINE_AUTO)
			argp_error(state, "--engine: want infer, llamacpp or none, not '%s'", arg);
		break;
	case ARGP_KEY_ARG:
		/* Everything from the first non-option on is the command. */
		o->cmd = &state->argv[state->next - 1];
		state->next = state->argc;
		break;
	case ARGP_KEY_END:
		if (launch_opts_check(o, err, sizeof(err)))
			argp_error(state, "%s", err);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

const struct argp launch_argp = { launch_options, launch_parse, NULL, NULL, NULL, NULL, NULL };

/* ---- the held child ---- */

/* Between fork and exec only async-signal-safe calls. */
static void child_say(const char *a, const char *b, const char *c)
{
	const char *parts[] = { "spantrace: error: ", a, b, c, "\n" };
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		if (write(STDERR_FILENO, parts[i], strlen(parts[i])) < 0)
			return;
}

static __attribute__((noreturn)) void child_run(char *const argv[], int in_fd, int out_fd, int wait_fd)
{
	char go;
	sigset_t none;

	/* EOF without a byte means the tracer gave up: do not run. */
	if (read(wait_fd, &go, 1) != 1)
		_exit(127);
	/* Our ignored signals (SIGPIPE) would stay ignored across exec. */
	signal(SIGPIPE, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	/* The state signal is blocked here (libinfer's listener, in the
	 * parent), so a tracer's scan may have taken this child for an engine
	 * and asked for its state: ignoring it drops any such request, which
	 * the unblocking would otherwise deliver, killing the command. */
	signal(SIGRTMIN + INFER_STATE_SIGNAL_OFFSET, SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGRTMIN + INFER_STATE_SIGNAL_OFFSET, SIG_DFL);
	if ((in_fd >= 0 && dup2(in_fd, STDIN_FILENO) < 0) ||
	    (out_fd >= 0 && (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(out_fd, STDERR_FILENO) < 0))) {
		child_say("cannot redirect the command: ", strerror(errno), "");
		_exit(127);
	}
	execvp(argv[0], argv);
	child_say("cannot run ", argv[0], errno == ENOENT ? ": command not found" : ": exec failed");
	_exit(127);
}

pid_t launch_spawn_waiting(char *const argv[], int in_fd, int out_fd, int *release_fd,
			   char *err, size_t errlen)
{
	int p[2];
	pid_t pid;

	/* CLOEXEC: the exec'd command must not inherit either end. */
	if (pipe2(p, O_CLOEXEC)) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[1]);
		child_run(argv, in_fd, out_fd, p[0]);
	}
	close(p[0]);
	*release_fd = p[1];
	return pid;
}

/* ---- start, release, watch, end ---- */

static int open_cmd_fds(const struct launch_opts *o, int *in_fd, int *out_fd, char *err, size_t errlen)
{
	*in_fd = *out_fd = -1;
	if (o->cmd_output) {
		/* O_NOFOLLOW: a planted symlink must not redirect what we write. */
		*out_fd = open(o->cmd_output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
		if (*out_fd < 0) {
			snprintf(err, errlen, "cannot create %s: %s", o->cmd_output,
				 errno == ELOOP ? "is a symbolic link" : strerror(errno));
			return -1;
		}
	}
	if (o->cmd_stdin_null) {
		*in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (*in_fd < 0) {
			snprintf(err, errlen, "cannot open /dev/null: %s", strerror(errno));
			if (*out_fd >= 0)
				close(*out_fd);
			return -1;
		}
	}
	return 0;
}

static int start_command(struct launch *l, const struct launch_opts *o, char *err, size_t errlen)
{
	int in_fd, out_fd;
	pid_t pid;

	if (open_cmd_fds(o, &in_fd, &out_fd, err, errlen))
		return -1;
	pid = launch_spawn_waiting(o->cmd, in_fd, out_fd, &l->release_fd, err, errlen);
	if (in_fd >= 0)
		close(in_fd);
	if (out_fd >= 0)
		close(out_fd);
	if (pid < 0)
		return -1;
	l->child = pid;
	l->target.pid = pid;
	return 0;
}

int target_resolve_pid(pid_t pid, enum engine_id engine, int optional, struct target *t, char *err,
		       size_t errlen)
{
	if (engine == ENGINE_NONE) {
		if (target_pid_without_probes(pid, t)) {
			snprintf(err, errlen, "no process %d", (int)pid);
			return -1;
		}
		t->engine = ENGINE_NONE;
		return 0;
	}
	if (engine != ENGINE_LLAMACPP && !target_from_pid(pid, t, err, errlen)) {
		t->engine = ENGINE_INFER;
		return 0;
	}
	if (engine == ENGINE_LLAMACPP)
		snprintf(err, errlen, "process %d has no llama.cpp (no libllama mapped, no llama_decode in its "
			 "executable)", (int)pid);
	else if (!strstr(err, "CAP_SYS_PTRACE") && strlen(err) + 40 < errlen)   /* unread: unknown */
		strcat(err, " and no llama.cpp (libllama)");
	if (engine != ENGINE_INFER) {
		memset(t, 0, sizeof(*t));
		t->pid = pid;
		if (!engine_llamacpp_in_pid(pid, t))
			return 0;
	}
	return optional && !target_pid_without_probes(pid, t) ? 0 : -1;
}

/* The dynamic linker a command will run under (its PT_INTERP). */
static void command_interp(const char *prog, char *out, size_t size)
{
	char exe[PATH_MAX];

	if (resolve_command(prog, exe, sizeof(exe)) || elf_interp(exe, out, size))
		snprintf(out, size, "/lib64/ld-linux-x86-64.so.2");
}

int target_resolve_program(const char *prog, int is_command, enum engine_id engine, int optional,
			   struct target *t, char *err, size_t errlen)
{
	char exe[PATH_MAX];

	if (engine == ENGINE_NONE) {
		if (is_command ? resolve_command(prog, exe, sizeof(exe)) : access(prog, R_OK)) {
			snprintf(err, errlen, "%s: %s", prog, strerror(errno ? errno : ENOENT));
			return -1;
		}
		memset(t, 0, sizeof(*t));
		t->pid = -1;
		t->engine = ENGINE_NONE;
		snprintf(t->shown, sizeof(t->shown), "%s", prog);
		return 0;
	}
	if (engine != ENGINE_LLAMACPP && !target_from_program(prog, is_command, t, err, errlen)) {
		t->engine = ENGINE_INFER;
		return 0;
	}
	if (engine == ENGINE_LLAMACPP)
		snprintf(err, errlen, "%s: no llama.cpp (no llama_decode in it)", prog);
	if (is_command ? resolve_command(prog, exe, sizeof(exe)) : access(prog, R_OK))
		return -1;
	if (!is_command)
		snprintf(exe, sizeof(exe), "%s", prog);
	if (engine != ENGINE_INFER) {
		memset(t, 0, sizeof(*t));
		t->pid = -1;
		if (!engine_llamacpp_in_file(exe, t))
			return 0;
	}
	if (is_command && engine != ENGINE_INFER) {
		memset(t, 0, sizeof(*t));
		t->pid = -1;
		t->pending = 1;
		snprintf(t->shown, sizeof(t->shown), "%s", prog);
		command_interp(prog, t->base, sizeof(t->base));
		return 0;
	}
	return target_or_opencl(prog, is_command, optional, t, err, errlen);
}

/* Does a --span name a function of a llama.cpp library? */
static int span_in_llamacpp(const struct launch_opts *o)
{
	struct target t;

	for (unsigned i = 0; i < o->nspan_files; i++)
		if (!engine_llamacpp_in_file(o->span_files[i], &t))
			return 1;
	return 0;
}

int launch_start(struct launch *l, const struct launch_opts *o, char *err, size_t errlen)
{
	int rc;

	memset(l, 0, sizeof(*l));
	l->release_fd = l->pidfd = -1;
	if (launch_opts_check(o, err, errlen))
		return -1;
	l->mode = launch_opts_mode(o);
	switch (l->mode) {
	case LAUNCH_PID:
		if (target_resolve_pid(o->pid, o->nmore_pids ? ENGINE_NONE : o->engine, o->probes_optional,
				       &l->target, err, errlen))
			return -1;
		if (!l->target.engine)
			st_debug("no engine in pid %d: OpenCL calls or --span only", (int)o->pid);
		/* Without pidfd (old kernel) launch_target_gone falls back to kill(). */
		l->pidfd = (int)syscall(SYS_pidfd_open, o->pid, 0);
		return 0;
	case LAUNCH_BINARY:
		return target_resolve_program(o->binary, 0, o->engine, o->probes_optional, &l->target, err, errlen);
	case LAUNCH_COMMAND:
		if ((rc = target_resolve_program(o->cmd[0], 1, o->engine, o->probes_optional, &l->target, err,
						 errlen)))
			return rc;
		/* --opencl or --span named what to trace: a libllama the command
		 * may load later is watched for only when asked (--engine
		 * llamacpp, --http, or a --span in llama.cpp itself), as the
		 * profile's programs cost seconds of verification */
		if (l->target.pending && o->engine == ENGINE_AUTO && o->probes_optional && !o->http &&
		    !span_in_llamacpp(o) && (rc = target_or_opencl(o->cmd[0], 1, 1, &l->target, err, errlen)))
			return rc;
		return start_command(l, o, err, errlen);
	default:
		snprintf(err, errlen, "no target");
		return -1;
	}
}

int launch_release(struct launch *l, char *err, size_t errlen)
{
	int rc = 0;

	if (l->release_fd < 0)
		return 0;
	if (write(l->release_fd, "g", 1) != 1) {
		snprintf(err, errlen, "cannot release the command: %s", strerror(errno));
		rc = -1;
	}
	close(l->release_fd);
	l->release_fd = -1;
	return rc;
}

int launch_target_gone(struct launch *l)
{
	if (l->gone)
		return 1;
	switch (l->mode) {
	case LAUNCH_COMMAND:
		if (l->child > 0 && waitpid(l->child, &l->status, WNOHANG) == l->child) {
			l->child = 0;
			l->gone = 1;
		}
		break;
	case LAUNCH_PID:
		if (l->pidfd >= 0) {
			struct pollfd pfd = { .fd = l->pidfd, .events = POLLIN };
			l->gone = poll(&pfd, 1, 0) > 0;
		} else {
			l->gone = kill(l->target.pid, 0) && errno == ESRCH;
		}
		break;
	default:
		break;
	}
	return l->gone;
}

/* SIGTERM, a grace period, then SIGKILL: never hang on a stuck command. */
static void stop_child(struct launch *l)
{
	struct timespec tick = { 0, 20 * 1000000L };

	kill(l->child, SIGTERM);
	l->stopped = 1;
	for (int waited = 0; waited < TERM_GRACE_MS; waited += 20) {
		if (waitpid(l->child, &l->status, WNOHANG) == l->child)
			goto reaped;
		nanosleep(&tick, NULL);
	}
	kill(l->child, SIGKILL);
	waitpid(l->child, &l->status, 0);
reaped:
	l->child = 0;
	l->gone = 1;
}

void launch_end(struct launch *l)
{
	if (l->release_fd >= 0) {
		/* Never released: the child sees EOF and exits without running. */
		close(l->release_fd);
		l->release_fd = -1;
		if (l->child > 0) {
			waitpid(l->child, &l->status, 0);
			l->child = 0;
			l->gone = 1;
		}
	}
	if (l->child > 0 && !launch_target_gone(l))
		stop_child(l);
	if (l->pidfd >= 0) {
		close(l->pidfd);
		l->pidfd = -1;
	}
}

int launch_command_failure(const struct launch *l)
{
	char how[96];
	int code = 0;

	if (l->mode != LAUNCH_COMMAND || !l->gone || l->stopped)
		return 0;
	if (WIFEXITED(l->status))
		code = WEXITSTATUS(l->status);
	else if (WIFSIGNALED(l->status))
		code = 128 + WTERMSIG(l->status);
	if (code) {
		launch_describe_exit(l, how, sizeof(how));
		st_err("the command %s; what it did is written, and spantrace exits %d", how, code);
	}
	return code;
}

void launch_describe_exit(const struct launch *l, char *buf, size_t size)
{
	const char *by_us = l->stopped ? "stopped with SIGTERM, " : "";

	if (l->mode == LAUNCH_BINARY)
		snprintf(buf, size, "-");
	else if (!l->gone)
		snprintf(buf, size, "running");
	else if (l->mode != LAUNCH_COMMAND)
		snprintf(buf, size, "exited");
	else if (WIFEXITED(l->status))
		snprintf(buf, size, "%sexited with status %d", by_us, WEXITSTATUS(l->status));
	else if (WIFSIGNALED(l->status))
		snprintf(buf, size, "%skilled by signal %d", by_us, WTERMSIG(l->status));
	else
		snprintf(buf, size, "exited");
}

void tracing_argp_children(struct argp_child kids[3], unsigned mask, const struct common_opts *defaults)
{
	kids[0] = (struct argp_child){ &launch_argp, 0, "Target (exactly one):", 0 };
	kids[1] = (struct argp_child){ common_argp(mask, defaults), 0, NULL, 0 };
	kids[2] = (struct argp_child){ 0 };
}
