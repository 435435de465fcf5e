/* record.h - the `record` subcommand. */
#ifndef SPANTRACE_RECORD_H
#define SPANTRACE_RECORD_H

int cmd_record(int argc, char **argv);

#endif
