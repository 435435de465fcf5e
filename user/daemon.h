/* daemon.h - the `daemon` subcommand: always-on tracing with in-kernel
 * aggregation, a Prometheus endpoint and tail capture of slow spans. */
#ifndef SPANTRACE_DAEMON_H
#define SPANTRACE_DAEMON_H

int cmd_daemon(int argc, char **argv);

#endif
