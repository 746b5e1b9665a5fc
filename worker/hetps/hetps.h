/*
 * hetps.h — the commands of `hetps`, the front door (worker/hetps/).
 *
 * main.c dispatches `hetps COMMAND ARG...` to hetps_cmd_COMMAND(argc, argv)
 * with argv[0] the command's name; each returns the process's exit code
 * (0, 1 when the work failed, 2 for a usage or configuration mistake) and
 * prints its own messages. To add a command: a file worker/hetps/NAME.c
 * with hetps_cmd_NAME, its line here, its row in main.c's table.
 */
#ifndef HETPS_FRONT_DOOR_H
#define HETPS_FRONT_DOOR_H

#include <stddef.h>

#include "cluster.h"
#include "worker/client.h"

int hetps_cmd_launch(int argc, char **argv);        /* launch.c */
int hetps_cmd_status(int argc, char **argv);        /* status.c */
int hetps_cmd_check_config(int argc, char **argv);  /* check_config.c */
int hetps_cmd_export(int argc, char **argv);        /* roles.c: hetps-ps */
int hetps_cmd_inspect(int argc, char **argv);       /* roles.c: hetps-ps */
int hetps_cmd_reshard(int argc, char **argv);       /* roles.c: hetps-ps */
int hetps_cmd_eval(int argc, char **argv);          /* roles.c: hetps-worker */
int hetps_cmd_predict(int argc, char **argv);       /* roles.c: hetps-worker */
int hetps_cmd_compose(int argc, char **argv);       /* compose.c */
int hetps_cmd_health(int argc, char **argv);        /* health.c */
int hetps_cmd_k8s(int argc, char **argv);           /* k8s.c */
int hetps_cmd_shutdown(int argc, char **argv);      /* shutdown.c */
int hetps_cmd_plot(int argc, char **argv);          /* plot.c */
int hetps_cmd_certs(int argc, char **argv);         /* certs.c */

/* Every parameter server's status (pc_status), asked as the front door
 * with short timeouts: HC_OK and *out (cl->n_ps entries; free with
 * pc_status_free and free), or an error code with hc_err_msg() set and
 * *out NULL. ask.c. */
int hetps_ask_status(const struct hc_cluster *cl, struct pc_shard_status **out);

/* The directory of this executable, where hetps-ps and hetps-worker are
 * looked for ("." when /proc/self/exe cannot be read); roles.c. */
void hetps_bin_dir(char *out, size_t len);

#endif
