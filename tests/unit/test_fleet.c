/* test_fleet - host mode's discovery, on this very process: it maps
 * libinfer.so (the "infer" provider; dlopen), and so do the children it forks.
 * An inode whose first process went away before the tracer could attach
 * (on_inode says FLEET_RETRY) comes back with the next process that maps
 * it; an inode attached once never comes back, but each new process
 * mapping it is still reported as an engine. A process counts as gone
 * once it is a zombie, though its pid and start time are still there. */
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "core/fleet.h"

struct seen {
	struct stat lib;        /* libinfer.so */
	int inode_calls;        /* on_inode for libinfer.so */
	int retries_left;       /* how many on_inode calls answer FLEET_RETRY */
	pid_t engines[8];       /* on_engine pids, for our own processes */
	int nengines;
	pid_t ours[3];          /* this process and its children */
};

static int is_ours(const struct seen *s, pid_t pid)
{
	for (int i = 0; i < 3; i++)
		if (s->ours[i] == pid)
			return 1;
	return 0;
}

static int on_inode(void *ctx, const char *open_path, const struct fleet_proc *p)
{
	struct seen *s = ctx;

	(void)open_path;
	if (p->dev != s->lib.st_dev || p->ino != s->lib.st_ino)
		return 0;
	s->inode_calls++;
	if (s->retries_left > 0) {
		s->retries_left--;
		return FLEET_RETRY;
	}
	return 0;
}

static void on_engine(void *ctx, const struct fleet_proc *p)
{
	struct seen *s = ctx;

	if (is_ours(s, p->pid) && s->nengines < 8)
		s->engines[s->nengines++] = p->pid;
}

static int engine_seen(const struct seen *s, pid_t pid)
{
	for (int i = 0; i < s->nengines; i++)
		if (s->engines[i] == pid)
			return 1;
	return 0;
}

static pid_t child(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		pause();
		_exit(0);
	}
	return pid;
}

static void reap(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

/* A live child is not gone; killed (a zombie, not yet reaped) it is; and
 * reaped. Its file, as on_inode would open it: its root's /bin/sh. */
static void check_gone(pid_t pid)
{
	struct fleet_proc p;
	char path[64];
	siginfo_t si;

	snprintf(path, sizeof(path), "/proc/%d/root/bin/sh", (int)pid);
	CHECK(fleet_read_proc(pid, &p) == 0, "labels of child %d", (int)pid);
	CHECK(!fleet_proc_gone(&p, path), "a live child is not gone");
	kill(pid, SIGKILL);
	CHECK(waitid(P_PID, pid, &si, WEXITED | WNOWAIT) == 0, "the child dies");
	CHECK(fleet_start_ticks(pid) == p.start_ticks, "a zombie keeps its start time");
	CHECK(fleet_proc_gone(&p, path), "a zombie is gone");
	waitpid(pid, NULL, 0);
	CHECK(fleet_proc_gone(&p, path), "a reaped child is gone");
}

int main(int argc, char **argv)
{
	static const struct fleet_callbacks cb = { on_inode, on_engine };
	struct seen s = { .retries_left = 1 };
	char lib[4096];
	struct fleet *f;
	pid_t a = -1, b = -1;

	(void)argc;
	snprintf(lib, sizeof(lib), "%.*s/../libinfer.so", (int)(strrchr(argv[0], '/') - argv[0]), argv[0]);
	if (strrchr(argv[0], '/') == NULL || stat(lib, &s.lib)) {
		printf("FAIL: no %s beside the test\n", lib);
		return 1;
	}
	if (!dlopen(lib, RTLD_NOW)) {
		printf("FAIL: dlopen %s: %s\n", lib, dlerror());
		return 1;
	}
	if (!(f = fleet_new("infer"))) {
		printf("FAIL: fleet_new\n");
		return 1;
	}
	s.ours[0] = getpid();

	CHECK(fleet_scan(f, &cb, &s, 1000) == 0, "first pass");
	CHECK(s.inode_calls == 1, "first pass: on_inode for libinfer.so %d times, want 1", s.inode_calls);
	CHECK(!engine_seen(&s, getpid()), "a process whose attach must be retried is no engine yet");

	s.ours[1] = a = child();
	CHECK(fleet_scan(f, &cb, &s, 1000) == 0, "second pass");
	CHECK(s.inode_calls == 2, "after FLEET_RETRY the next mapper brings the inode again: %d calls, want 2",
	      s.inode_calls);
	CHECK(engine_seen(&s, a), "the new child is an engine");

	s.ours[2] = b = child();
	CHECK(fleet_scan(f, &cb, &s, 1000) == 0, "third pass");
	CHECK(s.inode_calls == 2, "an attached inode does not come back: %d calls, want 2", s.inode_calls);
	CHECK(engine_seen(&s, b), "a later process mapping the attached inode is still an engine");

	check_gone(a);
	reap(b);
	fleet_free(f);
	return check_report();
}
