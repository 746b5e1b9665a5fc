/*
 * status.c — `hetps status`: ask every parameter server of a cluster what
 * it knows (its mode, version and counters, and the workers it has seen)
 * and print one line per task. Exits 1 when a server does not answer.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cluster.h"
#include "err.h"
#include "hetps.h"
#include "worker/client.h"

int hetps_cmd_status(int argc, char **argv)
{
    static const struct option opts[] = {
        { "cluster", required_argument, NULL, 'c' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *file = NULL;
    struct pc_shard_status *st;
    struct hc_cluster cl;
    struct hc_diag diag;
    int c, i, w, rv, down = 0;

    optind = 1;
    while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': file = optarg; break;
        case 'h':
            printf("Usage: hetps status [--cluster FILE | FILE]\n"
                   "Ask every parameter server of the cluster (FILE, or\n"
                   "TF_CONFIG) for its state and the workers it knows.\n"
                   "Exit status 1 when a server does not answer.\n");
            return 0;
        default:
            fprintf(stderr, "Try 'hetps status --help' for more information.\n");
            return 2;
        }
    }
    if (!file && optind < argc)
        file = argv[optind++];
    if (hc_cluster_resolve(file, NULL, 0, &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    if ((rv = hetps_ask_status(&cl, &st)) != HC_OK) {
        fprintf(stderr, "hetps status: %s\n", hc_err_msg());
        hc_cluster_free(&cl);
        return 1;
    }
    printf("%-10s %-8s %s\n", "TASK", "STATE", "DETAIL");
    for (i = 0; i < cl.n_ps; i++) {
        if (!st[i].up) {
            printf("ps:%-7d %-8s %s: %s\n", i, "down", cl.ps[i].addr, st[i].error);
            down++;
            continue;
        }
        printf("ps:%-7d %-8s %s mode %s incarnation %016llx version %llu "
               "requests %llu duplicates %llu rejected %llu late %llu "
               "stale %llu nonfinite %llu max_ahead %u waiting %u uptime %.1fs\n",
               i, "up", cl.ps[i].addr, st[i].mode,
               (unsigned long long)st[i].incarnation,
               (unsigned long long)st[i].version,
               (unsigned long long)st[i].requests,
               (unsigned long long)st[i].duplicates,
               (unsigned long long)st[i].rejected,
               (unsigned long long)st[i].late,
               (unsigned long long)st[i].stale,
               (unsigned long long)st[i].nonfinite, st[i].max_ahead,
               st[i].waiting, st[i].uptime_ms / 1000.0);
        if (st[i].waiting_for[0] && st[i].waiting_s >= 1.0)
            printf("ps:%-7d %-8s step %llu waiting for %s for %.1f s\n", i,
                   "waits", (unsigned long long)st[i].version,
                   st[i].waiting_for, st[i].waiting_s);
    }
    for (w = 0; w < cl.n_worker; w++) {
        char states[1024] = "";
        const char *devices = "";
        size_t len = 0;
        int seen = 0;

        for (i = 0; i < cl.n_ps; i++) {
            int k;

            for (k = 0; k < st[i].n_members; k++) {
                const struct pc_member *m = &st[i].members[k];

                if (m->worker != w)
                    continue;
                seen++;
                devices = m->devices;
                char lag[40] = "", at[64] = "";

                if (m->lag_ms >= 0)
                    snprintf(lag, sizeof lag, ", lag %.2f ms", (double)m->lag_ms);
                if (m->has_place)
                    snprintf(at, sizeof at, ", at epoch %u batch %u",
                             m->epoch + 1, m->batches);
                len += (size_t)snprintf(states + len, sizeof states - len,
                                        "%sps:%d %s (seen %llums ago, %llu requests, %llu duplicates, "
                                        "clock %llu%s, %.0f samples/s, share %u%s, late %llu)",
                                        len ? "; " : "", i,
                                        pc_member_state_name(m->state),
                                        (unsigned long long)m->last_seen_ms,
                                        (unsigned long long)m->requests,
                                        (unsigned long long)m->duplicates,
                                        (unsigned long long)m->clock, at,
                                        (double)m->samples_per_s, m->share, lag,
                                        (unsigned long long)m->late);
                if (len >= sizeof states)
                    len = sizeof states - 1;
            }
        }
        printf("worker:%-3d %-8s %s devices %s%s%s\n", w,
               seen ? "known" : "unknown", cl.worker[w].addr,
               devices[0] ? devices : "-", seen ? ": " : "", states);
    }
    pc_status_free(st, cl.n_ps);
    free(st);
    hc_cluster_free(&cl);
    return down ? 1 : 0;
}
