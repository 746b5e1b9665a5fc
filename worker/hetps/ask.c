/*
 * ask.c — what the commands that read the cluster's state share: every
 * parameter server's status, asked as the front door (admin) with short
 * timeouts (status.c, health.c).
 */
#include <stdlib.h>

#include "err.h"
#include "hetps.h"

int hetps_ask_status(const struct hc_cluster *cl, struct pc_shard_status **out)
{
    struct pc_shard_status *st = calloc((size_t)cl->n_ps, sizeof *st);
    struct pc_client *pc = NULL;
    int rv;

    *out = NULL;
    if (!st)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    rv = pc_open(&pc, cl, -1, 0,
                 &(struct pc_opts){ .timeout_ms = 1000, .retry_ms = 2000 });
    if (rv == HC_OK)
        rv = pc_status(pc, st);
    pc_close(pc);
    if (rv != HC_OK) {
        free(st);
        return rv;
    }
    *out = st;
    return HC_OK;
}
