/*
 * counter.c — the exactly-once check of the integration tests.
 *
 *   counter CLUSTER_FILE PUSHES [LOSE_REPLY_EVERY [async|sync [PAUSE_MS]]]
 *
 * Joins as worker 0, creates a two-variable model trained by SGD with
 * learning rate 1, and pushes a gradient of −1 PUSHES times, one after the
 * other: every applied push adds exactly 1.0 to every parameter. The test
 * around it kills, pauses and restarts the parameter servers meanwhile; the
 * client re-sends each push (same request id) until it is acknowledged.
 * It first reads the values (0 on a fresh job; what an earlier, killed
 * counter left otherwise: printed as "counter: starting at LO to HI"); at
 * the end every parameter must equal its start + PUSHES exactly: a push applied twice, or
 * lost after its acknowledgement, shows. Progress is printed every 10
 * pushes ("counter: N pushes acknowledged"). Prints "counter: N
 * acknowledged, every value V" and exits 0 when V == B + N. With
 * LOSE_REPLY_EVERY = K, every Kth call throws the shards' replies away and
 * sends the same requests again (a hook installed through
 * worker/client_hook.h: lose_replies below), and it prints
 * "counter: L replies lost on purpose, R answered again from the record".
 * With `sync` (a cluster in sync mode) each push is a push-and-pull of
 * the next step (pc_sync_step): one worker, so every step applies exactly
 * that push, and a step applied twice or lost shows the same way.
 * PAUSE_MS: a pause after each push, so that the faults the test makes
 * land while the counter runs. With COUNTER_LANES=N in the environment
 * every step moves in parts, one block each, over N lanes per shard
 * (pc_opts.lanes): in sync a push-and-pull as above, in async a
 * push-and-pull too (pc_async_step: parts apply as they arrive) — each
 * part exactly once through the same faults (the lost-reply hook works on
 * whole messages only: use LOSE_REPLY_EVERY 0 with it).
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "worker/client.h"
#include "worker/client_hook.h"
#include "cluster.h"
#include "err.h"
#include "model.h"

static const char model_json[] =
    "{\"name\": \"counter\", \"input_shape\": [3],"
    " \"layers\": [{\"type\": \"dense\", \"units\": 2}],"
    " \"loss\": \"mse\","
    " \"optimizer\": {\"type\": \"sgd\", \"learning_rate\": 1.0}}";

/* Every `every`th call, each shard's reply is thrown away and the same
 * request sent again; `again` counts the re-sends answered byte for byte
 * as the first time (from the shard's record: a push applied again would
 * be acknowledged at a later version). */
struct lose {
    long every;
    uint64_t calls, lost, again;
};

static int lose_replies(struct pc_client *c, int n_shards, void *arg)
{
    struct lose *l = arg;
    int i, rv, sent, same;

    if (++l->calls % (uint64_t)l->every != 0)
        return HC_OK;
    for (i = 0; i < n_shards; i++) {
        if ((rv = pc_hook_resend(c, i, &sent, &same)) != HC_OK)
            return rv;
        l->lost += (uint64_t)sent;
        l->again += (uint64_t)same;
    }
    return HC_OK;
}

int main(int argc, char **argv)
{
    struct lose lose = { 0 };
    struct pc_opts po = { .timeout_ms = 1000, .retry_ms = 60000 };
    struct hc_model *m = calloc(1, sizeof *m);
    struct pc_client *pc = NULL;
    struct hc_cluster cl;
    struct hc_diag diag;
    float *g = NULL, *p = NULL, *base = NULL, lo = 0, hi = 0;
    long n, i, bad = 0;
    size_t k;
    uint64_t version = 0;
    long pause_ms = argc == 6 ? atol(argv[5]) : 0;
    int rv, sync = argc >= 5 && strcmp(argv[4], "sync") == 0;
    const char *lanes = getenv("COUNTER_LANES");

    if (lanes) {
        po.lanes = atoi(lanes);
        po.part_bytes = 1;      /* a block a part, up to lanes a shard */
    }

    if (argc < 3 || argc > 6 ||
        (argc >= 5 && !sync && strcmp(argv[4], "async") != 0) ||
        pause_ms < 0 || pause_ms > 10000 || !m) {
        fprintf(stderr, "usage: counter CLUSTER_FILE PUSHES "
                "[LOSE_REPLY_EVERY [async|sync [PAUSE_MS]]]\n");
        return 2;
    }
    n = atol(argv[2]);
    if (argc >= 4)
        lose.every = atol(argv[3]);
    if (hc_cluster_load_file(argv[1], &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    rv = hc_model_parse(model_json, sizeof model_json - 1, "counter model", m);
    if (rv == HC_OK) {
        g = malloc(m->n_params * sizeof *g);
        p = calloc(m->n_params, sizeof *p);
        base = calloc(m->n_params, sizeof *base);
        if (!g || !p || !base)
            rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
    }
    if (rv == HC_OK)
        rv = pc_open(&pc, &cl, HC_JOB_WORKER, 0, &po);
    if (rv == HC_OK && lose.every > 0)
        pc_set_reply_hook(pc, lose_replies, &lose);
    if (rv == HC_OK)
        rv = pc_join(pc, "cpu");
    if (rv == HC_OK)
        rv = pc_set_model(pc, m, 1);    /* one element per block: many blocks */
    if (rv == HC_OK)
        rv = pc_create(pc, p);
    if (rv == HC_OK)
        rv = pc_pull(pc, p, &version);
    if (rv == HC_OK) {
        /* After a killed counter the parameters may differ by its push in
         * flight: applied by some shards, not yet by others. */
        lo = hi = p[0];
        for (k = 0; k < m->n_params; k++) {
            base[k] = p[k];
            lo = p[k] < lo ? p[k] : lo;
            hi = p[k] > hi ? p[k] : hi;
        }
        printf("counter: starting at %.1f to %.1f\n", (double)lo, (double)hi);
    }
    for (k = 0; g && k < m->n_params; k++)
        g[k] = -1.0f;
    for (i = 0; rv == HC_OK && i < n; i++) {
        if (sync) {
            struct pc_grad pg = { .data = g, .samples = 1,
                                  .base_version = version };
            struct pc_step st = { .min_version = version + 1 };

            rv = pc_sync_step(pc, &pg, p, &st);
            version = st.version;
        } else if (lanes) {
            struct pc_grad pg = { .data = g, .samples = 1 };
            struct pc_step st = { .clock = (uint64_t)i };

            rv = pc_async_step(pc, &pg, p, &st);
        } else {
            rv = pc_push_step(pc, g, 1, 0, 0, (uint64_t)i, NULL);
        }
        if (rv == HC_OK && (i + 1) % 10 == 0)
            printf("counter: %ld pushes acknowledged\n", i + 1);
        fflush(stdout);
        if (pause_ms > 0)
            nanosleep(&(struct timespec){ pause_ms / 1000,
                                          pause_ms % 1000 * 1000000L }, NULL);
    }
    if (rv == HC_OK)
        rv = pc_pull(pc, p, NULL);
    if (rv != HC_OK) {
        fprintf(stderr, "counter: %s\n", hc_err_msg());
        pc_close(pc);
        return 1;
    }
    for (k = 0; k < m->n_params; k++)
        if (p[k] != base[k] + (float)n) {
            fprintf(stderr, "counter: parameter %zu is %.1f, expected %.1f\n",
                    k, (double)p[k], (double)(base[k] + (float)n));
            bad = 1;
        }
    printf("counter: %ld acknowledged, every value %.1f\n", n,
           (double)(p[0] - base[0]));
    if (lose.every > 0)
        printf("counter: %llu replies lost on purpose, %llu answered again "
               "from the record\n", (unsigned long long)lose.lost,
               (unsigned long long)lose.again);
    pc_leave(pc);
    pc_close(pc);
    hc_cluster_free(&cl);
    free(m);
    free(g);
    free(p);
    free(base);
    return bad ? 1 : 0;
}
