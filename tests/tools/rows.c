/*
 * rows.c — the row-sparse tables check of the integration tests
 * (tests/integration/sparse.sh).
 *
 *   rows CLUSTER_FILE STEPS OUT [PAUSE_MS | refused]
 *
 * Joins as worker 0 and creates a model of one dense layer and two
 * row-sparse tables of 2^40 rows of 4 floats, trained by SGD with
 * learning rate 0.5: table A (variable 2) starts at zeros, table B
 * (variable 3) at RandomUniform(−0.05, 0.05). Each of STEPS steps draws a
 * batch of 64 Zipf-distributed ids (over 10^5 ranks, spread over the
 * 2^40 ids by a hash; repeats within a batch), pulls their rows of A
 * and checks them against a mirror kept here, then pushes per-position
 * gradients (small integers, so every sum is exact in any order) that the
 * client sums by id; the mirror applies the same SGD. Every 10 steps the
 * batch's rows of A and B are pulled in one call: A's must equal the
 * mirror's, B's hc_init_row's values (rows never written). The test around it kills and restarts shards
 * meanwhile; the client re-sends each request with its id until answered.
 *
 * At the end every touched row of A is pulled and compared with the
 * mirror, written to OUT as "id v0 v1 v2 v3" lines in id order (two runs'
 * files are equal when every push was applied exactly once), and the
 * version each shard must be at — one step per push that reached it — is
 * printed as "rows: ps:J expects version V"; the final pulls' bytes on
 * the wire (pc_rows_wire) must be their ids' and rows' plus at most 512
 * bytes a message. Prints "rows: N steps, U
 * rows, every row as the mirror" and exits 0 when all held.
 *
 * With `refused` (a cluster in sync mode) the first push must be refused
 * as not built for sync: prints "rows: push refused in sync mode: …" and
 * exits 0 then, 1 when it was applied.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "worker/client.h"
#include "cluster.h"
#include "err.h"
#include "model.h"
#include "rng.h"
#include "zipf.h"
#include "rowmap.h"

#define DIM 4
#define BATCH 64
#define CAP (1u << 17)          /* mirror slots: steps × 64 ≤ 65536 */
#define TABLE_ROWS (1ull << 40)

static const char model_json[] =
    "{\"name\": \"rows\", \"input_shape\": [3],"
    " \"layers\": [{\"type\": \"dense\", \"units\": 2}],"
    " \"loss\": \"mse\", \"seed\": 11,"
    " \"optimizer\": {\"type\": \"sgd\", \"learning_rate\": 0.5}}";

/* The mirror of table A: open addressing by id. */
struct mirror {
    uint64_t id[CAP];
    unsigned char used[CAP];
    float row[CAP][DIM];
    size_t n;
};

static float *mirror_row(struct mirror *m, uint64_t id)
{
    size_t h = (size_t)(hc_mix64(id) & (CAP - 1));

    while (m->used[h] && m->id[h] != id)
        h = (h + 1) & (CAP - 1);
    if (!m->used[h]) {
        m->used[h] = 1;
        m->id[h] = id;
        memset(m->row[h], 0, sizeof m->row[h]);
        m->n++;
    }
    return m->row[h];
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The model: the dense layer's two variables, then the two tables. */
static void add_tables(struct hc_model *m)
{
    static const char *const names[] = {"embedding/embeddings",
                                        "embedding_1/embeddings"};

    for (int k = 0; k < 2; k++) {
        struct hc_var_def *d = &m->vars[m->n_vars++];

        memset(d, 0, sizeof *d);
        snprintf(d->name, sizeof d->name, "%s", names[k]);
        d->ndim = 2;
        d->shape[0] = 0;            /* 2^40 rows: too many for an int */
        d->shape[1] = DIM;
        d->size = 0;
        d->table_rows = TABLE_ROWS;
        d->init = k == 0 ? HC_INIT_ZEROS : HC_INIT_RANDOM_UNIFORM;
        d->init_par.a = k == 0 ? 0 : -0.05f;
        d->init_par.b = k == 0 ? 0 : 0.05f;
    }
}

/* Both tables' rows of the batch in one call: A's as the mirror holds
 * them, B's (never written) as hc_init_row computes them. */
static int check_both(struct pc_client *pc, const struct hc_model *m,
                      struct mirror *mir, const uint64_t *ids, size_t n)
{
    float a[BATCH][DIM], b[BATCH][DIM], want[DIM];
    const struct hc_var_def *d = &m->vars[3];
    struct hc_initializer in = {d->init, d->init_par};
    struct pc_rows t[2] = {{2, ids, n, &a[0][0], NULL},
                           {3, ids, n, &b[0][0], NULL}};
    int rv = pc_pull_rows(pc, t, 2, NULL);

    for (size_t i = 0; rv == HC_OK && i < n; i++) {
        hc_init_row(&in, TABLE_ROWS, DIM, m->seed, 3, ids[i], want);
        if (memcmp(b[i], want, sizeof want))
            rv = hc_err_set(HC_ERR_MISMATCH, "table B row %" PRIu64 " is "
                            "%g…, its initial value %g…", ids[i],
                            (double)b[i][0], (double)want[0]);
        else if (memcmp(a[i], mirror_row(mir, ids[i]), sizeof a[i]))
            rv = hc_err_set(HC_ERR_MISMATCH, "table A row %" PRIu64 " pulled "
                            "with B differs from the mirror", ids[i]);
    }
    return rv;
}

/* The final pulls' bytes on the wire (pc_rows_wire, since sent0 and
 * recv0): at least each unique id's 8 bytes out and its row's 4 floats
 * back, and no more than that and a header of 512 bytes for each
 * message (calls pulls, each a request and a reply to every shard). */
static int check_wire(struct pc_client *pc, uint64_t sent0, uint64_t recv0,
                      size_t n, long calls, int n_ps)
{
    uint64_t sent, recv, slack = 512 * (uint64_t)calls * (uint64_t)n_ps;

    pc_rows_wire(pc, 0, &sent, &recv);
    sent -= sent0;
    recv -= recv0;
    if (sent < 8 * n || sent > 8 * n + slack || recv < 16 * n ||
        recv > 16 * n + slack)
        return hc_err_set(HC_ERR_MISMATCH, "the final pulls of %zu rows in "
                          "%ld calls counted %" PRIu64 " bytes sent and %"
                          PRIu64 " received; expected %zu and %zu, each "
                          "plus at most %" PRIu64 " of headers", n, calls,
                          sent, recv, 8 * n, 16 * n, slack);
    printf("rows: the final pulls' messages: %" PRIu64 " bytes sent, %"
           PRIu64 " received, for %zu rows of 4 floats\n", sent, recv, n);
    return HC_OK;
}

int main(int argc, char **argv)
{
    struct pc_opts po = { .timeout_ms = 1000, .retry_ms = 60000 };
    struct hc_model *m = calloc(1, sizeof *m);
    struct mirror *mir = calloc(1, sizeof *mir);
    double *cdf = zipf_cdf();
    struct pc_client *pc = NULL;
    struct hc_cluster cl;
    struct hc_diag diag;
    uint64_t ids[BATCH], st = 20261207, expect[64] = {0}, *all = NULL;
    uint64_t sent0 = 0, recv0 = 0;
    float *p = NULL, got[BATCH][DIM], g[BATCH][DIM];
    int refused = argc == 5 && strcmp(argv[4], "refused") == 0, status = 1;
    long pause_ms = argc == 5 && !refused ? atol(argv[4]) : 0;
    long steps = argc >= 4 ? atol(argv[2]) : 0, s, calls = 0;
    size_t k, n_all = 0;
    FILE *out = NULL;
    int rv;

    if (argc < 4 || argc > 5 || steps < 1 || steps > 1000 || !m || !mir ||
        !cdf) {
        fprintf(stderr, "usage: rows CLUSTER_FILE STEPS(1..1000) OUT "
                "[PAUSE_MS | refused]\n");
        free(m);
        free(mir);
        free(cdf);
        return 2;
    }
    if (hc_cluster_load_file(argv[1], &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        free(m);
        free(mir);
        free(cdf);
        return 2;
    }
    rv = hc_model_parse(model_json, sizeof model_json - 1, "rows model", m);
    if (rv == HC_OK) {
        add_tables(m);
        if (!(p = calloc(m->n_params, sizeof *p)))
            rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
    }
    if (rv == HC_OK)
        rv = pc_open(&pc, &cl, HC_JOB_WORKER, 0, &po);
    if (rv == HC_OK)
        rv = pc_join(pc, "cpu");
    if (rv == HC_OK)
        rv = pc_set_model(pc, m, 0);
    if (rv == HC_OK) {
        hc_model_init_params(m, p);
        rv = pc_create(pc, p);
    }
    for (s = 0; rv == HC_OK && s < steps; s++) {
        int hit[64] = {0};

        for (k = 0; k < BATCH; k++)
            ids[k] = zipf_id(cdf, &st);
        {
            struct pc_rows t = {2, ids, BATCH, &got[0][0], NULL};

            if ((rv = pc_pull_rows(pc, &t, 1, NULL)))
                break;
        }
        for (k = 0; k < BATCH; k++)
            if (memcmp(got[k], mirror_row(mir, ids[k]), sizeof got[k])) {
                rv = hc_err_set(HC_ERR_MISMATCH, "step %ld: row %" PRIu64
                                " pulled as %g, the mirror holds %g", s,
                                ids[k], (double)got[k][0],
                                (double)mirror_row(mir, ids[k])[0]);
                break;
            }
        for (k = 0; rv == HC_OK && k < BATCH; k++)
            for (int j = 0; j < DIM; j++)
                g[k][j] = (float)((ids[k] + (uint64_t)j + (uint64_t)s) % 5) -
                          2.0f;
        if (rv == HC_OK) {
            struct pc_rows t = {2, ids, BATCH, NULL, &g[0][0]};

            rv = pc_push_rows(pc, &t, 1, 1, NULL);
        }
        if (refused) {
            if (rv == HC_ERR_UNSUPPORTED || strstr(hc_err_msg(), "sync")) {
                printf("rows: push refused in sync mode: %s\n", hc_err_msg());
                status = 0;
            } else {
                fprintf(stderr, "rows: the push in sync mode was %s\n",
                        rv == HC_OK ? "applied" : hc_err_msg());
            }
            goto done;
        }
        for (k = 0; rv == HC_OK && k < BATCH; k++) {
            float *r = mirror_row(mir, ids[k]);

            for (int j = 0; j < DIM; j++)
                r[j] = r[j] + -(g[k][j] * 0.5f);
            hit[hc_row_shard(2, ids[k], (uint32_t)cl.n_ps)] = 1;
        }
        for (int j = 0; j < cl.n_ps && j < 64; j++)
            expect[j] += (uint64_t)hit[j];
        if (rv == HC_OK && s % 10 == 0)
            rv = check_both(pc, m, mir, ids, BATCH);
        if (rv == HC_OK && (s + 1) % 10 == 0)
            printf("rows: %ld steps acknowledged\n", s + 1);
        fflush(stdout);
        if (pause_ms > 0)
            nanosleep(&(struct timespec){ pause_ms / 1000,
                                          pause_ms % 1000 * 1000000L }, NULL);
    }
    /* Every touched row, pulled again in id order, against the mirror. */
    if (rv == HC_OK && !(all = malloc(mir->n * sizeof *all)))
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
    for (k = 0; rv == HC_OK && k < CAP; k++)
        if (mir->used[k])
            all[n_all++] = mir->id[k];
    if (rv == HC_OK) {
        qsort(all, n_all, sizeof *all, cmp_u64);
        if (!(out = fopen(argv[3], "w")))
            rv = hc_err_set(HC_ERR_IO, "cannot write %s", argv[3]);
    }
    pc_rows_wire(pc, 0, &sent0, &recv0);
    for (k = 0; rv == HC_OK && k < n_all; k += BATCH) {
        size_t n = n_all - k < BATCH ? n_all - k : BATCH;

        struct pc_rows t = {2, all + k, n, &got[0][0], NULL};

        calls++;

        if ((rv = pc_pull_rows(pc, &t, 1, NULL)))
            break;
        for (size_t i = 0; i < n; i++) {
            if (memcmp(got[i], mirror_row(mir, all[k + i]), sizeof got[i]))
                rv = hc_err_set(HC_ERR_MISMATCH, "row %" PRIu64 " is %g at "
                                "the end, the mirror's %g", all[k + i],
                                (double)got[i][0],
                                (double)mirror_row(mir, all[k + i])[0]);
            fprintf(out, "%" PRIu64 " %.9g %.9g %.9g %.9g\n", all[k + i],
                    (double)got[i][0], (double)got[i][1], (double)got[i][2],
                    (double)got[i][3]);
        }
    }
    if (out)
        fclose(out);
    if (rv == HC_OK)
        rv = check_wire(pc, sent0, recv0, n_all, calls, cl.n_ps);
    if (rv != HC_OK) {
        fprintf(stderr, "rows: %s\n", hc_err_msg());
        goto done;
    }
    for (int j = 0; j < cl.n_ps && j < 64; j++)
        printf("rows: ps:%d expects version %" PRIu64 "\n", j, expect[j]);
    printf("rows: %ld steps, %zu rows, every row as the mirror\n", steps,
           n_all);
    pc_leave(pc);
    status = 0;
done:
    pc_close(pc);
    hc_cluster_free(&cl);
    free(all);
    free(cdf);
    free(mir);
    free(m);
    free(p);
    return status;
}
