/* check.c - `spantrace check`: what this kernel and these privileges allow,
 * before anything fails. Each kernel feature spantrace uses, present or
 * not, with what needs it and what degrades without it; the capabilities
 * held; tracefs, BTF; whether perf_event_paranoid lets `profile` sample.
 * Exits 1 when `record` could not run here. */
#include "commands/commands.h"

#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include "core/features.h"

static const struct {
	int cap;
	const char *name, *why;
} caps[] = {
	{ CAP_BPF, "CAP_BPF", "load the programs and maps (every tracing command)" },
	{ CAP_PERFMON, "CAP_PERFMON", "attach uprobes and perf events (every tracing command)" },
	{ CAP_SYS_ADMIN, "CAP_SYS_ADMIN", "grants both of the above, where a kernel predates them" },
	{ CAP_SYS_PTRACE, "CAP_SYS_PTRACE", "-p PID of another user's process: read its /proc/PID/maps and files" },
	{ CAP_KILL, "CAP_KILL", "ask another user's engine for its state, hold a command at a library load" },
};

static int read_paranoid(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	int v = 99;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 99;
		fclose(f);
	}
	return v;
}

static void print_features(int *blocked)
{
	printf("kernel features:\n");
	for (unsigned f = 0; f < FEAT_COUNT; f++) {
		const struct feature_row *r = &feature_rows[f];
		int v = feature_present(f);

		printf("  %-16s %-8s %s\n", r->name, v > 0 ? "present" : v == 0 ? "MISSING" : "unknown", r->what);
		printf("  %-16s %-8s used by: %s%s\n", "", "", r->used_by, r->required ? " (required)" : "");
		if (v <= 0)
			printf("  %-16s %-8s without it: %s\n", "", "", r->without);
		if (r->required && v == 0)
			*blocked = 1;
	}
}

/* The hooks --http gets on this kernel (bpf/http.bpf.c). */
static void print_http_hooks(void)
{
	if (feature_present(FEAT_SOCK_TP) <= 0) {
		printf("--http hooks: none (no sock tracepoints): HTTP requests are not traced\n");
		return;
	}
	printf("--http hooks: sock:sock_recv_length, sock:sock_send_length, %s, sock:inet_sock_set_state, "
	       "sched:sched_process_fork (raw tracepoints; no sys_enter/sys_exit)\n",
	       feature_present(FEAT_SK_DATA_READY) > 0 ? "sock:sk_data_ready" : "tcp:tcp_probe (no sk_data_ready)");
}

static void print_caps(unsigned long long eff, int *blocked)
{
	int bpf = (eff >> CAP_BPF) & 1, perfmon = (eff >> CAP_PERFMON) & 1, admin = (eff >> CAP_SYS_ADMIN) & 1;

	printf("capabilities (effective):\n");
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		printf("  %-16s %-8s %s\n", caps[i].name, (eff >> caps[i].cap) & 1 ? "held" : "not held", caps[i].why);
	if (!admin && !(bpf && perfmon)) {
		printf("  -> record, top, profile and daemon need CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)\n");
		*blocked = 1;
	}
}

static void print_paranoid(unsigned long long eff)
{
	int p = read_paranoid(), perfmon = ((eff >> CAP_PERFMON) & 1) || ((eff >> CAP_SYS_ADMIN) & 1);

	printf("perf_event_paranoid: %d: profile's system-wide CPU samples are %s\n", p,
	       perfmon ? "allowed (CAP_PERFMON overrides it)"
	       : p <= 0 ? "allowed (paranoid <= 0)" : "not allowed without CAP_PERFMON (needs paranoid <= 0)");
}

int cmd_check(int argc, char **argv)
{
	unsigned long long eff = 0;
	struct utsname u;
	int blocked = 0;

	if (argc > 1) {
		if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
			printf("usage: spantrace check\n"
			       "Prints each kernel feature spantrace uses (present or not, which commands need it,\n"
			       "what degrades without it), the capabilities held and perf_event_paranoid. Exits 1\n"
			       "when record could not run here. SPANTRACE_FEATURES_OFF=name,... reads those as missing.\n");
			return 0;
		}
		fprintf(stderr, "spantrace check: unknown argument '%s' (see --help)\n", argv[1]);
		return 2;
	}
	uname(&u);
	printf("spantrace check: %s %s %s\n", u.sysname, u.release, u.machine);
	if (caps_effective(&eff))
		printf("capabilities: unreadable\n");
	print_features(&blocked);
	print_http_hooks();
	print_caps(eff, &blocked);
	print_paranoid(eff);
	printf("verdict: record %s here\n", blocked ? "cannot run" : "can run");
	return blocked ? 1 : 0;
}
