/*
 * trainer.c — the worker's training loop (see trainer.h).
 *
 * Every buffer of the loop — parameters, gradients, the batch — is
 * allocated once before the first step.
 *
 * async, ssp: each worker walks its own strided shard of the training set,
 * epoch after epoch; each step pulls the freshest parameters (ssp: the
 * shards hold the pull while this worker is too far ahead), computes the
 * gradient of the mean loss over the batch and pushes it.
 *
 * sync: the steps are global. Step v covers samples [t·G, t·G + G) of
 * epoch e's permutation of the whole training set (v = e·steps + t, G =
 * the per-worker batch × workers), the same permutation on every worker;
 * ps:0 tells each worker its slice of it with the pull of version v, sized
 * to the workers' measured speeds. The shards apply the sample-weighted
 * mean of the slices' gradients — the gradient of the global batch — so
 * training equals one process on batch G, to float rounding.
 */
#include "trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "clip.h"
#include "clock.h"
#include "checkpoint.h"
#include "data.h"
#include "err.h"
#include "eval.h"
#include "progress.h"
#include "log.h"
#include "device.h"
#include "watch.h"
#include "replica.h"
#include "sync_schedule.h"
#include "overlap.h"
#include "tables.h"
#include "ctr_inputs.h"
#include "init_tables.h"

/* A sync pull may wait for the slowest worker: allow one attempt this long. */
#define SYNC_WAIT_MS 120000

struct run {
    const struct wk_train_conf *c;
    const struct hc_model *m;
    struct pc_client *pc;
    struct wk_devices devs;     /* this worker's devices */
    struct wk_replicas *rep;    /* mirrored replicas, or one placed net */
    struct wk_dataset train, test;
    struct wk_shard shard;
    float *params, *grads, *x;  /* (n_params) (n_params) (max_batch, H, W, C) */
    float *x_alt;               /* (max_batch, in_size) tables, async: the
                                   batch read ahead (written by the puller
                                   thread while an exchange runs) */
    int32_t *y_alt;             /* (max_batch) its labels */
    long long cur_b;            /* the batch of the epoch r->x holds (-1:
                                   none) */
    int cur_n;                  /*   its samples */
    long long alt_b;            /* the same of r->x_alt */
    int alt_n;
    float *params_alt, *grads_alt; /* --overlap: the buffers an exchange
                                   uses while the next step computes */
    int32_t *y;                 /* (max_batch) */
    int epochs, B, max_batch, chief, do_eval;
    int most_workers;           /* most workers the cluster file has listed */
    long steps;                 /* steps this worker computed */
    long sat_out;               /* sync: steps it was given no share of */
    uint64_t clock;             /* gradients pushed */
    uint64_t late;              /* of them too late for their sync step */
    double speed;               /* samples/s, moving average */
    double t_compute, t_exchange; /* s spent computing / in push-and-pull */
    double t_exchange_warm;     /* of t_exchange: the first WARM_STEPS */
    int early;                  /* push during backward (compute_pushing) */
    struct pc_ready ready;      /*   how much of r->grads is final */
    struct wk_overlap ex;       /*   the exchange thread */
    long n_exchanges;           /* push-and-pulls timed */
    struct wk_watch *watch;     /* what the user sees (watch.h) */
    struct wk_tables *tables;   /* the model's row-sparse tables, or NULL:
                                 * their rows pulled before each forward,
                                 * pushed after each step (tables.h) */
};

static int stopping(const struct run *r)
{
    return (r->c->stop && *r->c->stop) ||
           (r->c->max_steps && r->steps + r->sat_out >= r->c->max_steps);
}

/* Forward/backward of n samples in r->x; the test-only slowdown stretches
 * it, and the speed average sees the stretched time, as it would see a
 * slower machine. */
static int compute(struct run *r, int n, double *loss, int *correct)
{
    double t0 = hc_now_s(), dt;
    int rv = wk_replicas_step(r->rep, r->params, r->x, r->y, NULL, n, r->grads,
                              loss, correct);

    if (rv == HC_OK && wk_clip_by_norm(&r->m->optim))
        wk_clip_grads(r->m, r->grads);      /* before any of it leaves */

    dt = hc_now_s() - t0;
    if (r->c->slowdown > 1) {
        hc_sleep_s(dt * (r->c->slowdown - 1));
        dt = hc_now_s() - t0;
    }
    r->t_compute += dt;
    if (dt > 0) {
        double v = n / dt;

        /* The first step is cold (page faults, first allocations: several
         * times slower, and a slowed worker's stretch of it the more): the
         * second replaces it, then a moving average. Shards size sync
         * shares from this speed; from the cold first alone a fast worker
         * looked 5x slower for 10 steps and a slow one got 2x its share. */
        r->speed = r->steps == 1 || !(r->speed > 0) ? v
                                                    : 0.8 * r->speed + 0.2 * v;
    }
    r->steps++;
    return rv;
}

/* Backward finished every element from `from` on (wk_replicas_on_grads). */
static void grads_final(void *arg, size_t from)
{
    pc_ready_mark(arg, from);
}

/* Whether each step's parts are pushed during its backward: sync and
 * async steps in parts (not --overlap, which pushes during the next step,
 * nor a test slowdown, which must hold the push back), on devices whose
 * backward reports its gradients layer by layer (host memory). */
static int early_push(struct run *r)
{
    const struct wk_train_conf *c = r->c;

    if (c->push_late || c->overlap || c->cluster->mode == HC_MODE_SSP ||
        r->tables ||                /* rows pushed after the step */
        c->slowdown > 1.0 || !pc_in_parts(r->pc) ||
        wk_clip_by_norm(&r->m->optim) ||   /* needs the whole gradient */
        !wk_replicas_on_grads(r->rep, grads_final, &r->ready))
        return 0;
    hc_info("each part is pushed as soon as backward has computed it, the "
            "last layers first");
    return 1;
}

typedef int (*step_fn)(struct pc_client *, const struct pc_grad *, float *,
                       struct pc_step *);

/*
 * compute() with the step's push-and-pull begun before it, on the exchange
 * thread (overlap.h): each part of the gradient leaves as soon as backward
 * has finished its layers, the last layers first, while backward computes
 * the rest (r->early). g (all but its data, samples and speed) and st are
 * the step's; the values come back into r->params once the whole gradient
 * is final (backward no longer reads them). *waited: the time the exchange
 * took after computing.
 */
static int compute_pushing(struct run *r, int n, double *loss, int *k,
                           struct pc_grad *g, struct pc_step *st,
                           step_fn step, double *waited)
{
    struct wk_overlap *x = &r->ex;
    char why[512];
    double t;
    int rv, xrv;

    pc_ready_reset(&r->ready, r->m->n_params);
    g->data = r->grads;
    g->samples = (uint32_t)n;
    g->samples_per_s = (float)r->speed;    /* as measured up to now */
    g->ready = &r->ready;
    x->pc = r->pc;
    x->g = *g;
    x->st = *st;
    x->params = r->params;
    x->step = step;
    if ((rv = wk_overlap_start(x)) != HC_OK)
        return rv;
    rv = compute(r, n, loss, k);
    snprintf(why, sizeof why, "%s", rv == HC_OK ? "" : hc_err_msg());
    if (rv != HC_OK)
        pc_ready_fail(&r->ready);       /* the exchange gives up */
    else
        pc_ready_mark(&r->ready, 0);
    t = hc_now_s();
    xrv = wk_overlap_wait(x);
    *waited = hc_now_s() - t;
    if (rv != HC_OK)
        return hc_err_set(rv, "%s", why);
    if (xrv == HC_OK)
        *st = x->st;
    return xrv;
}

/* 1 when every worker but `self` has left (or died), by every shard's
 * account. */
static int others_done(struct pc_client *pc, const struct hc_cluster *cl,
                       int self)
{
    struct pc_shard_status *st = calloc((size_t)cl->n_ps, sizeof *st);
    int j, k, done = 1;

    if (!st || pc_status(pc, st) != HC_OK) {
        free(st);
        return 0;
    }
    for (j = 0; j < cl->n_ps; j++) {
        if (!st[j].up)
            done = 0;
        for (k = 0; k < st[j].n_members; k++)
            if (st[j].members[k].worker != self &&
                st[j].members[k].state == PC_MEMBER_JOINED)
                done = 0;
    }
    pc_status_free(st, cl->n_ps);
    free(st);
    return done;
}

/*
 * Whether other workers took part in this job: the cluster file listed more
 * than one (at the start or at an epoch since), or a shard knows another
 * worker — one added to the file and joined mid-job, whatever the mode.
 */
static int others_in_job(const struct run *r)
{
    const struct hc_cluster *cl = r->c->cluster;
    struct pc_shard_status *st;
    int j, k, found = 0;

    if (r->most_workers > 1)
        return 1;
    st = calloc((size_t)cl->n_ps, sizeof *st);
    if (!st || pc_status(r->pc, st) != HC_OK) {
        free(st);
        return 0;
    }
    for (j = 0; j < cl->n_ps; j++)
        for (k = 0; k < st[j].n_members; k++)
            if (st[j].members[k].worker != r->c->worker)
                found = 1;
    pc_status_free(st, cl->n_ps);
    free(st);
    return found;
}

int wk_check_mode(struct pc_client *pc, const struct hc_cluster *cl)
{
    struct pc_shard_status *st = calloc((size_t)cl->n_ps, sizeof *st);
    const char *mine = hc_mode_name(cl->mode);
    int j, rv;

    if (!st)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    rv = pc_status(pc, st);
    for (j = 0; rv == HC_OK && j < cl->n_ps; j++)
        if (st[j].up && st[j].mode[0] && strcmp(st[j].mode, mine) != 0)
            rv = hc_err_set(HC_ERR_CONFIG, "ps:%d runs mode %s but this "
                            "worker runs %s (hetps.mode in the cluster file, "
                            "or --mode): give every task the same mode", j,
                            st[j].mode, mine);
    pc_status_free(st, cl->n_ps);
    free(st);
    return rv;
}

/* Non-chief workers wait for the chief to create the variables. */
static int wait_for_variables(struct pc_client *pc, float *params,
                              int retry_ms)
{
    double t0 = hc_now_s(), deadline = t0 + retry_ms / 1000.0;
    int rv, said = 0;

    for (;;) {
        rv = pc_pull(pc, params, NULL);
        if (rv != HC_ERR_NOTFOUND) {
            if (rv == HC_OK && hc_now_s() - t0 >= 5.0)
                hc_info("waited %.1f s for the chief (worker:0) to create "
                        "the variables", hc_now_s() - t0);
            return rv;
        }
        if (hc_now_s() > deadline)
            return hc_err_set(HC_ERR_TIMEOUT, "the chief (worker:0) did not "
                              "create the variables within %d ms: is it "
                              "running?", retry_ms);
        if (said == 0 && hc_now_s() - t0 >= 5.0) {
            said = 1;
            hc_warn("waiting for the chief (worker:0) to create the "
                    "variables for %.1f s", hc_now_s() - t0);
        }
        hc_sleep_s(0.1);
    }
}

/* The epoch's end: the chief evaluates the test set (on the values of
 * min_version or newer), then the summary line (progress.h). */
static int epoch_end(struct run *r, int epoch, double dt, double loss_sum,
                     long correct, long long seen, uint64_t min_version)
{
    struct wk_epoch_stats s = { .epoch = epoch, .steps = r->watch->prog.step,
                                .samples = seen, .seconds = dt,
                                .loss = loss_sum / (double)seen,
                                .acc = (double)correct / (double)seen };
    int rv;

    if (r->do_eval) {
        struct pc_step st = { .min_version = min_version };

        rv = pc_pull_step(r->pc, r->params, &st, SYNC_WAIT_MS);
        if (rv == HC_OK)
            rv = wk_evaluate(r->rep, r->params, &r->test, r->max_batch, r->x,
                             r->y, &s.val_loss, &s.val_acc);
        if (rv == HC_OK)
            rv = wk_evaluate_metrics(r->rep, r->m, r->params, &r->test,
                                     r->max_batch, r->x, s.val_metric);
        if (rv != HC_OK)
            return rv;
        s.has_val = 1;
        if (r->c->export_every_epoch) {
            struct wk_checkpoint *ck = r->c->export_every_epoch;
            int wrote;

            if ((rv = wk_checkpoint_epoch(ck, r->m, r->params, epoch,
                                          s.val_acc, &wrote)) != HC_OK)
                return rv;
            if (wrote)
                hc_info("epoch %d: weights written to %s", epoch + 1,
                        ck->last);
        }
    }
    wk_watch_end(r->watch, &s, r->pc, r->c->cluster->n_ps);
    return HC_OK;
}

/*
 * Elastic membership (async, ssp): at an epoch start, re-read the cluster
 * file; when the number of workers changed, this worker's data shard is
 * recomputed for the new membership (a change to anything the cluster id
 * covers is not taken, as on the shards). Returns 1 when this worker is no
 * longer in the file (it should leave), 0 otherwise.
 */
static int refresh_membership(struct run *r, int *n_workers)
{
    struct hc_cluster nc;
    struct hc_diag diag;
    const char *what;
    int n, rv;

    if (!r->c->cluster_file || r->c->cluster->mode == HC_MODE_SYNC ||
        hc_cluster_load_file(r->c->cluster_file, &nc, &diag) != HC_OK)
        return 0;
    n = nc.n_worker;
    what = hc_cluster_differs(r->c->cluster, &nc);
    hc_cluster_free(&nc);
    if (what) {     /* the shards keep the running cluster: so do we */
        hc_warn("cluster file %s changed %s: not taken while the job runs",
                r->c->cluster_file, what);
        return 0;
    }
    if (n == *n_workers)
        return 0;
    if (r->c->worker >= n) {
        hc_info("the cluster file no longer lists worker:%d: leaving",
                r->c->worker);
        return 1;
    }
    wk_shard_free(&r->shard);
    rv = wk_shard_init_for(&r->shard, &r->train, n, r->c->worker,
                           r->m->seed);
    if (rv == HC_OK)
        rv = wk_shard_check_place(&r->shard, r->B, r->train.images_path);
    if (rv != HC_OK) {
        wk_shard_free(&r->shard);
        hc_warn("cannot reshard the data for %d workers: %s", n, hc_err_msg());
        wk_shard_init_for(&r->shard, &r->train, *n_workers, r->c->worker,
                      r->m->seed);
        r->shard.file_order = r->m->file_order;
        return 0;
    }
    r->shard.file_order = r->m->file_order;
    hc_info("cluster file: %d worker(s), was %d: this worker now reads %lld "
            "samples per epoch", n, *n_workers, r->shard.n);
    *n_workers = n;
    if (n > r->most_workers)
        r->most_workers = n;
    return 0;
}

/* The job is done before this worker computed anything: say why. */
static void nothing_to_train(const char *what)
{
    hc_info("%s: nothing to train. To train again from the start, give the "
            "parameter servers empty data directories (--data-dir); to train "
            "longer, raise --epochs", what);
}

static void swap_buffers(float **a, float **b)
{
    float *t = *a;

    *a = *b;
    *b = t;
}

/* The first steps' push-and-pull also pays for what a run sets up once:
 * connections, buffers touched for the first time, and on the shards the
 * store file growing to the copies LMDB keeps (ps/README.md). Summaries
 * give the time after them as well. */
#define WARM_STEPS 2

static void note_exchange(struct run *r, double secs)
{
    r->t_exchange += secs;
    if (r->n_exchanges++ < WARM_STEPS)
        r->t_exchange_warm += secs;
}

/* " (X ms after the first 2 steps)" for a summary line, or "". */
static const char *steady_text(const struct run *r, char *buf, size_t len)
{
    long n = r->steps - WARM_STEPS;

    if (n <= 0)
        return "";
    snprintf(buf, len, " (%.2f ms after the first %d steps)",
             1e3 * (r->t_exchange - r->t_exchange_warm) / (double)n,
             WARM_STEPS);
    return buf;
}

/* What a summary's "ms in push-and-pull" counts: the time waited for it
 * after computing, which is all of it unless computing overlapped it. */
static const char *exchange_text(const struct run *r)
{
    if (r->c->overlap)
        return " not hidden by computing (--overlap)";
    if (r->early)
        return " left after backward (the parts pushed during it: "
               "--early-push)";
    return "";
}

/*
 * A click-through step's exchange (tables.h), one request per shard: the
 * step's rows' gradients, the dense push-and-pull and the rows of the
 * batch read ahead into r->x_alt (by the puller thread while the step
 * computed; under --overlap, by the exchange itself, on the exchange
 * thread, and the rows are then for the step after next, so they miss
 * only the next step's update, as its dense values do). It reads x's g,
 * st, params and step, as an exchange without tables would.
 */
struct tables_job {
    struct run *r;
    struct wk_overlap *x;       /* the step's exchange */
    int set;                    /* the set pulled ahead, -1: none */
    int epoch;                  /*   of that batch */
    long long next;
    int pulled;                 /* its rows came: the set is usable */
    struct wk_overlap puller;   /* the thread reading it (not --overlap) */
};

/* The rows of j's batch (read into r->x_alt) pulled here. A failed pull
 * is not the step's failure: the set is dropped and the batch's forward
 * pulls its rows itself (and reports the error if that fails too). */
static void pull_set_ahead(struct tables_job *j)
{
    j->pulled = wk_tables_ahead_pull(j->r->tables, j->set, j->r->x_alt,
                                     j->r->alt_n) == HC_OK;
    if (!j->pulled)
        hc_info("rows of batch %lld not pulled ahead (%s): pulled at its "
                "forward", j->next, hc_err_msg());
}

/* Batch j->next of j->epoch into r->x_alt. */
static int read_next(struct tables_job *j)
{
    struct run *r = j->r;
    int rv;

    r->alt_b = -1;
    rv = wk_shard_batch(&r->shard, j->epoch, j->next, r->B, &r->train,
                        r->x_alt, r->y_alt, &r->alt_n);
    if (rv == HC_OK)
        r->alt_b = j->next;
    return rv;
}

/* The puller thread: the batch read. */
static int read_ahead(void *arg)
{
    return read_next(arg);
}

/* Not --overlap, before step b (of nb) computes: batch b + 1 read into
 * r->x_alt on the puller thread meanwhile (tables_exchange waits for
 * it). */
static int read_ahead_start(struct run *r, struct tables_job *j, int epoch,
                            int b, int nb)
{
    if (r->c->overlap || b + 1 >= nb)
        return HC_OK;
    j->epoch = epoch;
    j->next = b + 1;
    j->puller.job = read_ahead;
    j->puller.job_arg = j;
    return wk_overlap_start(&j->puller);
}

static int tables_exchange(void *arg)
{
    struct tables_job *j = arg;
    struct wk_overlap *x = j->x;
    struct run *r = j->r;
    int rv;

    x->st.n_pull_rows = 0;
    if ((rv = wk_tables_step_push(r->tables, &x->g.rows, &x->g.n_rows)))
        return rv;
    /* The batch ahead: read by the puller (waited for here) or, under
     * --overlap, now; its ids de-duplicated, their rows asked for. */
    if (j->set >= 0) {
        rv = r->c->overlap ? read_next(j) : wk_overlap_wait(&j->puller);
        if (rv != HC_OK)
            return rv;
        if (wk_tables_ahead_ids(r->tables, j->set, r->x_alt, r->alt_n,
                                &x->st.pull_rows, &x->st.n_pull_rows) !=
            HC_OK) {
            hc_info("rows of batch %lld not pulled ahead (%s): pulled at its "
                    "forward", j->next, hc_err_msg());
            x->st.n_pull_rows = 0;
        }
    }
    rv = (x->step ? x->step : pc_async_step)(r->pc, &x->g, x->params,
                                             &x->st);
    j->pulled = rv == HC_OK && x->st.rows_pulled;
    x->g.n_rows = 0;
    x->st.n_pull_rows = 0;
    return rv;
}

/* The trainer's thread, after a tables_job ran (rv its result): the
 * push's buffers free, the rows pulled ahead the next forward's. */
static void tables_landed(struct run *r, struct tables_job *j, int rv)
{
    wk_tables_busy(r->tables, 0);
    wk_tables_sent(r->tables);
    if (j->set >= 0)
        wk_tables_ahead_end(r->tables, j->set, rv == HC_OK && j->pulled);
    j->set = -1;
    j->pulled = 0;
}

/* r->x and r->x_alt (their labels, which batches they hold) trade places. */
static void swap_batches(struct run *r)
{
    int32_t *y = r->y;
    long long b = r->cur_b;
    int n = r->cur_n;

    swap_buffers(&r->x, &r->x_alt);
    r->y = r->y_alt;
    r->y_alt = y;
    r->cur_b = r->alt_b;
    r->cur_n = r->alt_n;
    r->alt_b = b;
    r->alt_n = n;
}

/* The exchange in flight is done: its values become the ones to compute
 * on (*version: theirs). */
static int overlap_finish(struct run *r, struct wk_overlap *x,
                          uint64_t *version)
{
    int had = x->running, rv = wk_overlap_wait(x);

    if (had && x->job)
        tables_landed(r, x->job_arg, rv);
    if (rv == HC_OK && had) {
        swap_buffers(&r->params, &r->params_alt);
        *version = x->st.version;
    }
    return rv;
}

/*
 * --overlap: wait for the previous step's push-and-pull, then start this
 * step's on its own thread (overlap.h) and return; the next step computes
 * on the values the previous one brought, one exchange staler than without
 * --overlap (async allows it; --max-staleness on the shards counts it).
 * The exchange reads r->grads and writes r->params_alt: the next step
 * computes into the other gradient buffer.
 */
static int overlap_step(struct run *r, struct wk_overlap *x,
                        const struct pc_grad *g, const struct pc_step *st,
                        uint64_t *version)
{
    int rv = overlap_finish(r, x, version);

    if (rv != HC_OK)
        return rv;
    x->pc = r->pc;
    x->g = *g;
    x->st = *st;
    x->params = r->params_alt;
    if ((rv = wk_overlap_start(x)) != HC_OK)
        return rv;
    swap_buffers(&r->grads, &r->grads_alt);
    return HC_OK;
}

/* The step's sparse figures for the summaries (watch.h): the last push's
 * unique rows and bytes each way. */
static void watch_sparse(const struct run *r)
{
    struct wk_tables_stats st;

    if (!r->tables)
        return;
    wk_tables_stats(r->tables, &st);
    wk_watch_sparse(r->watch, st.step_rows, st.step_bytes_pulled,
                    st.step_bytes_pushed);
}

/* What the tables' rows cost a step (tables.h). */
static void tables_summary(const struct run *r)
{
    struct wk_tables_stats st;

    wk_tables_stats(r->tables, &st);
    if (!st.pushes || !st.pulls)
        return;
    hc_info("tables: %.0f unique rows a step; %.1f KiB of ids and rows "
            "pulled a batch, %.1f KiB of ids and gradients pushed a step "
            "(%llu pulls, evaluation's included, %llu of them pulled "
            "ahead in the exchange of the step before; %llu pushes); whole "
            "messages both ways: %.1f KiB a pull, %.1f KiB a push",
            (double)st.rows_pushed / (double)st.pushes,
            (double)st.bytes_pulled / 1024.0 / (double)st.pulls,
            (double)st.bytes_pushed / 1024.0 / (double)st.pushes,
            (unsigned long long)st.pulls, (unsigned long long)st.pulls_ahead,
            (unsigned long long)st.pushes,
            (double)st.wire_pulls / 1024.0 / (double)st.pulls,
            (double)st.wire_pushes / 1024.0 / (double)st.pushes);
}

/* --overlap with tables, after the epoch's first step: batch b (the
 * next) read into r->x_alt and its rows pulled here (nothing is in
 * flight), so that the exchanges that follow pull two batches ahead. */
static int first_ahead(struct run *r, int epoch, long long b)
{
    struct tables_job one = { .r = r, .epoch = epoch, .next = b };
    int rv = wk_tables_ahead_begin(r->tables, &one.set);

    if (rv != HC_OK)
        return rv;
    if ((rv = read_next(&one)) == HC_OK)
        pull_set_ahead(&one);
    wk_tables_ahead_end(r->tables, one.set, rv == HC_OK && one.pulled);
    return rv;
}

/*
 * The exchange of step b (of nb in the epoch, n samples) with tables
 * (tables_exchange), after its compute: the rows' gradients taken out of
 * the net, and with them in one request the dense push-and-pull and the
 * rows of the batch after this one, read into r->x_alt while the step
 * computed (read_ahead_start; --overlap: the batch after the next, read
 * by the exchange). Without --overlap it runs here and the next batch
 * ends in r->x; with it, the exchange of the step before is waited for
 * (its values become r->params), this one starts on the exchange thread
 * and the next batch, read by the step before, moves to r->x.
 */
static int tables_step(struct run *r, struct wk_overlap *x,
                       struct tables_job *j, const struct pc_grad *g,
                       struct pc_step *st, int epoch, long long b,
                       long long nb, int n, uint64_t *version)
{
    const int overlap = r->c->overlap;
    const long long next = b + (overlap ? 2 : 1);
    int rv;

    if (overlap && (rv = overlap_finish(r, x, version)) != HC_OK)
        return rv;
    if (overlap && b + 1 < nb && r->alt_b != b + 1 &&
        (rv = first_ahead(r, epoch, b + 1)) != HC_OK)
        return rv;
    if ((rv = wk_tables_take(r->tables, (uint32_t)n)) != HC_OK)
        return rv;
    if (overlap)
        swap_batches(r);        /* the next batch, read the step before */
    j->set = -1;
    if (overlap) {      /* else read_ahead_start set them (the puller's) */
        j->epoch = epoch;
        j->next = next;
    }
    if (next < nb && (rv = wk_tables_ahead_begin(r->tables, &j->set))) {
        wk_overlap_wait(&j->puller);
        wk_tables_sent(r->tables);
        return rv;
    }
    x->g = *g;
    x->st = *st;
    x->step = r->c->cluster->mode == HC_MODE_SSP ? pc_ssp_step : pc_async_step;
    if (overlap) {
        x->params = r->params_alt;
        x->job = tables_exchange;
        x->job_arg = j;
        wk_tables_busy(r->tables, 1);
        if ((rv = wk_overlap_start(x)) != HC_OK) {
            tables_landed(r, j, rv);
            return rv;
        }
        swap_buffers(&r->grads, &r->grads_alt);
        return HC_OK;
    }
    x->params = r->params;
    rv = tables_exchange(j);
    tables_landed(r, j, rv);
    if (rv != HC_OK)
        return rv;
    *st = x->st;
    *version = st->version;
    swap_batches(r);
    return HC_OK;
}

/*
 * async and ssp: this worker's own shard, its own pace. Each step is one
 * push-and-pull: the gradient goes out, the values for the next step come
 * back (ssp: once this worker is within the bound). Each push carries the
 * worker's place in its data, which the shards record with the update;
 * a restarted worker (or a job started again on its stores) goes on from
 * the furthest place a shard holds, as Keras's BackupAndRestore resumes
 * from the interrupted epoch — nothing is trained twice or skipped, but
 * at most the one push in flight when the worker died. A model with
 * tables reads the next batch while the step computes, and its step's
 * request to each shard carries the rows' gradients, the dense
 * push-and-pull and the next batch's rows to pull (tables_step).
 */
static int run_async(struct run *r)
{
    const int ssp = r->c->cluster->mode == HC_MODE_SSP;
    const int wait = ssp ? SYNC_WAIT_MS : 0;
    struct pc_step st = { 0 };
    struct wk_overlap x = { 0 };
    struct tables_job job = { .r = r, .x = &x, .set = -1 };
    uint32_t e0 = 0, b0 = 0;
    uint64_t version;           /* of the values in r->params */
    int epoch, rv, n_workers = r->c->cluster->n_worker;
    long steps0 = r->steps;
    double t_start = hc_now_s();

    if ((rv = pc_pull_step(r->pc, r->params, &st, wait)) != HC_OK)
        return rv;
    version = st.version;
    if (pc_place(r->pc, &e0, &b0)) {
        if ((long long)b0 >= wk_shard_n_batches(&r->shard, r->B)) {
            e0++;           /* that epoch was done */
            b0 = 0;
        }
        if (e0 >= (uint32_t)r->epochs) {
            char what[160];

            snprintf(what, sizeof what, "worker:%d has done all %d epoch(s) "
                     "of this job (as the shards recorded)", r->c->worker,
                     r->epochs);
            nothing_to_train(what);
            return HC_OK;
        }
        hc_info("resuming where worker:%d left off (as the shards recorded): "
                "epoch %u/%d from batch %u of %lld", r->c->worker, e0 + 1,
                r->epochs, b0 + 1, wk_shard_n_batches(&r->shard, r->B));
    }
    st.has_place = 1;
    for (epoch = (int)e0; epoch < r->epochs && !stopping(r); epoch++) {
        long long nb, b, seen = 0;
        double t0 = hc_now_s(), loss_sum = 0;
        long correct = 0;

        if (epoch > (int)e0 && refresh_membership(r, &n_workers))
            break;
        nb = wk_shard_n_batches(&r->shard, r->B);
        r->cur_b = r->alt_b = -1;      /* the evaluation wrote r->x */
        wk_watch_begin(r->watch, epoch, nb, t0);
        for (b = epoch == (int)e0 ? (long long)b0 : 0; b < nb && !stopping(r);
             b++) {
            struct pc_grad g;
            double loss, tc = r->t_compute, tx, dx = 0;
            int n, k;

            if (r->cur_b == b) {
                n = r->cur_n;   /* read ahead, its rows pulled ahead */
            } else if ((rv = wk_shard_batch(&r->shard, epoch, b, r->B,
                                            &r->train, r->x, r->y, &n)) !=
                       HC_OK) {
                goto out;
            }
            r->cur_b = b;
            r->cur_n = n;
            g = (struct pc_grad){ .data = r->grads, .samples = (uint32_t)n,
                                  .base_version = version };
            st.clock = r->clock;
            st.epoch = (uint32_t)epoch;
            st.batches = (uint32_t)b + 1;
            if (r->early) {
                rv = compute_pushing(r, n, &loss, &k, &g, &st, pc_async_step,
                                     &dx);
                version = st.version;
            } else if ((rv = r->tables ? read_ahead_start(r, &job, epoch,
                                                           b, nb)
                                       : HC_OK) == HC_OK &&
                       (rv = compute(r, n, &loss, &k)) == HC_OK) {
                g.samples_per_s = (float)r->speed;
                tx = hc_now_s();
                if (r->tables) {
                    rv = tables_step(r, &x, &job, &g, &st, epoch, b, nb, n,
                                     &version);
                } else if (r->c->overlap) {
                    rv = overlap_step(r, &x, &g, &st, &version);
                } else {
                    rv = ssp ? pc_ssp_step(r->pc, &g, r->params, &st)
                             : pc_async_step(r->pc, &g, r->params, &st);
                    version = st.version;
                }
                dx = hc_now_s() - tx;
            }
            if (rv != HC_OK)
                goto out;
            note_exchange(r, dx);
            r->clock++;
            loss_sum += loss * n;
            correct += k;
            seen += n;
            wk_watch_lr(r->watch, hc_optim_lr(&r->m->optim, g.base_version));
            watch_sparse(r);
            wk_watch_step(r->watch, b + 1, n, loss, k, r->t_compute - tc, dx,
                          hc_now_s());
        }
        {   /* the epoch's last exchange, before its values are judged */
            double tx = hc_now_s();

            if ((rv = overlap_finish(r, &x, &version)) != HC_OK)
                goto out;
            r->t_exchange += hc_now_s() - tx;
        }
        if (seen && (rv = epoch_end(r, epoch, hc_now_s() - t0, loss_sum, correct,
                                    seen, 0)) != HC_OK)
            goto out;
    }
    if (r->steps > steps0) {
        long n = r->steps - steps0;
        double dt = hc_now_s() - t_start;

        char steady[64];

        hc_info("%s: %ld steps in %.2f s: this worker %.0f samples/s, per "
                "step %.2f ms computing, %.2f ms in push-and-pull%s%s",
                ssp ? "ssp" : "async", n, dt,
                dt > 0 ? (double)n * r->B / dt : 0.0,
                1e3 * r->t_compute / (double)r->steps,
                1e3 * r->t_exchange / (double)r->steps,
                exchange_text(r), steady_text(r, steady, sizeof steady));
        if (r->tables)
            tables_summary(r);
    }
    rv = HC_OK;
out:
    if (x.running) {    /* its buffers and client must outlive it */
        char why[512];

        snprintf(why, sizeof why, "%s", hc_err_msg());
        wk_overlap_wait(&x);
        hc_err_set(rv, "%s", why);
    }
    wk_overlap_stop(&x);
    wk_overlap_stop(&job.puller);
    return rv;
}

/* sync: steps after which the run's rate is given again (speeds measured,
 * shares settled: who sits out is first tried after 10 steps). */
#define SETTLE_STEPS 20

/* What a sync run keeps across steps. */
struct sync_run {
    struct wk_sync_schedule s;
    struct pc_step st;          /* the last pull's answer: version, slice */
    uint64_t v_first;           /* first step computed; UINT64_MAX: none */
    double t_first;
    uint64_t v_settled;         /* step SETTLE_STEPS after v_first, or 0 */
    double t_settled;           /*   when it began */
    int epoch;                  /* of the steps being summed, -1: none yet */
    double t0, loss_sum;        /*   its start, its loss × samples */
    long correct;
    long long seen;             /*   samples computed in it */
};

/* A plain pull of the newest step (at the start, after a skipped step, an
 * epoch's evaluation or a changed job batch), with the slice of its global
 * batch; nothing when the run is stopping. */
static int fresh_pull(struct run *r, struct sync_run *y)
{
    if (stopping(r))
        return HC_OK;
    y->st.min_version = y->v_first == UINT64_MAX ? 0 : y->st.version;
    y->st.clock = r->clock;
    y->st.global_batch =
        (uint32_t)wk_sync_batch_of(&y->s, y->st.min_version);
    return pc_pull_step(r->pc, r->params, &y->st, SYNC_WAIT_MS);
}

/* One sync step v, the values and slice in hand: read the slice's samples,
 * compute its gradient, push it and pull step v + 1 with the slice of its
 * batch (one round trip); then count the step into its epoch. */
static int one_step(struct run *r, struct sync_run *y, uint64_t v, int epoch,
                    long long t)
{
    struct pc_grad g;
    double loss, tx, dx = 0, tc = r->t_compute;
    int n, k, rv;

    rv = wk_shard_slice(&r->shard, epoch, t * y->s.G + y->st.offset,
                        (int)y->st.count, &r->train, r->x, r->y, &n);
    if (rv != HC_OK)
        return rv;
    if (n == 0)
        return hc_err_set(HC_ERR_DATA, "step %llu: empty slice",
                          (unsigned long long)v);
    g = (struct pc_grad){ .data = r->grads, .samples = (uint32_t)n,
                          .base_version = v };
    y->st.clock = r->clock;
    y->st.global_batch = (uint32_t)wk_sync_batch_of(&y->s, v + 1);
    if (r->early) {
        rv = compute_pushing(r, n, &loss, &k, &g, &y->st, pc_sync_step, &dx);
    } else if ((rv = compute(r, n, &loss, &k)) == HC_OK) {
        g.samples_per_s = (float)r->speed;
        tx = hc_now_s();
        /* The step's rows first: the shards hold them for the step. */
        rv = r->tables ? wk_tables_push(r->tables, (uint32_t)n) : HC_OK;
        if (rv == HC_OK)
            rv = pc_sync_step(r->pc, &g, r->params, &y->st);
        dx = hc_now_s() - tx;
    }
    if (rv != HC_OK)
        return rv;
    note_exchange(r, dx);
    r->clock++;
    if (y->st.late)
        r->late++;
    y->loss_sum += loss * n;
    y->correct += k;
    y->seen += n;
    wk_watch_lr(r->watch, hc_optim_lr(&r->m->optim, v));
    watch_sparse(r);
    wk_watch_step(r->watch, t + 1, n, loss, k, r->t_compute - tc, dx,
                  hc_now_s());
    return HC_OK;
}

/* Start summing epoch `epoch` (its first step computed here). */
static void sync_epoch_begin(struct run *r, struct sync_run *y, int epoch)
{
    y->epoch = epoch;
    y->t0 = hc_now_s();
    y->loss_sum = 0;
    y->correct = 0;
    y->seen = 0;
    wk_watch_begin(r->watch, epoch, y->s.steps_per_epoch, y->t0);
}

/* The summary lines of a sync run. */
static void sync_report(const struct run *r, const struct sync_run *y)
{
    if (y->v_first == UINT64_MAX && !stopping(r)) {
        char what[160];

        snprintf(what, sizeof what, "the shards are at step %llu: this "
                 "job's %d epoch(s) (%llu steps) are done",
                 (unsigned long long)y->st.version, r->epochs,
                 (unsigned long long)y->s.total);
        nothing_to_train(what);
    }
    if (r->late)
        hc_info("%llu of %llu gradients came too late for their step "
                "(backup workers)", (unsigned long long)r->late,
                (unsigned long long)r->clock);
    if (r->sat_out)
        hc_info("sat out %ld of %ld steps: given no share (it would not "
                "have paid for this worker's round trip)", r->sat_out,
                r->sat_out + r->steps);
    if (y->v_first != UINT64_MAX && y->st.version > y->v_first) {
        double dt = hc_now_s() - y->t_first;
        uint64_t end = y->st.version < y->s.total ? y->st.version
                                                  : y->s.total;
        uint64_t steps = end - y->v_first;
        char steady[64], settled[80] = "";

        /* Steps of G samples, all workers together (the last batch of an
         * epoch may be shorter: close enough for a rate); and the same
         * after the first SETTLE_STEPS (speeds measured, shares settled). */
        if (y->t_settled && end > y->v_settled &&
            hc_now_s() > y->t_settled)
            snprintf(settled, sizeof settled, " (%.0f after the first %d "
                     "steps)", (double)(end - y->v_settled) *
                     (double)y->s.G / (hc_now_s() - y->t_settled),
                     SETTLE_STEPS);
        hc_info("sync: %llu steps of global batch %lld in %.2f s: %.0f "
                "samples/s over all workers%s; this worker %.0f samples/s, "
                "per step %.2f ms computing, %.2f ms in push-and-pull%s%s",
                (unsigned long long)steps, y->s.G, dt,
                dt > 0 ? (double)steps * (double)y->s.G / dt : 0.0, settled,
                r->speed,
                r->steps ? 1e3 * r->t_compute / (double)r->steps : 0.0,
                r->steps ? 1e3 * r->t_exchange / (double)r->steps : 0.0,
                exchange_text(r), steady_text(r, steady, sizeof steady));
    }
}

/* After step v: when it ended an epoch this worker computed samples of,
 * the epoch's summary (and evaluation). */
static int sync_epoch_end(struct run *r, struct sync_run *y, uint64_t v,
                          int epoch)
{
    int rv;

    if ((v + 1) % (uint64_t)y->s.steps_per_epoch != 0 || !y->seen)
        return HC_OK;
    if ((rv = epoch_end(r, epoch, hc_now_s() - y->t0, y->loss_sum,
                        y->correct, y->seen, v + 1)) != HC_OK)
        return rv;
    y->seen = 0;
    return HC_OK;
}

/*
 * sync: global steps (sync_schedule.h); this worker computes the slice
 * ps:0 assigns it. Each step: the values of step v and this worker's slice
 * of it are in hand (pulled); compute the slice's gradient; push it and
 * pull step v + 1 — values once every worker has pushed, and the slice of
 * v + 1 — in one round trip. A fresh pull is needed only when the hand is
 * empty or stale: at the start, when the job's batch differs from this
 * worker's idea of it, when the slice was cut for another step's batch,
 * after a step that gave this worker nothing (it sits the step out: its
 * pull of the next version is all the shards hear from it), and after an
 * epoch's evaluation.
 */
static int run_sync(struct run *r)
{
    struct sync_run y = { .v_first = UINT64_MAX, .epoch = -1 };
    int rv;

    if ((rv = wk_sync_schedule_init(&y.s, r->train.n, r->c->cluster->n_worker,
                                    (long long)r->B * r->c->cluster->n_worker,
                                    r->epochs)) != HC_OK)
        return rv;
    y.st.job_batch = (uint32_t)y.s.G;   /* until ps:0 says the job's */
    y.t0 = hc_now_s();
    if ((rv = fresh_pull(r, &y)) != HC_OK)
        return rv;
    while (!stopping(r)) {
        uint64_t v = y.st.version;
        long long t, was = y.s.G;
        int epoch;

        if (wk_sync_rebatch(&y.s, y.st.job_batch)) {
            /* The job's global batch was fixed by the workers that started
             * it (this one joined later, e.g. added to the cluster file):
             * cut the same batches. */
            hc_info("the job's global batch is %u (not %lld): taking a share "
                    "of it", y.st.job_batch, was);
            if ((rv = fresh_pull(r, &y)) != HC_OK)
                return rv;
            continue;
        }
        if (v >= y.s.total)
            break;
        if (y.st.global_batch != (uint32_t)wk_sync_batch_of(&y.s, v)) {
            /* the slice was cut for another step's batch */
            if ((rv = fresh_pull(r, &y)) != HC_OK)
                return rv;
            continue;
        }
        if (y.v_first == UINT64_MAX) {
            y.v_first = v;
            y.t_first = hc_now_s();
        }
        if (!y.t_settled && v >= y.v_first + SETTLE_STEPS) {
            y.v_settled = v;
            y.t_settled = hc_now_s();
        }
        wk_sync_place(&y.s, v, &epoch, &t);
        if (epoch != y.epoch)
            sync_epoch_begin(r, &y, epoch);
        if (!y.st.has_slice || y.st.count == 0 ||
            y.st.count > (uint32_t)r->max_batch) {
            if (y.st.count > (uint32_t)r->max_batch)
                hc_warn("step %llu: slice of %u samples is over the %d this "
                        "worker holds: skipped", (unsigned long long)v,
                        y.st.count, r->max_batch);
            /* Nothing to push (no share: it would not pay for this
             * worker's round trip): the pull of the next version tells the
             * shards not to wait for it, and waits there. */
            y.st.version = v + 1;
            r->sat_out++;
            if ((rv = sync_epoch_end(r, &y, v, epoch)) != HC_OK ||
                (rv = fresh_pull(r, &y)) != HC_OK)
                return rv;
            continue;
        }
        if ((rv = one_step(r, &y, v, epoch, t)) != HC_OK)
            return rv;
        if ((v + 1) % (uint64_t)y.s.steps_per_epoch == 0 && y.seen) {
            if ((rv = sync_epoch_end(r, &y, v, epoch)) != HC_OK)
                return rv;
            y.st.version = v + 1;   /* epoch_end pulled without a slice */
            if ((rv = fresh_pull(r, &y)) != HC_OK)
                return rv;
        }
    }
    sync_report(r, &y);
    return HC_OK;
}

/* The chief, at the end: the final weights, once every worker is done —
 * the job's last line whatever its number of workers. The workers the job
 * has now count, not those it started with: one that joined mid-job is
 * waited for like the others. */
static int final_eval(struct run *r)
{
    double t_end = hc_now_s() + 600, vl, va, vm[HC_MODEL_MAX_METRICS] = { 0 };
    char more[640];
    int waited = 0, rv, others = others_in_job(r);

    while (others && !others_done(r->pc, r->c->cluster, r->c->worker) && hc_now_s() < t_end &&
           !(r->c->stop && *r->c->stop)) {
        if (!waited++)
            hc_info("waiting for the other workers to finish");
        hc_sleep_s(0.2);
    }
    if ((rv = pc_pull(r->pc, r->params, NULL)) ||
        (rv = wk_evaluate(r->rep, r->params, &r->test, r->max_batch, r->x, r->y,
                          &vl, &va)) ||
        (rv = wk_evaluate_metrics(r->rep, r->m, r->params, &r->test,
                                  r->max_batch, r->x, vm)))
        return rv;
    wk_progress_metrics(more, sizeof more, "val_", r->m->metrics,
                        r->m->n_metrics, vm);
    printf("Final weights (all workers done): val_loss: %.4f - "
           "val_accuracy: %.4f%s\n", vl, va, more);
    fflush(stdout);
    return HC_OK;
}

/* The training ("train") or test ("t10k") set: --data's, or for a model
 * of several inputs (or arrays named by input, NAME=X.npy) one .npy per
 * input named by the model's inputs. */
static int load_data(const struct wk_train_conf *c, const struct hc_model *m,
                     const char *which, struct wk_dataset *d)
{
    const char *names[HC_MODEL_MAX_INPUTS];
    int is_test = strcmp(which, "train") != 0;

    if (wk_ctr_inputs_spec(c->data)) {
        if (is_test && !wk_ctr_inputs_spec(c->validation_data))
            return hc_err_set(HC_ERR_CONFIG, "--data %s is a click-through "
                              "file: give --validation-data criteo:TEST.tsv "
                              "(or libsvm:FILE), or --no-eval", c->data);
        return wk_ctr_inputs_load(is_test ? c->validation_data : c->data,
                                  is_test ? "--validation-data" : "--data",
                                  m, d);
    }
    if (m->n_inputs < 2 && !(c->data && strchr(c->data, '=')))
        return wk_data_load_any(c->data, c->validation_data, c->data_dir,
                                which, d);
    for (int q = 0; q < m->n_inputs; q++)
        names[q] = m->inputs[q].name;
    return wk_data_load_any_inputs(c->data, c->validation_data, which,
                                   names, m->n_inputs, d);
}

/* The model's row-sparse tables: their rows pulled before each forward
 * (the replicas' hook) or ahead, beside the step before's push-and-pull
 * (async, ssp: a second batch buffer), pushed after each step. */
static int open_tables(struct run *r)
{
    int rv;

    if ((rv = wk_tables_open(r->m, r->pc, r->max_batch, &r->tables)) ||
        !r->tables)
        return rv;
    if (r->c->cluster->mode != HC_MODE_SYNC) {      /* a batch read ahead */
        r->x_alt = malloc((size_t)r->max_batch *
                          wk_replicas_input_size(r->rep) * sizeof *r->x_alt);
        r->y_alt = malloc((size_t)r->max_batch * sizeof *r->y_alt);
        if (!r->x_alt || !r->y_alt)
            return hc_err_set(HC_ERR_NOMEM, "out of memory for a second "
                              "batch of %d", r->max_batch);
    }
    return wk_replicas_before_forward(r->rep, wk_tables_before, r->tables);
}

int wk_train(const struct wk_train_conf *c)
{
    const struct hc_model *m = c->model;
    const int sync = c->cluster->mode == HC_MODE_SYNC;
    struct run r = { 0 };
    struct wk_init_tables *itab = NULL;    /* the chief's tables' rows */
    char devstr[256];
    int rv, joined = 0, have_devs = 0;

    pc_ready_init(&r.ready);

    if (c->overlap && c->cluster->mode != HC_MODE_ASYNC)
        return hc_err_set(HC_ERR_CONFIG, "--overlap pushes each step while "
                          "the next computes, on values one exchange staler: "
                          "it needs mode async, and this job runs %s",
                          hc_mode_name(c->cluster->mode));
    r.c = c;
    r.m = m;
    r.chief = c->worker == 0;
    r.epochs = c->epochs > 0 ? c->epochs : m->epochs;
    r.B = c->batch_size > 0 ? c->batch_size : m->batch_size;
    r.do_eval = c->eval >= 0 ? c->eval : r.chief;
    r.most_workers = c->cluster->n_worker;
    /* sync: a worker's slice may grow up to the whole global batch. */
    r.max_batch = sync ? r.B * c->cluster->n_worker : r.B;
    r.watch = c->watch;

    rv = load_data(c, m, "train", &r.train);
    if (rv == HC_OK && r.do_eval)
        rv = load_data(c, m, "t10k", &r.test);
    if (rv == HC_OK && hc_loss_takes_classes(m->loss))
        rv = wk_data_check_classes(&r.train, m->n_classes);
    if (rv != HC_OK)
        goto out;
    if ((rv = wk_check_input(m, &r.train)) != HC_OK ||
        (r.do_eval && (rv = wk_check_input(m, &r.test)) != HC_OK))
        goto out;
    /* async/ssp: this worker's strided shard; sync: the whole set, in the
     * same per-epoch order on every worker. */
    rv = sync ? wk_shard_init_for(&r.shard, &r.train, 1, 0, m->seed)
              : wk_shard_init_for(&r.shard, &r.train, c->cluster->n_worker,
                                  c->worker, m->seed);
    if (rv == HC_OK && !sync)
        rv = wk_shard_check_place(&r.shard, r.B, r.train.images_path);
    if (rv == HC_OK && r.do_eval)
        rv = wk_evaluate_metrics_fit(m, &r.test);
    if (rv != HC_OK)
        goto out;
    r.shard.file_order = m->file_order;
    rv = wk_devices_open(c->devices ? c->devices : "auto",
                         c->n_threads > 0 ? c->n_threads : 1, &r.devs);
    if (rv != HC_OK)
        goto out;
    have_devs = 1;
    if ((rv = wk_replicas_open(m, &r.devs, r.max_batch, &r.rep)) != HC_OK)
        goto out;
    wk_devices_str(&r.devs, devstr, sizeof devstr);
    if (r.devs.n > 1)
        hc_info("devices %s: %s", devstr,
                wk_replicas_is_placed(r.rep) ? "layers placed as the model "
                "file says" : wk_replicas_fixed(r.rep) ? "mirrored, batch "
                "split equally (batch norm)" : "mirrored, batch split by "
                "measured speed");
    /* What is uploaded and downloaded each step: page-locked on a GPU. */
    r.params = wk_devices_host_alloc(&r.devs, m->n_params * sizeof *r.params);
    r.grads = wk_devices_host_alloc(&r.devs, m->n_params * sizeof *r.grads);
    if (c->overlap) {
        r.params_alt = wk_devices_host_alloc(&r.devs, m->n_params *
                                                      sizeof *r.params_alt);
        r.grads_alt = wk_devices_host_alloc(&r.devs, m->n_params *
                                                     sizeof *r.grads_alt);
    }
    r.x = malloc((size_t)r.max_batch * wk_replicas_input_size(r.rep) *
                 sizeof *r.x);
    r.y = malloc((size_t)r.max_batch * sizeof *r.y);
    if (!r.params || !r.grads || !r.x || !r.y ||
        (c->overlap && (!r.params_alt || !r.grads_alt))) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory for batch %d", r.max_batch);
        goto out;
    }
    /* The chief's first values: read (and checked) before any connection;
     * a table's rows (init_tables.h) go to the shards as stored rows
     * between the create and the first step. */
    if (r.chief && c->initial_weights && wk_model_has_tables(m))
        rv = wk_init_tables_open(m, c->initial_weights, r.params, &itab);
    else if (r.chief && c->initial_weights)
        rv = wk_load_weights(m, c->initial_weights, r.params);
    else if (r.chief)
        hc_model_init_params(m, r.params);
    if (rv != HC_OK)
        goto out;

    rv = pc_open(&r.pc, c->cluster, HC_JOB_WORKER, c->worker, &c->client);
    if (rv == HC_OK)
        rv = pc_join(r.pc, devstr);
    if (rv == HC_OK) {
        joined = 1;
        rv = wk_check_mode(r.pc, c->cluster);
    }
    if (rv == HC_OK) {
        rv = pc_heartbeat_start(r.pc, 1000);
    }
    if (rv == HC_OK)
        rv = pc_set_model(r.pc, m, c->block_elems);
    if (rv != HC_OK)
        goto out;
    if (r.chief) {
        rv = itab ? pc_create_loading(r.pc, r.params)
                  : pc_create(r.pc, r.params);
        if (rv == HC_OK && itab)
            rv = wk_init_tables_send(itab, r.pc);
        if (rv == HC_OK)
            hc_info("variables of %s registered on %d shard(s): %zu parameters",
                    m->name, c->cluster->n_ps, m->n_params);
    } else {
        rv = wait_for_variables(r.pc, r.params,
                                c->client.retry_ms > 0 ? c->client.retry_ms
                                                       : 60000);
    }
    if (rv != HC_OK || (rv = open_tables(&r)) != HC_OK)
        goto out;
    r.early = early_push(&r);

    if (sync)
        hc_info("training %s (sync): %d epoch(s), global batch %d over %d "
                "worker(s), %lld samples", m->name, r.epochs,
                r.B * c->cluster->n_worker, c->cluster->n_worker, r.train.n);
    else
        hc_info("training %s (%s): %d epoch(s), batch %d, %lld of %lld "
                "samples (shard %d/%d)", m->name, hc_mode_name(c->cluster->mode),
                r.epochs, r.B, r.shard.n, r.train.n, c->worker,
                c->cluster->n_worker);
    rv = sync ? run_sync(&r) : run_async(&r);
    if (rv == HC_OK && r.do_eval && r.chief && !(c->stop && *c->stop))
        rv = final_eval(&r);
out:
    wk_overlap_stop(&r.ex);     /* idle: compute_pushing waits for it */
    if (r.pc && joined) {
        int lrv, keep = rv;
        char msg[1024];

        snprintf(msg, sizeof msg, "%s", hc_err_msg());
        lrv = pc_leave(r.pc);
        if (keep != HC_OK)
            hc_err_set(keep, "%s", msg);
        else if (lrv != HC_OK)
            rv = lrv;
    }
    wk_tables_close(r.tables);
    wk_init_tables_close(itab);
    pc_close(r.pc);
    wk_devices_host_free(r.params);
    wk_devices_host_free(r.grads);
    wk_devices_host_free(r.params_alt);
    wk_devices_host_free(r.grads_alt);
    free(r.x);
    free(r.y);
    free(r.x_alt);
    free(r.y_alt);
    wk_replicas_free(r.rep);
    if (have_devs)
        wk_devices_close(&r.devs);
    wk_shard_free(&r.shard);
    wk_data_free(&r.train);
    wk_data_free(&r.test);
    pc_ready_destroy(&r.ready);
    return rv;
}
