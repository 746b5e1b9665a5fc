/*
 * hetps_health.c — `hetps health`: is one task of the cluster healthy? It
 * asks the parameter servers, as `hetps status` does: a ps is healthy when
 * it answers, a worker while a shard reports it joined. Exit 0 healthy,
 * 1 not, 2 on a bad flag or cluster file.
 *
 * Without --task and FILE it checks the task this container runs: it reads
 * PID 1's command line (hetps-ps or hetps-worker with --cluster and
 * --task), so one HEALTHCHECK line in the image serves every task.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/client.h"
#include "cluster.h"
#include "err.h"
#include "hetps.h"

/* The value of a flag in an argv-like list: "--name V", "--name=V", "-s V". */
static const char *flag_value(int argc, char **argv, const char *name,
                              const char *short_name)
{
    size_t n = strlen(name);
    int i;

    for (i = 1; i < argc; i++) {
        if (!strncmp(argv[i], name, n) && argv[i][n] == '=')
            return argv[i] + n + 1;
        if ((!strcmp(argv[i], name) || !strcmp(argv[i], short_name)) &&
            i + 1 < argc)
            return argv[i + 1];
    }
    return NULL;
}

/*
 * The task PID 1 runs: its cluster file and task, copied into file/task
 * (empty when PID 1 does not name them). Returns 0, or -1 when PID 1 is
 * not a hetps task (message printed).
 */
static int task_of_pid1(char *file, size_t flen, char *task, size_t tlen)
{
    char buf[8192], *args[128];
    const char *v, *prog;
    size_t n, i;
    int argc = 0;
    FILE *f = fopen("/proc/1/cmdline", "r");

    if (!f) {
        fprintf(stderr, "hetps health: cannot read /proc/1/cmdline: give "
                "--task JOB:INDEX and the cluster file\n");
        return -1;
    }
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (i = 0; i < n && argc < 128; i += strlen(buf + i) + 1)
        args[argc++] = buf + i;
    prog = argc ? strrchr(args[0], '/') : NULL;
    prog = prog ? prog + 1 : argc ? args[0] : "";
    if (strcmp(prog, "hetps-ps") && strcmp(prog, "hetps-worker")) {
        fprintf(stderr, "hetps health: PID 1 is '%s', not hetps-ps or "
                "hetps-worker: give --task JOB:INDEX and the cluster file\n",
                prog);
        return -1;
    }
    v = flag_value(argc, args, "--cluster", "-c");
    snprintf(file, flen, "%s", v ? v : "");
    v = flag_value(argc, args, "--task", "-t");
    snprintf(task, tlen, "%s", v ? v : "");
    return 0;
}

/* Whether the task is healthy by the shards' answers; a line says why. */
static int judge(const struct hc_cluster *cl, const struct pc_shard_status *st)
{
    int i, k, up = 0;

    if (cl->task_job == HC_JOB_PS) {
        const struct pc_shard_status *s = &st[cl->task_index];

        if (s->up)
            printf("ps:%d healthy: answers at %s\n", cl->task_index,
                   cl->ps[cl->task_index].addr);
        else
            printf("ps:%d unhealthy: %s: %s\n", cl->task_index,
                   cl->ps[cl->task_index].addr, s->error);
        return s->up;
    }
    for (i = 0; i < cl->n_ps; i++) {
        up += st[i].up;
        for (k = 0; k < st[i].n_members; k++)
            if (st[i].members[k].worker == cl->task_index &&
                st[i].members[k].state == PC_MEMBER_JOINED) {
                printf("worker:%d healthy: joined (ps:%d says so)\n",
                       cl->task_index, i);
                return 1;
            }
    }
    printf("worker:%d unhealthy: %s\n", cl->task_index,
           up ? "not joined at any parameter server that answers"
              : "no parameter server answers");
    return 0;
}

int hetps_cmd_health(int argc, char **argv)
{
    static const struct option opts[] = {
        { "task", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    char pfile[4096] = "", ptask[64] = "";
    const char *file = NULL, *task = NULL;
    struct pc_shard_status *st = NULL;
    struct hc_cluster cl;
    struct hc_diag diag;
    int c, rv, healthy = 0;

    optind = 1;
    while ((c = getopt_long(argc, argv, "t:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': task = optarg; break;
        case 'h':
            printf("Usage: hetps health [--task JOB:INDEX] [FILE]\n"
                   "Exit 0 when the task is healthy: a parameter server that\n"
                   "answers, a worker joined at a shard. FILE: the cluster file\n"
                   "(default TF_CONFIG). Without --task and FILE, the task that\n"
                   "PID 1 runs (a container's HEALTHCHECK).\n");
            return 0;
        default:
            fprintf(stderr, "Try 'hetps health --help' for more information.\n");
            return 2;
        }
    }
    if (optind < argc)
        file = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "hetps health: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!task && !file) {
        if (task_of_pid1(pfile, sizeof pfile, ptask, sizeof ptask) != 0)
            return 2;
        file = pfile[0] ? pfile : NULL;
        task = ptask[0] ? ptask : NULL;
    }
    if (hc_cluster_resolve(file, task, 1, &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    rv = hetps_ask_status(&cl, &st);
    if (rv == HC_OK) {
        healthy = judge(&cl, st);
        pc_status_free(st, cl.n_ps);
    } else {
        printf("%s:%d unhealthy: %s\n", hc_job_name(cl.task_job),
               cl.task_index, hc_err_msg());
    }
    free(st);
    hc_cluster_free(&cl);
    return healthy ? 0 : 1;
}
