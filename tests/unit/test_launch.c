/* test_launch.c - the target plumbing of user/core/launch.c without BPF: option
 * checks, a held child that runs only once released (and never when
 * abandoned), output redirection, exec failure, "is it gone" for a pid and
 * for a command, and the SIGTERM stop of a command still running. */
#include "core/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Waits up to 5 s for launch_target_gone(). */
static int gone_within(struct launch *l)
{
	for (int i = 0; i < 500; i++) {
		if (launch_target_gone(l))
			return 1;
		sleep_ms(10);
	}
	return 0;
}

static void test_opts_check(void)
{
	char err[256], *cmd[] = { "x", NULL };
	struct launch_opts none = { 0 }, pid = { .pid = 1 }, bin = { .binary = "b" }, command = { .cmd = cmd };
	struct launch_opts two = { .pid = 1, .binary = "b" }, three = { .pid = 1, .binary = "b", .cmd = cmd };
	struct launch_opts redirect_pid = { .pid = 1, .cmd_output = "/dev/null" };

	CHECK(launch_opts_check(&none, err, sizeof(err)) && strstr(err, "got none"), "none: %s", err);
	CHECK(launch_opts_check(&two, err, sizeof(err)) && strstr(err, "got several"), "two: %s", err);
	CHECK(launch_opts_check(&three, err, sizeof(err)) && strstr(err, "exactly one target"), "three: %s", err);
	CHECK(!strchr(err, '\n'), "one line: %s", err);
	CHECK(launch_opts_check(&redirect_pid, err, sizeof(err)), "cmd_output with -p accepted");
	CHECK(!launch_opts_check(&pid, err, sizeof(err)) && launch_opts_mode(&pid) == LAUNCH_PID, "pid");
	CHECK(!launch_opts_check(&bin, err, sizeof(err)) && launch_opts_mode(&bin) == LAUNCH_BINARY, "binary");
	CHECK(!launch_opts_check(&command, err, sizeof(err)) && launch_opts_mode(&command) == LAUNCH_COMMAND,
	      "command");
	CHECK(launch_opts_mode(&two) == LAUNCH_NONE, "two targets have no mode");
	CHECK(!strcmp(launch_mode_name(LAUNCH_COMMAND), "command"), "mode name");
	printf("ok: exactly one target, with a one-line reason otherwise\n");
}

static void test_held_then_released(const char *dir)
{
	char flag[512], script[600], err[256];
	int release_fd, status;

	snprintf(flag, sizeof(flag), "%s/ran", dir);
	snprintf(script, sizeof(script), "echo ran > '%s'", flag);
	char *argv[] = { "sh", "-c", script, NULL };
	pid_t pid = launch_spawn_waiting(argv, -1, -1, &release_fd, err, sizeof(err));
	CHECK(pid > 0, "spawn: %s", err);
	if (pid <= 0)
		return;
	sleep_ms(200);
	CHECK(!exists(flag), "the command ran before its release");
	CHECK(waitpid(pid, &status, WNOHANG) == 0, "the held child did not wait");
	CHECK(write(release_fd, "g", 1) == 1, "release write");
	close(release_fd);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "released command status %#x", status);
	CHECK(exists(flag), "the released command did not run");
	printf("ok: a held command runs only after its release\n");

	unlink(flag);
	pid = launch_spawn_waiting(argv, -1, -1, &release_fd, err, sizeof(err));
	CHECK(pid > 0, "spawn: %s", err);
	if (pid <= 0)
		return;
	close(release_fd);  /* the tracer gave up */
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 127,
	      "abandoned child status %#x", status);
	CHECK(!exists(flag), "an abandoned command ran");
	printf("ok: an abandoned command never runs (exit 127)\n");
}

static void test_redirect_and_exec_failure(const char *dir)
{
	char out[512], buf[64] = "", err[256];
	int release_fd, status, fd, in;
	ssize_t n;

	snprintf(out, sizeof(out), "%s/out", dir);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	in = open("/dev/null", O_RDONLY);
	/* stdout, stderr and stdin all redirected: cat copies nothing, sh says hi twice */
	char *argv[] = { "sh", "-c", "cat; echo out; echo err >&2", NULL };
	pid_t pid = launch_spawn_waiting(argv, in, fd, &release_fd, err, sizeof(err));
	close(fd);
	close(in);
	CHECK(pid > 0, "spawn: %s", err);
	if (pid <= 0)
		return;
	CHECK(write(release_fd, "g", 1) == 1, "release");
	close(release_fd);
	waitpid(pid, &status, 0);
	fd = open(out, O_RDONLY);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	CHECK(!strcmp(buf, "out\nerr\n"), "redirected output '%s'", buf);
	printf("ok: stdin, stdout and stderr redirected\n");

	char *missing[] = { "/nonexistent/spantrace-test-cmd", NULL };
	pid = launch_spawn_waiting(missing, -1, -1, &release_fd, err, sizeof(err));
	CHECK(pid > 0, "spawn: %s", err);
	if (pid <= 0)
		return;
	CHECK(write(release_fd, "g", 1) == 1, "release");
	close(release_fd);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 127,
	      "exec failure status %#x", status);
	printf("ok: a command that cannot exec exits 127\n");
}

/* A released command we watch: gone once it exits, status kept. */
static void test_command_gone(void)
{
	struct launch l;
	char err[256], how[96];
	char *argv[] = { "sh", "-c", "exit 3", NULL };

	memset(&l, 0, sizeof(l));
	l.mode = LAUNCH_COMMAND;
	l.pidfd = -1;
	l.child = launch_spawn_waiting(argv, -1, -1, &l.release_fd, err, sizeof(err));
	CHECK(l.child > 0, "spawn: %s", err);
	if (l.child <= 0)
		return;
	CHECK(!launch_target_gone(&l), "gone before its release");
	CHECK(launch_release(&l, err, sizeof(err)) == 0 && l.release_fd < 0, "release: %s", err);
	CHECK(gone_within(&l), "the command's exit was not noticed");
	launch_describe_exit(&l, how, sizeof(how));
	CHECK(!strcmp(how, "exited with status 3"), "describe: %s", how);
	launch_end(&l);
	printf("ok: a command's exit is noticed: %s\n", how);

	/* Still running at the end: SIGTERM, reaped, and said so. */
	char *sleeper[] = { "sleep", "30", NULL };
	memset(&l, 0, sizeof(l));
	l.mode = LAUNCH_COMMAND;
	l.pidfd = -1;
	l.child = launch_spawn_waiting(sleeper, -1, -1, &l.release_fd, err, sizeof(err));
	CHECK(l.child > 0, "spawn: %s", err);
	if (l.child <= 0)
		return;
	pid_t pid = l.child;
	launch_release(&l, err, sizeof(err));
	sleep_ms(100);
	launch_end(&l);
	CHECK(l.child == 0 && l.gone && l.stopped, "not stopped");
	CHECK(kill(pid, 0) && errno == ESRCH, "the command outlived launch_end");
	launch_describe_exit(&l, how, sizeof(how));
	CHECK(!strcmp(how, "stopped with SIGTERM, killed by signal 15"), "describe: %s", how);
	printf("ok: launch_end stops a running command: %s\n", how);

	/* Never released: launch_end makes it exit without running. */
	memset(&l, 0, sizeof(l));
	l.mode = LAUNCH_COMMAND;
	l.pidfd = -1;
	l.child = launch_spawn_waiting(sleeper, -1, -1, &l.release_fd, err, sizeof(err));
	launch_end(&l);
	CHECK(l.child == 0 && WIFEXITED(l.status) && WEXITSTATUS(l.status) == 127 && !l.stopped,
	      "unreleased status %#x", l.status);
	printf("ok: launch_end on an unreleased command: exit 127, never ran\n");
}

/* -p: the pidfd turns readable when the process exits, even unreaped. */
static void test_pid_gone(void)
{
	struct launch l;
	int go[2];
	char c = 0;

	/* The child exits only when told, so "live" is checked while it is. */
	CHECK(pipe(go) == 0, "pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		close(go[1]);
		_exit(read(go[0], &c, 1) == 1 ? 0 : 1);
	}
	close(go[0]);
	CHECK(pid > 0, "fork");
	if (pid <= 0) {
		close(go[1]);
		return;
	}
	memset(&l, 0, sizeof(l));
	l.mode = LAUNCH_PID;
	l.release_fd = -1;
	l.target.pid = pid;
	l.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	CHECK(l.pidfd >= 0, "pidfd_open: %s", strerror(errno));
	CHECK(!launch_target_gone(&l), "a live pid reported gone");
	CHECK(write(go[1], &c, 1) == 1, "release the child");
	close(go[1]);
	CHECK(gone_within(&l), "the pid's exit was not noticed");
	launch_end(&l);
	CHECK(l.pidfd == -1, "pidfd left open");
	waitpid(pid, NULL, 0);
	printf("ok: -p notices its process exit via pidfd\n");

	/* Without a pidfd: kill(pid, 0) once the process is gone for good. */
	memset(&l, 0, sizeof(l));
	l.mode = LAUNCH_PID;
	l.release_fd = l.pidfd = -1;
	l.target.pid = pid;  /* reaped above */
	CHECK(launch_target_gone(&l), "a reaped pid is not gone");
	printf("ok: -p without pidfd falls back to kill(pid, 0)\n");
}

int main(void)
{
	char dir[] = "/tmp/test_launch.XXXXXX";

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_opts_check();
	test_held_then_released(dir);
	test_redirect_and_exec_failure(dir);
	test_command_gone();
	test_pid_gone();
	char path[600];
	snprintf(path, sizeof(path), "%s/out", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/ran", dir);
	unlink(path);
	rmdir(dir);
	if (failures) {
		printf("%d launch check(s) failed\n", failures);
		return 1;
	}
	printf("all launch checks passed\n");
	return 0;
}
