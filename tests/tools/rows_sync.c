/*
 * rows_sync.c — a synchronous step's rows pushes summed across workers
 * (tests/integration/sparse.sh): the same batches trained by N workers,
 * each pushing its share of every batch, must give the rows one worker
 * pushing the whole batch gives.
 *
 *   rows_sync CLUSTER_FILE WORKER N_WORKERS STEPS OUT [PAUSE_MS]
 *   rows_sync dump ROWS_FILE DIR...
 *
 * Joins as worker WORKER of N_WORKERS (worker 0 creates the model: one
 * dense layer and a table of 2^40 rows of 4 floats, variable 2, trained
 * by Adam with learning rate 0.01 — lazily, so each row's moments and
 * count matter). Each of STEPS steps draws the same batch of 64
 * Zipf-distributed ids in every worker (repeats within a batch), pulls
 * the batch's rows, and pushes the per-position gradients of positions
 * [WORKER·64/N, (WORKER+1)·64/N) with samples = their number
 * (pc_push_rows: held by each shard for the open step), then a zero dense
 * gradient of the same samples by pc_sync_step, which answers once every
 * worker's push of the step is in: the step's rows are summed by row
 * across workers and scaled by 1/64 — what one worker pushing all 64
 * positions gives. Worker 0 then pulls every touched row and writes "id
 * v0 v1 v2 v3" lines in id order to OUT; every worker prints "rows_sync:
 * worker W: N steps, version V". PAUSE_MS: a pause after each step, so
 * that a shard killed by the test lands mid-run.
 *
 * `check` joins as worker 0 of the cluster (the stores' model: a job
 * after `hetps reshard`, say) and pulls every row of ROWS_FILE (an OUT
 * above), each bit for bit as the file has it; "rows_sync: N rows read
 * as ROWS_FILE".
 *
 * `dump` opens each store DIR read-only (the shards stopped) and prints
 * each row of ROWS_FILE (an OUT above) as the store holding it has it:
 * "id count v0..v3 m0..m3 v0..v3" (its update count, values and Adam
 * slots), so the slots are compared too.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "worker/client.h"
#include "ps/store.h"
#include "cluster.h"
#include "err.h"
#include "model.h"
#include "rng.h"
#include "zipf.h"

#define DIM 4
#define BATCH 64
#define TABLE 2u
#define TABLE_ROWS (1ull << 40)
#define MAX_ROWS (1u << 16)

static const char model_json[] =
    "{\"name\": \"rows_sync\", \"input_shape\": [3],"
    " \"layers\": [{\"type\": \"dense\", \"units\": 2}],"
    " \"loss\": \"mse\", \"seed\": 11,"
    " \"optimizer\": {\"type\": \"adam\", \"learning_rate\": 0.01}}";

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static void add_table(struct hc_model *m)
{
    struct hc_var_def *d = &m->vars[m->n_vars++];

    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "embedding/embeddings");
    d->ndim = 2;
    d->shape[1] = DIM;
    d->table_rows = TABLE_ROWS;
    d->init = HC_INIT_RANDOM_UNIFORM;
    d->init_par.a = -0.05f;
    d->init_par.b = 0.05f;
}

/* The rows named by the first column of ids_file, each with its slots
 * and update count from the store (of dirs[0 .. n)) that holds it. */
static int dump(const char *ids_file, char **dirs, int n)
{
    struct ps_store_opts o = { .read_only = 1 };
    struct ps_store *st[8] = {0};
    float v[8 * DIM];
    uint64_t id, updates;
    FILE *f = fopen(ids_file, "r");
    char line[256];
    int rv = HC_OK, stored, d;

    if (!f)
        return hc_err_set(HC_ERR_IO, "cannot read %s", ids_file);
    if (n > 8)
        rv = hc_err_set(HC_ERR_INVAL, "at most 8 stores");
    for (d = 0; rv == HC_OK && d < n; d++)
        rv = ps_store_open(dirs[d], &o, &st[d]);
    while (rv == HC_OK && fgets(line, sizeof line, f)) {
        int found = 0;

        if (sscanf(line, "%" SCNu64, &id) != 1)
            continue;
        for (d = 0; rv == HC_OK && d < n && !found; d++) {
            if ((rv = ps_store_row_get(st[d], TABLE, id, v, &updates,
                                       &stored)) != HC_OK || !stored)
                continue;
            found = 1;
            printf("%" PRIu64 " %" PRIu64, id, updates);
            for (int e = 0; e < 3 * DIM; e++)   /* values, Adam's m and v */
                printf(" %.9g", (double)v[e]);
            printf("\n");
        }
        if (rv == HC_OK && !found)
            rv = hc_err_set(HC_ERR_NOTFOUND, "row %" PRIu64 " is stored in "
                            "none of the %d stores", id, n);
    }
    for (d = 0; d < n; d++)
        if (st[d])
            ps_store_close(st[d]);
    fclose(f);
    return rv;
}

/* Every row of rows_file ("id v0 v1 v2 v3", %.9g: float32 exactly)
 * pulled live and compared bit for bit; the rows into *n. */
static int check(struct pc_client *pc, const char *rows_file, size_t *n)
{
    FILE *f = fopen(rows_file, "r");
    uint64_t ids[BATCH];
    float want[BATCH][DIM], got[BATCH][DIM];
    size_t k = 0;
    int rv = HC_OK, eof = 0;

    *n = 0;
    if (!f)
        return hc_err_set(HC_ERR_IO, "cannot read %s", rows_file);
    while (rv == HC_OK && !eof) {
        struct pc_rows t = {TABLE, ids, 0, &got[0][0], NULL};

        for (k = 0; k < BATCH; k++)
            if (fscanf(f, "%" SCNu64 " %g %g %g %g", &ids[k], &want[k][0],
                       &want[k][1], &want[k][2], &want[k][3]) != 5) {
                eof = 1;
                break;
            }
        if (k == 0)
            break;
        t.n = k;
        if ((rv = pc_pull_rows(pc, &t, 1, NULL)) != HC_OK)
            break;
        for (size_t i = 0; i < k && rv == HC_OK; i++)
            if (memcmp(got[i], want[i], sizeof got[i]))
                rv = hc_err_set(HC_ERR_MISMATCH, "row %" PRIu64 " reads %.9g "
                                "%.9g %.9g %.9g, %s has %.9g %.9g %.9g %.9g",
                                ids[i], (double)got[i][0], (double)got[i][1],
                                (double)got[i][2], (double)got[i][3],
                                rows_file, (double)want[i][0],
                                (double)want[i][1], (double)want[i][2],
                                (double)want[i][3]);
        *n += k;
    }
    fclose(f);
    return rv;
}

int main(int argc, char **argv)
{
    struct pc_opts po = { .timeout_ms = 1000, .retry_ms = 60000 };
    struct hc_model *m = NULL;
    struct pc_client *pc = NULL;
    struct hc_cluster cl;
    struct hc_diag diag;
    double *cdf = NULL;
    uint64_t ids[BATCH], st = 20261207, version = 0, *all = NULL;
    float *p = NULL, *zero = NULL, got[BATCH][DIM], g[BATCH][DIM];
    long w, n_w, steps, pause_ms, s;
    size_t k, n_all = 0, lo, hi;
    FILE *out = NULL;
    int rv = HC_OK, status = 1;
    int checking = argc == 4 && strcmp(argv[1], "check") == 0;

    if (argc >= 4 && strcmp(argv[1], "dump") == 0) {
        if ((rv = dump(argv[2], argv + 3, argc - 3)) != HC_OK) {
            fprintf(stderr, "rows_sync dump: %s\n", hc_err_msg());
            return 1;
        }
        return 0;
    }
    w = argc >= 6 ? atol(argv[2]) : checking ? 0 : -1;
    n_w = argc >= 6 ? atol(argv[3]) : checking;
    steps = argc >= 6 ? atol(argv[4]) : 0;
    pause_ms = argc == 7 ? atol(argv[6]) : 0;
    if (!checking && (argc < 6 || argc > 7 || n_w < 1 || n_w > 8 || w < 0 ||
                      w >= n_w || steps < 1 || steps > 1000)) {
        fprintf(stderr, "usage: rows_sync CLUSTER_FILE WORKER N_WORKERS(1..8) "
                "STEPS(1..1000) OUT [PAUSE_MS]\n"
                "       rows_sync dump ROWS_FILE DIR...\n"
                "       rows_sync check CLUSTER_FILE ROWS_FILE\n");
        return 2;
    }
    if (hc_cluster_load_file(argv[checking ? 2 : 1], &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    m = calloc(1, sizeof *m);
    cdf = zipf_cdf();
    all = malloc(MAX_ROWS * sizeof *all);
    if (!m || !cdf || !all)
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
    if (rv == HC_OK &&
        (rv = hc_model_parse(model_json, sizeof model_json - 1,
                             "rows_sync model", m)) == HC_OK) {
        add_table(m);
        p = calloc(m->n_params, sizeof *p);
        zero = calloc(m->n_params, sizeof *zero);
        if (!p || !zero)
            rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
    }
    if (rv == HC_OK)
        rv = pc_open(&pc, &cl, HC_JOB_WORKER, (int)w, &po);
    if (rv == HC_OK)
        rv = pc_join(pc, "cpu");
    if (rv == HC_OK)
        rv = pc_set_model(pc, m, 0);
    if (rv == HC_OK && w == 0) {
        hc_model_init_params(m, p);
        rv = pc_create(pc, p);
    }
    /* The others wait for the chief's variables. */
    for (int t = 0; rv == HC_OK && t < 200; t++) {
        if ((rv = pc_pull(pc, p, &version)) == HC_OK)
            break;
        rv = HC_OK;
        nanosleep(&(struct timespec){0, 100000000L}, NULL);
    }
    if (rv == HC_OK && checking) {
        if ((rv = check(pc, argv[3], &n_all)) == HC_OK)
            printf("rows_sync: %zu rows read as %s\n", n_all, argv[3]);
        steps = 0;
    }
    lo = (size_t)w * BATCH / (size_t)n_w;
    hi = (size_t)(w + 1) * BATCH / (size_t)n_w;
    for (s = 0; rv == HC_OK && s < steps; s++) {
        struct pc_rows pull = {TABLE, ids, BATCH, &got[0][0], NULL};
        struct pc_rows push = {TABLE, ids + lo, hi - lo, NULL, g[lo]};
        struct pc_grad pg = {.data = zero, .samples = (uint32_t)(hi - lo),
                             .base_version = version};
        struct pc_step ps = {.min_version = version + 1};

        for (k = 0; k < BATCH; k++) {
            ids[k] = zipf_id(cdf, &st);
            for (int j = 0; j < DIM; j++)
                g[k][j] = ((float)((ids[k] + (uint64_t)j + (uint64_t)s) % 7) -
                           3.0f) * 0.25f;
        }
        if ((rv = pc_pull_rows(pc, &pull, 1, NULL)) != HC_OK ||
            (rv = pc_push_rows(pc, &push, 1, (uint32_t)(hi - lo), NULL)) !=
                HC_OK ||
            (rv = pc_sync_step(pc, &pg, p, &ps)) != HC_OK)
            break;
        version = ps.version;
        for (k = 0; k < BATCH && n_all < MAX_ROWS; k++)
            all[n_all++] = ids[k];
        if ((s + 1) % 10 == 0)
            printf("rows_sync: worker %ld: %ld steps\n", w, s + 1);
        fflush(stdout);
        if (pause_ms > 0)
            nanosleep(&(struct timespec){pause_ms / 1000,
                                         pause_ms % 1000 * 1000000L}, NULL);
    }
    if (rv == HC_OK && w == 0 && !checking) {
        size_t u = 0;

        qsort(all, n_all, sizeof *all, cmp_u64);
        for (k = 0; k < n_all; k++)
            if (u == 0 || all[u - 1] != all[k])
                all[u++] = all[k];
        n_all = u;
        if (!(out = fopen(argv[5], "w")))
            rv = hc_err_set(HC_ERR_IO, "cannot write %s", argv[5]);
    }
    for (k = 0; rv == HC_OK && out && k < n_all; k += BATCH) {
        size_t n = n_all - k < BATCH ? n_all - k : BATCH;
        struct pc_rows t = {TABLE, all + k, n, &got[0][0], NULL};

        if ((rv = pc_pull_rows(pc, &t, 1, NULL)) != HC_OK)
            break;
        for (size_t i = 0; i < n; i++)
            fprintf(out, "%" PRIu64 " %.9g %.9g %.9g %.9g\n", all[k + i],
                    (double)got[i][0], (double)got[i][1], (double)got[i][2],
                    (double)got[i][3]);
    }
    if (out && fclose(out) != 0 && rv == HC_OK)
        rv = hc_err_set(HC_ERR_IO, "cannot write %s", argv[5]);
    if (rv != HC_OK) {
        fprintf(stderr, "rows_sync: worker %ld: %s\n", w, hc_err_msg());
    } else {
        if (!checking)
            printf("rows_sync: worker %ld: %ld steps, version %" PRIu64 "\n",
                   w, steps, version);
        pc_leave(pc);
        status = 0;
    }
    pc_close(pc);
    hc_cluster_free(&cl);
    free(all);
    free(cdf);
    free(m);
    free(p);
    free(zero);
    return status;
}
