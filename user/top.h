/* top.h - the `top` subcommand: the live view of a traced engine. */
#ifndef SPANTRACE_TOP_H
#define SPANTRACE_TOP_H

int cmd_top(int argc, char **argv);

#endif
