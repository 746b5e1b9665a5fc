/*
 * hetps_cmd.h — the `hetps` front door's sub-commands that live in their
 * own files (common/hetps_<name>.c), one line each; common/hetps.c
 * dispatches to them.
 */
#ifndef HETPS_CMD_H
#define HETPS_CMD_H

int hetps_cmd_plot(int argc, char **argv);

#endif
