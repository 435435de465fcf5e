/* features.c - the kernel features spantrace uses, probed (see features.h). */
#include "core/features.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/uprobe_multi.h"

const struct feature_row feature_rows[FEAT_COUNT] = {
	[FEAT_BTF] = { "btf", "the kernel's BTF (/sys/kernel/btf/vmlinux), for CO-RE", 1,
		       "every tracing command", "nothing loads" },
	[FEAT_RINGBUF] = { "ringbuf", "BPF ring buffer maps", 1, "every tracing command",
			   "nothing loads: every record travels through one" },
	[FEAT_BPF_LOOP] = { "bpf_loop", "the bpf_loop helper", 1, "every tracing command (OpenCL batches, HTTP scanning)",
			    "nothing loads" },
	[FEAT_UPROBE_PMU] = { "uprobes", "uprobes through perf_event_open (the uprobe PMU)", 1,
			      "every probe, engine function and --span", "nothing attaches" },
	[FEAT_UPROBE_MULTI] = { "uprobe_multi", "uprobe_multi links (Linux 6.6)", 0,
				"USDT probes of record, top, daemon",
				"one link per probe site: attaching and detaching take seconds, not milliseconds" },
	[FEAT_SEND_SIGNAL] = { "send_signal", "the bpf_send_signal helper", 0,
			       "a command that loads llama.cpp later (-- node app.js)",
			       "a library loaded after the start is found late or not at all" },
	[FEAT_RAW_TP] = { "raw_tracepoints", "raw tracepoint programs (sched_process_exit, and the sock and tcp tracepoints)", 1,
			  "every tracing command (process exits); --http and the daemon's sockets",
			  "nothing loads" },
	[FEAT_PERF_SW] = { "perf_sw", "software perf events system-wide (cpu-clock)", 0, "profile (CPU samples)",
			   "profile cannot sample" },
	[FEAT_PERF_HW] = { "perf_hw", "hardware perf counters", 0, "record --perf and profile --events with cycles, instructions, ...",
			   "the software counters only (task-clock, page-faults, context switches, migrations: "
			   "the default); hardware events such as cycles are refused" },
	[FEAT_TRACEFS] = { "tracefs", "tracefs mounted (/sys/kernel/tracing)", 0,
			   "outside witnesses only (perf probe, bpftrace); spantrace itself does not",
			   "nothing of spantrace's" },
	[FEAT_SOCK_TP] = { "sock_tracepoints", "sock:sock_recv_length and sock_send_length (Linux 6.3)", 0,
			   "--http and the daemon's sockets: they fire for socket I/O only, so no other "
			   "system call, and no untraced process's, runs a program",
			   "HTTP requests are not traced (the command says so)" },
	[FEAT_SK_DATA_READY] = { "sk_data_ready", "sock:sk_data_ready (Linux 6.6)", 0,
				 "--http: when a request's bytes reached the socket, once per read",
				 "tcp_probe instead, which runs for every segment, ACKs too" },
};

static int turned_off(enum feature f)
{
	const char *off = getenv("SPANTRACE_FEATURES_OFF");
	size_t n = strlen(feature_rows[f].name);

	for (const char *p = off; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
		if (strcspn(p, ",") == n && !strncmp(p, feature_rows[f].name, n))
			return 1;
	}
	return 0;
}

static int perf_opens(__u32 type, __u64 config, pid_t pid, int cpu)
{
	struct perf_event_attr a = { .type = type, .size = sizeof(a), .config = config, .disabled = 1 };
	long fd = syscall(SYS_perf_event_open, &a, pid, cpu, -1, 0);

	if (fd < 0)
		return 0;
	close((int)fd);
	return 1;
}

static int tracefs_mounted(void)
{
	return !access("/sys/kernel/tracing/events", F_OK) || !access("/sys/kernel/debug/tracing/events", F_OK);
}

/* A tracepoint the kernel has: its raw tracepoint's BTF type. */
static int has_tracepoint(const char *name)
{
	struct btf *btf = btf__load_vmlinux_btf();
	char type[128];
	int found;

	if (!btf)
		return -1;
	snprintf(type, sizeof(type), "btf_trace_%s", name);
	found = btf__find_by_name_kind(btf, type, BTF_KIND_TYPEDEF) > 0;
	btf__free(btf);
	return found;
}

/* libbpf's probes load a program: without CAP_BPF they cannot tell (-1). */
static int probe(enum feature f)
{
	switch (f) {
	case FEAT_BTF: return !access("/sys/kernel/btf/vmlinux", R_OK);
	case FEAT_RINGBUF: return libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 1 ? 1 : -1;
	case FEAT_BPF_LOOP:
		return libbpf_probe_bpf_helper(BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_FUNC_loop, NULL) == 1 ? 1 : -1;
	case FEAT_UPROBE_PMU: return !access("/sys/bus/event_source/devices/uprobe/type", R_OK);
	case FEAT_UPROBE_MULTI: return umulti_kernel_supported();
	case FEAT_SEND_SIGNAL:
		return libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_send_signal, NULL) == 1 ? 1 : -1;
	case FEAT_RAW_TP: return libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_RAW_TRACEPOINT, NULL) == 1 ? 1 : -1;
	case FEAT_PERF_SW: return perf_opens(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, -1, 0);
	case FEAT_PERF_HW: return perf_opens(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, 0, -1);
	case FEAT_TRACEFS: return tracefs_mounted();
	case FEAT_SOCK_TP: return has_tracepoint("sock_recv_length") == 1 && has_tracepoint("sock_send_length") == 1;
	case FEAT_SK_DATA_READY: return has_tracepoint("sk_data_ready") == 1;
	default: return 0;
	}
}

int feature_present(enum feature f)
{
	static int known[FEAT_COUNT], value[FEAT_COUNT];

	if ((unsigned)f >= FEAT_COUNT)
		return 0;
	if (!known[f]) {
		value[f] = turned_off(f) ? 0 : probe(f);
		known[f] = 1;
	}
	return value[f];
}

int caps_effective(unsigned long long *eff)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data))
		return -1;
	*eff = (unsigned long long)data[1].effective << 32 | data[0].effective;
	return 0;
}

int features_require(char *err, size_t errlen)
{
	for (unsigned f = 0; f < FEAT_COUNT; f++)
		if (feature_rows[f].required && feature_present(f) == 0) {
			snprintf(err, errlen, "this kernel lacks %s (%s), which spantrace needs: `spantrace check` "
				 "lists what it has", feature_rows[f].name, feature_rows[f].what);
			return -1;
		}
	return 0;
}
