/* perfev.c - perf counters and the sampling event (see perfev.h). */
#include "analysis/perfev.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static const struct perf_event_desc known_events[] = {
	{ "task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, 0 },
	{ "cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, 0 },
	{ "page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, 0 },
	{ "minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN, 0 },
	{ "major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ, 0 },
	{ "context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, 0 },
	{ "cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS, 0 },
	{ "cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 1 },
	{ "instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, 1 },
	{ "cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES, 1 },
	{ "cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, 1 },
	{ "branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS, 1 },
	{ "branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, 1 },
	{ "ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES, 1 },
};

const struct perf_event_desc *perfev_lookup(const char *name)
{
	for (size_t i = 0; i < sizeof(known_events) / sizeof(known_events[0]); i++)
		if (!strcmp(known_events[i].name, name))
			return &known_events[i];
	return NULL;
}

static void known_names(char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(known_events) / sizeof(known_events[0]) && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
					 known_events[i].name);
}

int perfev_parse_list(const char *list, const struct perf_event_desc **out, unsigned max,
		      unsigned *n, char *err, size_t errlen)
{
	*n = 0;
	const char *p = list;
	for (;;) {
		size_t len = strcspn(p, ",");
		char name[64];
		if (len == 0 || len >= sizeof(name)) {
			snprintf(err, errlen, "--events: %s event name in '%s'",
				 len ? "overlong" : "empty", list);
			return -1;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		const struct perf_event_desc *d = perfev_lookup(name);
		if (!d) {
			char known[512];
			known_names(known, sizeof(known));
			snprintf(err, errlen, "--events: unknown event '%s' (known: %s)", name, known);
			return -1;
		}
		for (unsigned i = 0; i < *n; i++) {
			if (out[i] == d) {
				snprintf(err, errlen, "--events: '%s' listed twice", name);
				return -1;
			}
		}
		if (*n == max) {
			snprintf(err, errlen, "--events: at most %u events", max);
			return -1;
		}
		out[(*n)++] = d;
		if (p[len] == '\0')
			return 0;
		p += len + 1;
	}
}

static int perf_event_open(struct perf_event_attr *attr, int pid, int cpu)
{
	return (int)syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* Online CPUs from sysfs ("0-3,5"); marks online[cpu] for cpu < ncpus. If
 * the file is unreadable every possible CPU is taken as online. */
static void read_online(unsigned char *online, unsigned ncpus)
{
	FILE *f = fopen("/sys/devices/system/cpu/online", "re");
	char buf[1024];
	if (!f || !fgets(buf, sizeof(buf), f)) {
		memset(online, 1, ncpus);
		if (f)
			fclose(f);
		return;
	}
	fclose(f);
	memset(online, 0, ncpus);
	char *p = buf;
	while (*p && *p != '\n') {
		char *end;
		unsigned long lo = strtoul(p, &end, 10), hi = lo;
		if (end == p)
			break;
		if (*end == '-') {
			p = end + 1;
			hi = strtoul(p, &end, 10);
			if (end == p)
				break;
		}
		for (unsigned long c = lo; c <= hi && c < ncpus; c++)
			online[c] = 1;
		p = *end == ',' ? end + 1 : end;
	}
}

static int possible_cpus(unsigned char **online, char *err, size_t errlen)
{
	int n = libbpf_num_possible_cpus();
	if (n <= 0) {
		snprintf(err, errlen, "cannot count possible CPUs: %s", strerror(n ? -n : EINVAL));
		return -1;
	}
	*online = malloc((size_t)n);
	if (!*online) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	read_online(*online, (unsigned)n);
	return n;
}

static void close_fds(int *fds, size_t n)
{
	for (size_t i = 0; fds && i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static void counter_attr(struct perf_event_attr *attr, const struct perf_event_desc *d)
{
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
	attr->type = d->type;
	attr->config = d->config;
	attr->read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
}

static int missing_pmu(int e)
{
	return e == ENOENT || e == EOPNOTSUPP || e == ENODEV;
}

static void note_dropped(struct perf_counters *pc, const char *name)
{
	size_t len = strlen(pc->dropped);
	snprintf(pc->dropped + len, sizeof(pc->dropped) - len, "%s%s", len ? "," : "", name);
}

/* Decides which events this machine supports by opening each on the first
 * online CPU; keeps the supported ones in pc->events. */
static int probe_support(struct perf_counters *pc, const struct perf_event_desc **wanted, unsigned n,
			 int cpu, char *err, size_t errlen)
{
	for (unsigned i = 0; i < n; i++) {
		struct perf_event_attr attr;
		counter_attr(&attr, wanted[i]);
		int fd = perf_event_open(&attr, -1, cpu);
		if (fd >= 0) {
			close(fd);
			pc->names[pc->ncounters] = wanted[i]->name;
			pc->events[pc->ncounters++] = wanted[i];
		} else if (wanted[i]->hardware && missing_pmu(errno)) {
			note_dropped(pc, wanted[i]->name);
		} else {
			snprintf(err, errlen, "perf_event_open(%s, cpu %d): %s%s", wanted[i]->name,
				 cpu, strerror(errno),
				 errno == EACCES || errno == EPERM ? " (needs root or CAP_PERFMON)" : "");
			return -1;
		}
	}
	if (pc->dropped[0])
		fprintf(stderr, "spantrace: hardware perf events are not supported on this machine; "
			"dropped %s, continuing with %u software event(s)\n", pc->dropped, pc->ncounters);
	return 0;
}

int perfev_counters_open(struct perf_counters *pc, const char *list, char *err, size_t errlen)
{
	const struct perf_event_desc *wanted[PERF_COUNTERS_MAX];
	unsigned n;
	memset(pc, 0, sizeof(*pc));
	if (perfev_parse_list(list ? list : PERFEV_DEFAULT_EVENTS, wanted, PERF_COUNTERS_MAX, &n,
			      err, errlen))
		return -1;
	unsigned char *online;
	int ncpus = possible_cpus(&online, err, errlen);
	if (ncpus < 0)
		return -1;
	int first = 0;
	while (first < ncpus && !online[first])
		first++;
	int rc = probe_support(pc, wanted, n, first < ncpus ? first : 0, err, errlen);
	pc->ncpus = (unsigned)ncpus;
	size_t nfds = (size_t)pc->ncpus * pc->ncounters;
	pc->fds = rc ? NULL : malloc((nfds ? nfds : 1) * sizeof(int));
	if (!rc && !pc->fds) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
	}
	for (size_t k = 0; rc == 0 && k < nfds; k++)
		pc->fds[k] = -1;
	for (unsigned cpu = 0; rc == 0 && cpu < pc->ncpus; cpu++) {
		for (unsigned i = 0; online[cpu] && i < pc->ncounters; i++) {
			struct perf_event_attr attr;
			counter_attr(&attr, pc->events[i]);
			int fd = perf_event_open(&attr, -1, (int)cpu);
			if (fd < 0) {
				snprintf(err, errlen, "perf_event_open(%s, cpu %u): %s",
					 pc->events[i]->name, cpu, strerror(errno));
				rc = -1;
				break;
			}
			pc->fds[cpu * pc->ncounters + i] = fd;
		}
	}
	free(online);
	if (rc)
		perfev_counters_close(pc);
	return rc;
}

int perfev_counters_install(const struct perf_counters *pc, int map_fd, char *err, size_t errlen)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(map_fd, &info, &len)) {
		snprintf(err, errlen, "perf counter map: %s", strerror(errno));
		return -1;
	}
	__u64 need = (__u64)pc->ncpus * pc->ncounters;
	if (info.type != BPF_MAP_TYPE_PERF_EVENT_ARRAY || info.max_entries < need) {
		snprintf(err, errlen, "perf counter map must be a PERF_EVENT_ARRAY of >= %llu "
			 "entries (is type %u with %u)", (unsigned long long)need, info.type,
			 info.max_entries);
		return -1;
	}
	for (__u32 k = 0; k < need; k++) {
		if (pc->fds[k] < 0)
			continue;
		__u32 fd = (__u32)pc->fds[k];
		if (bpf_map_update_elem(map_fd, &k, &fd, BPF_ANY)) {
			snprintf(err, errlen, "installing perf counter %u: %s", k, strerror(errno));
			return -1;
		}
	}
	return 0;
}

__u64 perfev_scale(__u64 counter, __u64 enabled, __u64 running)
{
	if (running == 0 || running >= enabled)
		return counter;
	return (__u64)((unsigned __int128)counter * enabled / running);
}

int perfev_counters_read(const struct perf_counters *pc, unsigned i, __u64 *value)
{
	*value = 0;
	if (i >= pc->ncounters)
		return -1;
	for (unsigned cpu = 0; cpu < pc->ncpus; cpu++) {
		int fd = pc->fds[cpu * pc->ncounters + i];
		__u64 v[3]; /* value, time enabled, time running */
		if (fd < 0)
			continue;
		if (read(fd, v, sizeof(v)) != (ssize_t)sizeof(v))
			return -1;
		*value += perfev_scale(v[0], v[1], v[2]);
	}
	return 0;
}

void perfev_counters_close(struct perf_counters *pc)
{
	close_fds(pc->fds, (size_t)pc->ncpus * pc->ncounters);
	free(pc->fds);
	pc->fds = NULL;
	pc->ncounters = 0;
}

static unsigned max_sample_rate(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "re");
	char buf[32], *end;
	unsigned long v = 0;
	if (f && fgets(buf, sizeof(buf), f)) {
		v = strtoul(buf, &end, 10);
		if (end == buf)
			v = 0;
	}
	if (f)
		fclose(f);
	return v ? (unsigned)v : 100000;
}

int perfev_sampler_open(struct perf_sampler *ps, unsigned hz, char *err, size_t errlen)
{
	memset(ps, 0, sizeof(*ps));
	unsigned max = max_sample_rate();
	if (hz == 0 || hz > max) {
		snprintf(err, errlen, "-F %u: sampling frequency must be 1..%u "
			 "(/proc/sys/kernel/perf_event_max_sample_rate)", hz, max);
		return -1;
	}
	unsigned char *online;
	int ncpus = possible_cpus(&online, err, errlen);
	if (ncpus < 0)
		return -1;
	ps->ncpus = (unsigned)ncpus;
	ps->hz = hz;
	ps->fds = malloc((size_t)ncpus * sizeof(int));
	int rc = ps->fds ? 0 : -1;
	if (rc)
		snprintf(err, errlen, "out of memory");
	for (int cpu = 0; rc == 0 && cpu < ncpus; cpu++)
		ps->fds[cpu] = -1;
	for (int cpu = 0; rc == 0 && cpu < ncpus; cpu++) {
		if (!online[cpu])
			continue;
		struct perf_event_attr attr = {
			.size = sizeof(attr),
			.type = PERF_TYPE_SOFTWARE,
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.freq = 1,
			.sample_freq = hz,
		};
		ps->fds[cpu] = perf_event_open(&attr, -1, cpu);
		if (ps->fds[cpu] < 0) {
			snprintf(err, errlen, "perf_event_open(cpu-clock sampling, cpu %d): %s", cpu,
				 strerror(errno));
			rc = -1;
		}
	}
	free(online);
	if (rc)
		perfev_sampler_close(ps);
	return rc;
}

void perfev_sampler_close(struct perf_sampler *ps)
{
	close_fds(ps->fds, ps->ncpus);
	free(ps->fds);
	ps->fds = NULL;
}
