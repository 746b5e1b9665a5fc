/*
 * hetps_cmd.h — the `hetps` sub-commands that live in their own files
 * (common/hetps_<name>.c), each called by common/hetps.c's dispatch with
 * argv[0] the command's name. Each returns the process's exit status.
 */
#ifndef HETPS_CMD_H
#define HETPS_CMD_H

int hetps_cmd_compose(int argc, char **argv);
int hetps_cmd_health(int argc, char **argv);

#endif
