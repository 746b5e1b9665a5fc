/*
 * hetps_cmd.h — the `hetps` sub-commands that live in their own files
 * (common/hetps_<name>.c), dispatched by common/hetps.c. Each takes the
 * command's arguments (argv[0] is the command name) and returns the exit
 * status.
 */
#ifndef HETPS_CMD_H
#define HETPS_CMD_H

int hetps_cmd_certs(int argc, char **argv);

#endif
