/* rssattr.c - RSS: pools vs the rest (see rssattr.h). */
#include "analysis/rssattr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int rss_read(pid_t pid, uint64_t *bytes)
{
	char path[64], line[128], *end, *start;
	unsigned long long resident;
	long page = sysconf(_SC_PAGESIZE);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
	if (!(f = fopen(path, "re")))
		return -1;
	start = fgets(line, sizeof(line), f);
	fclose(f);
	if (!start)
		return -1;
	/* statm: size resident shared ... (pages) */
	errno = 0;
	strtoull(line, &end, 10);
	if (errno || end == line || *end != ' ')
		return -1;
	start = end + 1;
	resident = strtoull(start, &end, 10);
	if (errno || end == start)
		return -1;
	*bytes = (uint64_t)resident * (uint64_t)(page > 0 ? page : 4096);
	return 0;
}

void rss_split_make(uint64_t rss, const uint64_t reserved[POOL_COUNT], struct rss_split *out)
{
	uint64_t pools = 0;

	for (unsigned p = 0; p < POOL_COUNT; p++)
		pools += reserved[p];
	out->rss = rss;
	out->pools = pools < rss ? pools : rss;
	out->other = rss - out->pools;
}

int rss_split_read(pid_t pid, const uint64_t reserved[POOL_COUNT], struct rss_split *out)
{
	uint64_t rss;

	if (rss_read(pid, &rss))
		return -1;
	rss_split_make(rss, reserved, out);
	return 0;
}
