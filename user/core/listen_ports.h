/* listen_ports.h - the TCP ports a process listens on, from /proc: its
 * socket descriptors' inodes matched with /proc/PID/net/tcp{,6}'s LISTEN
 * rows (--http times a request from its arrival on these ports). */
#ifndef SPANTRACE_LISTEN_PORTS_H
#define SPANTRACE_LISTEN_PORTS_H

#include <stdint.h>
#include <sys/types.h>

/* Up to max distinct ports into ports; their count, or -1 when /proc could
 * not be read (no such process, no permission). */
int http_listening_ports(pid_t pid, uint32_t *ports, int max);

#endif
