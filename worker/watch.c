/*
 * watch.c — a worker's reports while it trains (see watch.h): progress,
 * metrics, the chief's TensorBoard events and CSV, and the history the
 * live page draws.
 */
#include "watch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "log.h"

int wk_watch_open(struct wk_watch *w, const struct wk_watch_conf *c)
{
    char l[64];
    int rv, i;

    memset(w, 0, sizeof *w);
    w->c = *c;
    if (w->c.n_workers > WK_WATCH_MAX_WORKERS)
        w->c.n_workers = WK_WATCH_MAX_WORKERS;
    pthread_mutex_init(&w->mu, NULL);
    w->t_start = hc_now_s();
    w->pt_every = 1;
    wk_progress_init(&w->prog, stdout, c->verbose, c->tty, c->epochs,
                     c->progress_interval_s);
    w->prog.metrics = c->val_metrics;
    w->prog.n_metrics = c->n_val_metrics;
    w->pts = calloc(WK_WATCH_POINTS, sizeof *w->pts);
    w->ep = calloc(WK_WATCH_EPOCHS, sizeof *w->ep);
    if (!w->pts || !w->ep)
        return hc_err_set(HC_ERR_NOMEM, "out of memory for the history");
    if (c->metrics) {
        struct hc_metrics *m = c->metrics;

        snprintf(l, sizeof l, "worker=\"%d\"", c->worker);
        w->steps = hc_metric(m, HC_COUNTER, "hetps_steps_total", "Training "
                             "steps this worker computed", l, NULL, 0);
        w->samples = hc_metric(m, HC_COUNTER, "hetps_samples_total",
                               "Samples this worker trained on", l, NULL, 0);
        w->compute = hc_metric(m, HC_HISTOGRAM, "hetps_compute_seconds",
                               "Forward and backward time of a step", l,
                               hc_latency_bounds, 16);
        w->exchange = hc_metric(m, HC_HISTOGRAM, "hetps_push_pull_seconds",
                                "Time of a step's push-and-pull over all "
                                "shards", l, hc_latency_bounds, 16);
        w->rate = hc_metric(m, HC_GAUGE, "hetps_samples_per_second",
                            "This worker's training speed (last step)", l,
                            NULL, 0);
        w->loss = hc_metric(m, HC_GAUGE, "hetps_train_loss", "Mean loss of "
                            "the epoch so far", l, NULL, 0);
        w->acc = hc_metric(m, HC_GAUGE, "hetps_train_accuracy", "Accuracy "
                           "of the epoch so far (ratio)", l, NULL, 0);
        w->epoch = hc_metric(m, HC_GAUGE, "hetps_epoch", "Epoch in progress "
                             "(1-based)", l, NULL, 0);
        w->lr_series = hc_metric(m, HC_GAUGE, "hetps_learning_rate",
                                 "The optimizer's learning rate at the last "
                                 "step (a schedule's, at the step count)", l,
                                 NULL, 0);
        if (c->worker == 0) {
            w->val_loss = hc_metric(m, HC_GAUGE, "hetps_val_loss", "Test "
                                    "set loss at the last epoch end", l,
                                    NULL, 0);
            w->val_acc = hc_metric(m, HC_GAUGE, "hetps_val_accuracy", "Test "
                                   "set accuracy at the last epoch end", l,
                                   NULL, 0);
        }
    }
    if (!c->logdir)
        return HC_OK;
    if ((rv = hc_tfevents_open(&w->tf, c->logdir)) != HC_OK)
        return rv;
    snprintf(w->csv_path, sizeof w->csv_path, "%s/training.csv", c->logdir);
    if (!(w->csv = fopen(w->csv_path, "w")))
        return hc_err_set(HC_ERR_IO, "cannot create %s: %s", w->csv_path,
                          strerror(errno));
    fprintf(w->csv, "epoch,loss,accuracy,val_loss,val_accuracy,"
            "samples_per_s,seconds");
    for (i = 0; i < w->c.n_workers; i++)
        fprintf(w->csv, ",worker_%d_compute_samples_per_s", i);
    fprintf(w->csv, ",learning_rate");
    for (i = 0; i < c->n_val_metrics; i++)
        if (c->val_metrics[i].kind != HC_EM_ACCURACY)
            fprintf(w->csv, ",val_%s", c->val_metrics[i].name);
    fprintf(w->csv, "\n");
    fflush(w->csv);
    hc_info("summaries: %s (TensorBoard) and %s", hc_tfevents_path(w->tf),
            w->csv_path);
    return HC_OK;
}

void wk_watch_close(struct wk_watch *w)
{
    if (w->tf && hc_tfevents_close(w->tf) != HC_OK)
        hc_warn("%s", hc_err_msg());
    if (w->csv && fclose(w->csv) != 0)
        hc_warn("cannot write %s: %s", w->csv_path, strerror(errno));
    w->tf = NULL;
    w->csv = NULL;
    free(w->pts);
    free(w->ep);
    w->pts = NULL;
    w->ep = NULL;
    pthread_mutex_destroy(&w->mu);
}

void wk_watch_begin(struct wk_watch *w, int epoch, long target, double now)
{
    wk_progress_begin(&w->prog, epoch, target, now);
    w->t_epoch = now;
    w->epoch_samples = 0;
    hc_series_set(w->epoch, epoch + 1);
}

/* Keep one point in pt_every; when full, drop every other one. */
static void keep_point(struct wk_watch *w, const struct wk_watch_point *p)
{
    int i;

    if (w->step % w->pt_every)
        return;
    pthread_mutex_lock(&w->mu);
    if (w->n_pts == WK_WATCH_POINTS) {
        for (i = 0; i < WK_WATCH_POINTS / 2; i++)
            w->pts[i] = w->pts[2 * i + 1];
        w->n_pts = WK_WATCH_POINTS / 2;
        w->pt_every *= 2;
    }
    w->pts[w->n_pts++] = *p;
    pthread_mutex_unlock(&w->mu);
}

void wk_watch_lr(struct wk_watch *w, float lr)
{
    w->lr = lr;
}

void wk_watch_sparse(struct wk_watch *w, uint64_t rows, uint64_t pulled,
                     uint64_t pushed)
{
    w->sparse = 1;
    w->rows = (float)rows;
    w->pulled = (float)pulled;
    w->pushed = (float)pushed;
}

void wk_watch_step(struct wk_watch *w, long step, int n, double loss,
                   long correct, double compute_s, double exchange_s,
                   double now)
{
    double dt = compute_s + exchange_s;
    struct wk_watch_point p = { .t = now - w->t_start, .step = w->step + 1,
                                .loss = (float)loss,
                                .acc = n ? (float)correct / (float)n : 0,
                                .rate = dt > 0 ? (float)(n / dt) : 0,
                                .rows = w->rows, .pulled = w->pulled,
                                .pushed = w->pushed };

    wk_progress_step(&w->prog, step, n, loss, correct, now);
    w->step++;
    w->epoch_samples += n;
    if (w->c.metrics) {
        hc_series_add(w->steps, 1);
        hc_series_add(w->samples, n);
        hc_series_observe(w->compute, compute_s);
        hc_series_observe(w->exchange, exchange_s);
        hc_series_set(w->rate, p.rate);
        hc_series_set(w->lr_series, w->lr);
        if (w->prog.samples) {
            hc_series_set(w->loss, w->prog.loss_sum / (double)w->prog.samples);
            hc_series_set(w->acc, (double)w->prog.correct /
                                      (double)w->prog.samples);
        }
    }
    keep_point(w, &p);
    if (w->tf) {
        static const char *const tags[] = { "batch/loss", "batch/accuracy",
                                            "batch/samples_per_s",
                                            "batch/learning_rate",
                                            "batch/sparse_unique_rows",
                                            "batch/sparse_bytes_pulled",
                                            "batch/sparse_bytes_pushed" };
        float v[7] = { p.loss, p.acc, p.rate, w->lr, p.rows, p.pulled,
                       p.pushed };

        if (hc_tfevents_scalars(w->tf, w->step, w->sparse ? 7 : 4, tags, v) !=
            HC_OK) {
            hc_warn("summaries stopped: %s", hc_err_msg());
            hc_tfevents_close(w->tf);
            w->tf = NULL;
        }
    }
}

/* Every worker's speed, share and steps behind, as the shards say. */
static void workers_of(struct wk_watch_epoch *e, struct pc_client *pc,
                       int n_ps, int n_workers)
{
    struct pc_shard_status *st;
    uint64_t top = 0, clock[WK_WATCH_MAX_WORKERS] = { 0 };
    int j, k;

    e->n_workers = n_workers;
    if (!pc || n_ps <= 0 || !(st = calloc((size_t)n_ps, sizeof *st)))
        return;
    if (pc_status(pc, st) == HC_OK) {
        for (j = 0; j < n_ps; j++) {
            for (k = 0; st[j].up && k < st[j].n_members; k++) {
                const struct pc_member *m = &st[j].members[k];

                if (m->worker < 0 || m->worker >= n_workers)
                    continue;
                e->speed[m->worker] = m->samples_per_s;
                e->share[m->worker] = (float)m->share;
                if (m->clock > clock[m->worker])
                    clock[m->worker] = m->clock;
            }
        }
        for (j = 0; j < n_ps; j++)
            for (k = 0; st[j].up && k < st[j].n_tables &&
                        e->n_rows < WK_WATCH_MAX_ROWS; k++)
                e->rows[e->n_rows++] = (struct wk_watch_rows){
                    j, st[j].tables[k].var, (float)st[j].tables[k].rows };
        for (k = 0; k < n_workers; k++)
            top = clock[k] > top ? clock[k] : top;
        for (k = 0; k < n_workers; k++)
            e->behind[k] = (float)(top - clock[k]);
    }
    pc_status_free(st, n_ps);
    free(st);
}

static void write_summaries(struct wk_watch *w, const struct wk_watch_epoch *e)
{
    const char *tags[6 + HC_MODEL_MAX_METRICS + 3 * WK_WATCH_MAX_WORKERS +
                     WK_WATCH_MAX_ROWS];
    char names[3 * WK_WATCH_MAX_WORKERS][48], mnames[HC_MODEL_MAX_METRICS][64];
    char rnames[WK_WATCH_MAX_ROWS][48];
    float v[6 + HC_MODEL_MAX_METRICS + 3 * WK_WATCH_MAX_WORKERS +
            WK_WATCH_MAX_ROWS];
    const struct hc_eval_metric *ms = w->c.val_metrics;
    const struct wk_epoch_stats *s = &e->s;
    float rate = s->seconds > 0 ? (float)(s->samples / s->seconds) : 0;
    int n = 0, k;

    tags[n] = "epoch/loss", v[n++] = (float)s->loss;
    tags[n] = "epoch/accuracy", v[n++] = (float)s->acc;
    tags[n] = "epoch/samples_per_s", v[n++] = rate;
    tags[n] = "epoch/learning_rate", v[n++] = w->lr;
    if (s->has_val) {
        tags[n] = "epoch/val_loss", v[n++] = (float)s->val_loss;
        tags[n] = "epoch/val_accuracy", v[n++] = (float)s->val_acc;
        for (k = 0; k < w->c.n_val_metrics; k++) {
            if (ms[k].kind == HC_EM_ACCURACY)
                continue;
            snprintf(mnames[k], sizeof mnames[k], "epoch/val_%s", ms[k].name);
            tags[n] = mnames[k], v[n++] = (float)s->val_metric[k];
        }
    }
    for (k = 0; k < e->n_workers; k++) {
        snprintf(names[3 * k], sizeof names[0], "worker_%d/compute_samples_per_s", k);
        snprintf(names[3 * k + 1], sizeof names[0], "worker_%d/share", k);
        snprintf(names[3 * k + 2], sizeof names[0], "worker_%d/steps_behind",
                 k);
        tags[n] = names[3 * k], v[n++] = e->speed[k];
        tags[n] = names[3 * k + 1], v[n++] = e->share[k];
        tags[n] = names[3 * k + 2], v[n++] = e->behind[k];
    }
    for (k = 0; k < e->n_rows; k++) {
        snprintf(rnames[k], sizeof rnames[k], "ps_%d/table_%u_rows",
                 e->rows[k].ps, e->rows[k].var);
        tags[n] = rnames[k], v[n++] = e->rows[k].rows;
    }
    if (w->tf && (hc_tfevents_scalars(w->tf, s->epoch + 1, n, tags, v) !=
                      HC_OK ||
                  hc_tfevents_flush(w->tf) != HC_OK)) {
        hc_warn("summaries stopped: %s", hc_err_msg());
        hc_tfevents_close(w->tf);
        w->tf = NULL;
    }
    if (!w->csv)
        return;
    fprintf(w->csv, "%d,%.6f,%.6f,", s->epoch + 1, s->loss, s->acc);
    if (s->has_val)
        fprintf(w->csv, "%.6f,%.6f,", s->val_loss, s->val_acc);
    else
        fprintf(w->csv, ",,");
    fprintf(w->csv, "%.1f,%.3f", rate, s->seconds);
    for (k = 0; k < e->n_workers; k++)
        fprintf(w->csv, ",%.1f", e->speed[k]);
    fprintf(w->csv, ",%.9g", (double)w->lr);
    for (k = 0; k < w->c.n_val_metrics; k++)
        if (ms[k].kind != HC_EM_ACCURACY) {
            if (s->has_val)
                fprintf(w->csv, ",%.6f", s->val_metric[k]);
            else
                fprintf(w->csv, ",");
        }
    fprintf(w->csv, "\n");
    if (fflush(w->csv) != 0)
        hc_warn("cannot write %s: %s", w->csv_path, strerror(errno));
}

void wk_watch_end(struct wk_watch *w, const struct wk_epoch_stats *s,
                  struct pc_client *pc, int n_ps)
{
    struct wk_watch_epoch e;

    memset(&e, 0, sizeof e);
    e.s = *s;
    wk_progress_end(&w->prog, s);
    if (s->has_val) {
        hc_series_set(w->val_loss, s->val_loss);
        hc_series_set(w->val_acc, s->val_acc);
    }
    if (w->tf || w->csv || w->c.metrics)
        workers_of(&e, pc, n_ps, w->c.n_workers);
    else
        e.n_workers = 0;
    write_summaries(w, &e);
    pthread_mutex_lock(&w->mu);
    if (w->n_ep == WK_WATCH_EPOCHS) {
        memmove(w->ep, w->ep + 1, (WK_WATCH_EPOCHS - 1) * sizeof *w->ep);
        w->n_ep--;
    }
    w->ep[w->n_ep++] = e;
    pthread_mutex_unlock(&w->mu);
}

void wk_watch_history(struct wk_watch *w, struct wk_watch_point *pts,
                      int max_pts, int *n_pts, struct wk_watch_epoch *ep,
                      int max_ep, int *n_ep)
{
    int a, b;

    pthread_mutex_lock(&w->mu);
    a = w->n_pts < max_pts ? w->n_pts : max_pts;
    b = w->n_ep < max_ep ? w->n_ep : max_ep;
    if (pts && w->pts)
        memcpy(pts, w->pts + (w->n_pts - a), (size_t)a * sizeof *pts);
    if (ep && w->ep)
        memcpy(ep, w->ep + (w->n_ep - b), (size_t)b * sizeof *ep);
    pthread_mutex_unlock(&w->mu);
    *n_pts = pts ? a : 0;
    *n_ep = ep ? b : 0;
}
