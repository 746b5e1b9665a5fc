/*
 * rows_scale.c — the client half of the row-sparse scale check
 * (tests/bench/rows_scale.sh): live shards, a model of two tables of 16
 * floats trained by Adagrad — table L (variable 2) of 2^40 rows and table S
 * (variable 3) of 10^5 rows.
 *
 *   rows_scale CLUSTER_FILE FILL [BATCH] [ROUNDS] [STORE_FILE ...]
 *
 * Joins as worker 0, creates the model, feeds FILL distinct ids into L by
 * pc_push_rows of 100,000 ids each (printing "rows_scale: fed N" every
 * 5 M), and all 10^5 rows of S. The ids are fed in ascending order (id k
 * is k · stride plus a hash of k below stride, stride = 2^40 / FILL), so
 * each shard's share ascends too and its B-tree grows at its right edge;
 * the order shapes the fill's cost, not what is stored. Each STORE_FILE
 * (the shards' data.mdb) is then fsync'd, so the rounds do not race the
 * kernel's writeback of the fill; that time counts in the fill's.
 *
 * Then ROUNDS rounds (default 20), the tables taking turns, each a
 * pc_pull_rows and a pc_push_rows of BATCH (default 10,000) random stored
 * rows — for L ids k drawn among the FILL fed, for S any of its 10^5 —
 * timed by the wall clock. The last line, "rows_scale: fill … ratio R",
 * gives the fill's seconds, both rates and their ratio.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/client.h"
#include "clock.h"
#include "cluster.h"
#include "err.h"
#include "model.h"
#include "rng.h"

#define DIM 16
#define FEED 100000
#define SMALL 100000

static const char model_json[] =
    "{\"name\": \"rows_scale\", \"input_shape\": [3],"
    " \"layers\": [{\"type\": \"dense\", \"units\": 2}],"
    " \"loss\": \"mse\", \"seed\": 5,"
    " \"optimizer\": {\"type\": \"adagrad\", \"learning_rate\": 0.01}}";

static void add_table(struct hc_model *m, const char *name, uint64_t rows)
{
    struct hc_var_def *d = &m->vars[m->n_vars++];

    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->ndim = 2;
    d->shape[0] = 0;            /* the rows: table_rows (2^40: no int) */
    d->shape[1] = DIM;
    d->size = 0;
    d->table_rows = rows;
    d->init = HC_INIT_RANDOM_UNIFORM;
    d->init_par.a = -0.05f;
    d->init_par.b = 0.05f;
}

/* Fed id k of FILL: ascending in k, distinct, below 2^40. */
static uint64_t fed_id(uint64_t k, uint64_t stride)
{
    return k * stride + hc_mix64(k ^ 0x5ca1eull) % stride;
}

/* fsync each store file: the fill's pages on disk. */
static int settle(char **files, int n)
{
    for (int i = 0; i < n; i++) {
        int fd = open(files[i], O_RDONLY), ok = fd >= 0 && fsync(fd) == 0;
        int e = errno;

        if (fd >= 0)
            close(fd);
        if (!ok)
            return hc_err_set(HC_ERR_IO, "cannot fsync %s: %s", files[i],
                              strerror(e));
    }
    return HC_OK;
}

/* One pull and one push of ids[0 .. n) of table var; the seconds each
 * took added to tp[0] and tp[1]. */
static int pull_push(struct pc_client *pc, uint32_t var, const uint64_t *ids,
                     size_t n, float *rows, double *tp)
{
    struct pc_rows t = {var, ids, n, rows, NULL};
    double t0 = hc_now_s();
    int rv = pc_pull_rows(pc, &t, 1, NULL);

    tp[0] += hc_now_s() - t0;
    for (size_t i = 0; rv == HC_OK && i < n * DIM; i++)
        rows[i] *= 0.1f;
    t.rows = NULL;
    t.grad = rows;
    t0 = hc_now_s();
    if (rv == HC_OK)
        rv = pc_push_rows(pc, &t, 1, 1, NULL);
    tp[1] += hc_now_s() - t0;
    return rv;
}

int main(int argc, char **argv)
{
    struct pc_opts po = {.timeout_ms = 60000, .retry_ms = 120000};
    struct hc_model *m = calloc(1, sizeof *m);
    uint64_t fill = argc > 2 ? strtoull(argv[2], NULL, 10) : 0, st = 77;
    size_t batch = argc > 3 ? strtoul(argv[3], NULL, 10) : 10000;
    int rounds = argc > 4 ? atoi(argv[4]) : 20, status = 1;
    uint64_t stride = fill ? (1ull << 40) / fill : 1;
    size_t cap = batch > FEED ? batch : FEED;
    uint64_t *ids = malloc(cap * sizeof *ids), fed = 0, next = 5000000;
    float *rows = malloc(cap * DIM * sizeof *rows), *p = NULL;
    struct pc_client *pc = NULL;
    struct hc_cluster cl;
    struct hc_diag diag;
    double t0, t_fill = 0, t_l[2] = {0, 0}, t_s[2] = {0, 0}, l, sm;
    int rv = HC_OK;

    if (argc < 3 || fill < 1 || fill > (1ull << 39) || batch < 1 ||
        rounds < 1 || !m || !ids || !rows) {
        fprintf(stderr, "usage: rows_scale CLUSTER_FILE FILL [BATCH] "
                "[ROUNDS] [STORE_FILE ...] (FILL 1 to 2^39)\n");
        return 2;
    }
    if (hc_cluster_load_file(argv[1], &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    if ((rv = hc_model_parse(model_json, sizeof model_json - 1,
                             "rows_scale model", m)) == HC_OK) {
        add_table(m, "embedding/embeddings", 1ull << 40);
        add_table(m, "embedding_1/embeddings", SMALL);
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
    /* Feed: distinct ascending ids, FEED a push. */
    t0 = hc_now_s();
    while (rv == HC_OK && fed < fill) {
        size_t n = fill - fed < FEED ? (size_t)(fill - fed) : FEED;
        struct pc_rows t = {2, ids, n, NULL, rows};

        for (size_t i = 0; i < n; i++)
            ids[i] = fed_id(fed + i, stride);
        memset(rows, 0, n * DIM * sizeof *rows);
        for (size_t i = 0; i < n * DIM; i += DIM)
            rows[i] = 0.01f;
        rv = pc_push_rows(pc, &t, 1, 1, NULL);
        fed += n;
        if (fed >= next) {
            printf("rows_scale: fed %" PRIu64 " ids in %.0f s\n", fed,
                   hc_now_s() - t0);
            fflush(stdout);
            next += 5000000;
        }
    }
    for (uint64_t lo = 0; rv == HC_OK && lo < SMALL; lo += FEED) {
        size_t n = SMALL - lo < FEED ? (size_t)(SMALL - lo) : FEED;
        struct pc_rows t = {3, ids, n, NULL, rows};

        for (size_t i = 0; i < n; i++)
            ids[i] = lo + i;
        memset(rows, 0, n * DIM * sizeof *rows);
        rv = pc_push_rows(pc, &t, 1, 1, NULL);
    }
    if (rv == HC_OK && argc > 5) {
        double t1 = hc_now_s();

        if ((rv = settle(argv + 5, argc - 5)) == HC_OK)
            printf("rows_scale: the stores' fsync took %.0f s\n",
                   hc_now_s() - t1);
    }
    t_fill = hc_now_s() - t0;
    if (rv == HC_OK)
        printf("rows_scale: fed %" PRIu64 " ids of the 2^40 table and the "
               "10^5 table in %.0f s\n", fed, t_fill);
    fflush(stdout);
    for (int r = 0; rv == HC_OK && r < rounds; r++) {
        for (size_t i = 0; i < batch; i++)
            ids[i] = fed_id(hc_splitmix64(&st) % fill, stride);
        rv = pull_push(pc, 2, ids, batch, rows, t_l);
        for (size_t i = 0; rv == HC_OK && i < batch; i++)
            ids[i] = hc_splitmix64(&st) % SMALL;
        if (rv == HC_OK)
            rv = pull_push(pc, 3, ids, batch, rows, t_s);
    }
    l = t_l[0] + t_l[1];
    sm = t_s[0] + t_s[1];
    if (rv != HC_OK) {
        fprintf(stderr, "rows_scale: %s\n", hc_err_msg());
    } else {
        printf("rows_scale: pull / push ms a round: 2^40 table %.1f / "
               "%.1f, 10^5 table %.1f / %.1f\n", 1e3 * t_l[0] / rounds,
               1e3 * t_l[1] / rounds, 1e3 * t_s[0] / rounds,
               1e3 * t_s[1] / rounds);
        printf("rows_scale: fill %" PRIu64 " ids %.0f s; pull + push of %zu "
               "random stored rows, %d rounds: 2^40 table %.0f rows/s, 10^5 "
               "table %.0f rows/s, ratio %.2f\n", fed, t_fill, batch, rounds,
               batch * rounds / l, batch * rounds / sm, sm / l);
        pc_leave(pc);
        status = 0;
    }
    pc_close(pc);
    hc_cluster_free(&cl);
    free(ids);
    free(rows);
    free(p);
    free(m);
    return status;
}
