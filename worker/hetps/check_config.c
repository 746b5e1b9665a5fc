/*
 * check_config.c — `hetps check-config`: resolve a cluster file (or
 * TF_CONFIG) as a task would, and print the result, or one line per
 * mistake and exit 2.
 */
#include <getopt.h>
#include <stdio.h>

#include "cluster.h"
#include "err.h"
#include "hetps.h"

int hetps_cmd_check_config(int argc, char **argv)
{
    static const struct option opts[] = {
        { "task", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *file = NULL, *task = NULL;
    struct hc_cluster cl;
    struct hc_diag diag;
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "t:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': task = optarg; break;
        case 'h':
            printf("Usage: hetps check-config [--task JOB:INDEX] [FILE]\n"
                   "Check a cluster file (without FILE: the TF_CONFIG\n"
                   "variable) and print the resolved cluster; on a mistake\n"
                   "print one line per problem and exit 2.\n");
            return 0;
        default:
            fprintf(stderr, "Try 'hetps check-config --help' for more information.\n");
            return 2;
        }
    }
    if (optind < argc)
        file = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "hetps check-config: unexpected argument '%s'\n",
                argv[optind]);
        return 2;
    }
    if (hc_cluster_resolve(file, task, 0, &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    for (c = 0; c < diag.n_note; c++)
        printf("note: %s\n", diag.note[c]);
    hc_cluster_print(&cl, stdout);
    hc_cluster_free(&cl);
    return 0;
}
