/*
 * apply.c — a shard's optimizer step through its store, on one thread and
 * split over the machine's cores (ps_store_opts.apply_threads), in one run.
 *
 * Two stores in temporary directories, each holding one shard of a model
 * of ELEMS parameters (blocks of the layout's default size, Adam,
 * durability process); each step is ps_store_apply of a gradient for every
 * block — what a push costs a shard once it is decoded: read the values and
 * slots, run Adam, write and checksum the new records, commit. The two
 * stores take turns, ROUNDS rounds of STEPS steps each; the best round of
 * each is kept. Prints ms per step for each and the ratio; then what one
 * step wrote, from LMDB's own free list (the pages the last transaction
 * replaced: in a steady state, as many as it wrote), per byte of
 * parameters — the store's write amplification.
 *
 * Usage: apply [ELEMS] [STEPS] [ROUNDS] [BLOCK]
 *        (defaults 4194304 10 5, and the layout's default block size)
 *
 * apply --optimizers [ELEMS] (default 20000000): the optimizers' own cost,
 * without the store: one ps_optim_apply of every optimizer (and a few
 * settings) over ELEMS floats in memory, one run each, as GB/s of the
 * bytes it reads and writes (parameters, gradient and slots in;
 * parameters and slots out), against memcpy of the same number of bytes.
 */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "layout.h"
#include "log.h"
#include "model.h"
#include "ps/optimizer.h"
#include "ps/store.h"

struct run {
    const char *name;
    int threads;
    char dir[64];
    struct ps_store *s;
    double best;                /* s per step */
};

static int open_one(struct run *r, const struct hc_layout *l,
                    const float *const *init)
{
    struct ps_store_opts o = {.apply_threads = r->threads};
    struct hc_optim_conf adam;
    struct ps_store_def d = {.signature = 1, .layout = l, .optim = &adam,
                             .init = init};

    hc_optim_defaults(HC_OPT_ADAM, &adam);

    snprintf(r->dir, sizeof r->dir, "/tmp/hetps-bench-apply-XXXXXX");
    if (!mkdtemp(r->dir)) {
        perror("apply bench: mkdtemp");
        return -1;
    }
    if (ps_store_open(r->dir, &o, &r->s) != HC_OK ||
        ps_store_init(r->s, &d, NULL) != HC_OK) {
        fprintf(stderr, "apply bench: %s\n", hc_err_msg());
        return -1;
    }
    return 0;
}

/* Pages the newest transaction of the store in dir freed, from LMDB's
 * free list (its key is the freeing transaction's id, its data the pages,
 * a count first); 0 when it cannot tell. The store must be closed. */
static size_t pages_freed_last(const char *dir)
{
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    MDB_val k, v;
    size_t n = 0;

    if (mdb_env_create(&env) == 0 && mdb_env_set_maxdbs(env, 8) == 0 &&
        mdb_env_open(env, dir, MDB_RDONLY, 0644) == 0 &&
        mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == 0 &&
        mdb_cursor_open(txn, 0, &cur) == 0 &&
        mdb_cursor_get(cur, &k, &v, MDB_LAST) == 0 &&
        v.mv_size >= sizeof(size_t))
        memcpy(&n, v.mv_data, sizeof n);
    if (cur)
        mdb_cursor_close(cur);
    if (txn)
        mdb_txn_abort(txn);
    if (env)
        mdb_env_close(env);
    return n;
}

/* One optimizer of the --optimizers table: its settings as the model file
 * writes them. */
static const char *const optimizers[] = {
    "\"sgd\"",
    "{\"type\": \"sgd\", \"momentum\": 0.9}",
    "{\"type\": \"sgd\", \"momentum\": 0.9, \"nesterov\": true}",
    "\"rmsprop\"",
    "{\"type\": \"rmsprop\", \"momentum\": 0.9, \"centered\": true}",
    "\"adagrad\"",
    "\"adam\"",
    "{\"type\": \"adam\", \"amsgrad\": true}",
    "\"adamw\"",
    "\"nadam\"",
    "\"adamax\"",
    "\"ftrl\"",
    "{\"type\": \"ftrl\", \"learning_rate_power\": -0.7}",
    "{\"type\": \"adam\", \"clipvalue\": 0.5}",
    "{\"type\": \"sgd\", \"learning_rate\": {\"class_name\": "
    "\"CosineDecay\", \"config\": {\"initial_learning_rate\": 0.1, "
    "\"decay_steps\": 1000}}}",
};

/* The --optimizers table: memcpy first, then each optimizer once. */
static int optimizers_table(size_t n)
{
    float *a[2 + PS_OPTIM_MAX_SLOTS] = {NULL};     /* p, g, slots: (n) each */
    double t0, copy_s, gbs_copy;
    int rv = 1;

    for (int k = 0; k < 2 + PS_OPTIM_MAX_SLOTS; k++) {
        if (!(a[k] = malloc(n * sizeof(float)))) {
            fprintf(stderr, "apply bench: out of memory for %zu floats\n", n);
            goto out;
        }
        for (size_t e = 0; e < n; e++)      /* touched: no first-touch cost */
            a[k][e] = (float)((e * 7 + (size_t)k) % 13) / 8.0f - 0.75f;
    }
    t0 = hc_now_s();
    memcpy(a[2], a[0], n * sizeof(float));
    copy_s = hc_now_s() - t0;
    gbs_copy = 2.0 * (double)n * 4 / copy_s / 1e9;
    printf("apply --optimizers: %zu floats, one run each; memcpy of %zu MB: "
           "%.1f ms, %.2f GB/s (read + written)\n", n, n * 4 / 1000000,
           copy_s * 1e3, gbs_copy);
    printf("%-62s %5s %9s %7s %9s\n", "optimizer", "slots", "ms", "GB/s",
           "x memcpy");
    for (size_t i = 0; i < sizeof optimizers / sizeof optimizers[0]; i++) {
        struct hc_optim_conf c;
        struct ps_optim_step at = {10, 0.5f, 1};
        const float *in[PS_OPTIM_MAX_SLOTS];
        float *out[PS_OPTIM_MAX_SLOTS];
        double s, bytes, gbs;
        int ns;

        if (hc_model_optim_from_json(optimizers[i], strlen(optimizers[i]),
                                     "bench", &c) != HC_OK) {
            fprintf(stderr, "apply bench: %s\n", hc_err_msg());
            goto out;
        }
        ns = ps_optim_slots(&c);
        for (int k = 0; k < ns; k++)
            in[k] = out[k] = a[2 + k];
        t0 = hc_now_s();
        ps_optim_apply(&c, &at, n, a[0], a[1], in, a[0], out);
        s = hc_now_s() - t0;
        bytes = (double)n * 4 * ((2 + ns) + (1 + ns));
        gbs = bytes / s / 1e9;
        printf("%-62.62s %5d %9.1f %7.2f %9.2f\n", optimizers[i], ns, s * 1e3,
               gbs, gbs / gbs_copy);
    }
    rv = 0;
out:
    for (int k = 0; k < 2 + PS_OPTIM_MAX_SLOTS; k++)
        free(a[k]);
    return rv;
}

int main(int argc, char **argv)
{
    size_t elems = argc > 1 ? strtoull(argv[1], NULL, 10) : 4194304;
    int steps = argc > 2 ? atoi(argv[2]) : 10;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    long block = argc > 4 ? atol(argv[4]) : HC_LAYOUT_DEFAULT_BLOCK;
    struct run runs[2] = {{"one thread", 1, "", NULL, 1e9},
                          {"split", 0, "", NULL, 1e9}};
    struct hc_optim_conf c;
    struct hc_layout l;
    struct ps_update *u = NULL;
    float **init = NULL, *grad = NULL;
    int rv = 1;

    hc_log_set_level(HC_LOG_WARN);      /* not a line per store opened */
    if (argc > 1 && !strcmp(argv[1], "--optimizers")) {
        size_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 20000000;

        if (n < 1 || n > ((size_t)1 << 30)) {
            fprintf(stderr, "usage: apply --optimizers [ELEMS 1..2^30]\n");
            return 2;
        }
        return optimizers_table(n);
    }
    if (elems < 1 || elems > ((size_t)1 << 30) || steps < 1 || rounds < 1 ||
        block < 1 || block > (1L << 24)) {
        fprintf(stderr, "usage: apply [ELEMS 1..2^30] [STEPS] [ROUNDS] "
                "[BLOCK 1..2^24]\n");
        return 2;
    }
    hc_optim_defaults(HC_OPT_ADAM, &c);
    if (hc_layout_build(&elems, 1, 1, (uint32_t)block, &l) != HC_OK) {
        fprintf(stderr, "apply bench: %s\n", hc_err_msg());
        return 1;
    }
    init = calloc(l.n_blocks, sizeof *init);
    u = calloc(l.n_blocks, sizeof *u);
    grad = malloc(elems * sizeof *grad);
    if (!init || !u || !grad)
        goto out;
    for (size_t e = 0; e < elems; e++)
        grad[e] = (float)((e * 7) % 13) / 8.0f - 0.75f;
    for (size_t i = 0; i < l.n_blocks; i++) {
        const struct hc_block *b = &l.blocks[i];

        init[b->local] = grad + b->flat;   /* any finite values */
        u[i] = (struct ps_update){b->local, b->length, grad + b->flat, 0.5f};
    }
    for (int k = 0; k < 2; k++)
        if (open_one(&runs[k], &l, (const float *const *)init) != 0)
            goto out;
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            double t0 = hc_now_s(), per;

            for (int t = 0; t < steps; t++)
                if (ps_store_apply(runs[k].s, &c, u, l.n_blocks, NULL, 0,
                                   NULL) != HC_OK) {
                    fprintf(stderr, "apply bench: %s\n", hc_err_msg());
                    goto out;
                }
            per = (hc_now_s() - t0) / steps;
            if (per < runs[k].best)
                runs[k].best = per;
        }
    }
    {
        struct ps_store_info info;
        size_t freed;

        ps_store_info(runs[1].s, &info);
        printf("apply: %zu parameters (%zu blocks of %ld, Adam), best of %d "
               "rounds of %d steps: one thread %.2f ms, split %.2f ms per "
               "step (%llu steps split), ratio %.2f\n", elems, l.n_blocks,
               block, rounds, steps, runs[0].best * 1e3, runs[1].best * 1e3,
               (unsigned long long)info.steps_split,
               runs[1].best / runs[0].best);
        ps_store_close(runs[0].s);
        runs[0].s = NULL;
        freed = pages_freed_last(runs[0].dir);
        printf("apply: one step rewrote %zu pages of %u bytes: %.2f bytes "
               "per byte of parameters\n", freed, info.page_size,
               (double)freed * info.page_size / ((double)elems * 4));
    }
    rv = 0;
out:
    for (int k = 0; k < 2; k++) {
        char cmd[128];

        ps_store_close(runs[k].s);
        if (runs[k].dir[0]) {
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", runs[k].dir);
            if (system(cmd) != 0)
                fprintf(stderr, "apply bench: could not remove %s\n",
                        runs[k].dir);
        }
    }
    free(init);
    free(u);
    free(grad);
    hc_layout_free(&l);
    return rv;
}
