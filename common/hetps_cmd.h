/*
 * hetps_cmd.h — the `hetps` sub-commands that live in their own files
 * (common/hetps_NAME.c), each called by common/hetps.c with the arguments
 * after `hetps` (argv[0] is the command's name); each returns the exit code.
 */
#ifndef HETPS_CMD_H
#define HETPS_CMD_H

int hetps_cmd_compose(int argc, char **argv);
int hetps_cmd_health(int argc, char **argv);
int hetps_cmd_k8s(int argc, char **argv);
int hetps_cmd_shutdown(int argc, char **argv);

#endif
