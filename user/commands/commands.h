/* commands.h - the subcommands main.c dispatches to: each takes its own
 * argv (argv[0] is the command name) and returns the process exit status. */
#ifndef SPANTRACE_COMMANDS_H
#define SPANTRACE_COMMANDS_H

int cmd_record(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_daemon(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_check(int argc, char **argv);

#endif
