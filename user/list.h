/* list.h - the `list` subcommand: the `infer` probes of a file or a pid. */
#ifndef SPANTRACE_LIST_H
#define SPANTRACE_LIST_H

int cmd_list(int argc, char **argv);

#endif
