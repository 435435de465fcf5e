/* listen_ports.c - the TCP ports a process listens on (see listen_ports.h). */
#include "core/listen_ports.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SOCKETS 4096

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The inodes of pid's socket descriptors, sorted; their count or -1. */
static int socket_inodes(pid_t pid, uint64_t *inodes, int max)
{
	char path[64], link[64];
	struct dirent *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *dir = opendir(path);
	if (!dir)
		return -1;
	while ((d = readdir(dir)) && n < max) {
		char fdpath[320];
		ssize_t len;

		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, d->d_name);
		len = readlink(fdpath, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = 0;
		if (sscanf(link, "socket:[%" SCNu64 "]", &inodes[n]) == 1)
			n++;
	}
	closedir(dir);
	qsort(inodes, (size_t)n, sizeof(*inodes), cmp_u64);
	return n;
}

/* Adds the LISTEN rows of one /proc/PID/net table whose inode is pid's. */
static void scan_table(const char *file, const uint64_t *inodes, int ninodes, uint32_t *ports, int *n, int max)
{
	char line[512];
	FILE *f = fopen(file, "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && *n < max) {
		char local[128];
		unsigned state, port;
		uint64_t inode;
		int dup = 0;

		/* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
		if (sscanf(line, "%*s %127s %*s %x %*s %*s %*s %*u %*u %" SCNu64, local, &state, &inode) != 3 ||
		    state != 0x0A)
			continue;
		if (!bsearch(&inode, inodes, (size_t)ninodes, sizeof(*inodes), cmp_u64))
			continue;
		char *colon = strrchr(local, ':');
		if (!colon || sscanf(colon + 1, "%x", &port) != 1)
			continue;
		for (int i = 0; i < *n; i++)
			dup |= ports[i] == port;
		if (!dup)
			ports[(*n)++] = port;
	}
	fclose(f);
}

int http_listening_ports(pid_t pid, uint32_t *ports, int max)
{
	uint64_t *inodes = malloc(MAX_SOCKETS * sizeof(*inodes));
	char path[64];
	int ninodes, n = 0;

	if (!inodes)
		return -1;
	ninodes = socket_inodes(pid, inodes, MAX_SOCKETS);
	if (ninodes < 0) {
		free(inodes);
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/net/tcp", (int)pid);
	scan_table(path, inodes, ninodes, ports, &n, max);
	snprintf(path, sizeof(path), "/proc/%d/net/tcp6", (int)pid);
	scan_table(path, inodes, ninodes, ports, &n, max);
	free(inodes);
	return n;
}
