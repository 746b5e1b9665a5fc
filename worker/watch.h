/*
 * watch.h — everything a worker reports while it trains, behind three hooks
 * the training loop calls (epoch begin, step, epoch end):
 *
 *   - the progress lines (progress.h), on every worker;
 *   - its Prometheus series (common/metrics.h), when it serves metrics:
 *     steps, samples, compute and push-and-pull time, loss and accuracy;
 *   - on the chief with a log directory, the summaries: a TensorBoard
 *     event file (common/tfevents.h) with the step's loss, accuracy and
 *     samples/s (a model with tables: its unique rows and sparse bytes
 *     each way, wk_watch_sparse), and each epoch's loss, accuracy, val_loss, val_accuracy,
 *     samples/s and every worker's speed, share and steps behind (as the
 *     shards report them); and training.csv with the epoch rows (Keras's
 *     CSVLogger);
 *   - a history of the run for the live page (page.h).
 *
 * The loop's thread calls the hooks; wk_watch_history may be called from
 * any thread (the page's).
 */
#ifndef WK_WATCH_H
#define WK_WATCH_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "client.h"
#include "metrics.h"
#include "progress.h"
#include "tfevents.h"

#define WK_WATCH_MAX_WORKERS 64
#define WK_WATCH_POINTS 400     /* step points kept for the page */
#define WK_WATCH_EPOCHS 1000    /* epoch rows kept for the page */
#define WK_WATCH_MAX_ROWS 32    /* (shard, table) rows counts an epoch */

struct wk_watch_conf {
    int worker;                 /* this worker's index */
    int n_workers;              /* of the cluster */
    int epochs;
    int verbose, tty;           /* progress.h */
    double progress_interval_s;
    struct hc_metrics *metrics; /* NULL: no series */
    const char *logdir;         /* summaries here (chief); NULL: none */
    const struct hc_eval_metric *val_metrics; /* the model's metrics
                                                 (n_val_metrics), printed
                                                 and written as val_<name>
                                                 after val_accuracy */
    int n_val_metrics;
};

/* One point of the step curve. */
struct wk_watch_point {
    double t;                   /* seconds since the run started */
    long step;                  /* this worker's steps so far */
    float loss, acc, rate;      /* the step's; rate: samples/s */
    float rows, pulled, pushed; /* a model with tables: the step's unique
                                 * rows and sparse bytes each way
                                 * (wk_watch_sparse); 0 without */
};

/* One epoch as the summaries have it. */
struct wk_watch_epoch {
    struct wk_epoch_stats s;
    int n_workers;
    float speed[WK_WATCH_MAX_WORKERS];  /* samples/s each worker reports */
    float share[WK_WATCH_MAX_WORKERS];  /* sync: its samples of a step */
    float behind[WK_WATCH_MAX_WORKERS]; /* steps behind the fastest */
    int n_rows;                         /* row-sparse tables' rows on each
                                         * shard at the epoch's end */
    struct wk_watch_rows {
        int ps;
        uint32_t var;                   /* the model's variable */
        float rows;
    } rows[WK_WATCH_MAX_ROWS];
};

struct wk_watch {
    struct wk_watch_conf c;
    struct wk_progress prog;
    struct hc_series *steps, *samples, *compute, *exchange, *loss, *acc,
        *val_loss, *val_acc, *epoch, *rate, *lr_series;
    float lr;                   /* the learning rate now (wk_watch_lr) */
    int sparse;                 /* wk_watch_sparse was called: the model
                                 * has tables */
    float rows, pulled, pushed; /* its figures, for the next step */
    struct hc_tfevents *tf;     /* chief with a logdir */
    FILE *csv;
    char csv_path[1024];
    long step;                  /* steps since start */
    double t_start, t_epoch;
    long epoch_samples;
    pthread_mutex_t mu;         /* guards the history below */
    struct wk_watch_point *pts; /* (WK_WATCH_POINTS) */
    int n_pts, pt_every;        /* keep one step in pt_every */
    struct wk_watch_epoch *ep;  /* (WK_WATCH_EPOCHS) */
    int n_ep;
};

/* Set w up; opens the summaries when c->logdir is set (HC_ERR_IO naming
 * the directory or file). */
int wk_watch_open(struct wk_watch *w, const struct wk_watch_conf *c);
void wk_watch_close(struct wk_watch *w);

void wk_watch_begin(struct wk_watch *w, int epoch, long target, double now);

/* Step `step` (1-based in the epoch): n samples, mean loss, correct ones,
 * seconds computing and in push-and-pull. */
void wk_watch_step(struct wk_watch *w, long step, int n, double loss,
                   long correct, double compute_s, double exchange_s,
                   double now);

/* The learning rate the shards apply at this step (hc_optim_lr of the
 * model's optimizer at the step the pushed gradient was computed from):
 * reported by the next wk_watch_step (/metrics hetps_learning_rate,
 * TensorBoard batch/learning_rate) and epoch end (epoch/learning_rate,
 * training.csv's last column, learning_rate, as Keras's CSVLogger). */
void wk_watch_lr(struct wk_watch *w, float lr);

/* A model with row-sparse tables (worker/tables.h): the step's unique
 * rows and the bytes of ids and rows pulled and of ids and gradients
 * pushed, reported by the next wk_watch_step (TensorBoard
 * batch/sparse_unique_rows, batch/sparse_bytes_pulled,
 * batch/sparse_bytes_pushed; the page's "sparse rows" chart). The shards'
 * /metrics count the same from their side (hetps_sparse_rows_per_step,
 * hetps_sparse_bytes_per_step, hetps_table_rows). */
void wk_watch_sparse(struct wk_watch *w, uint64_t rows, uint64_t pulled,
                     uint64_t pushed);

/* The epoch's end; pc (may be NULL) is asked for every worker's figures
 * when there are summaries to write. */
void wk_watch_end(struct wk_watch *w, const struct wk_epoch_stats *s,
                  struct pc_client *pc, int n_ps);

/* Copy the history (for the page): up to max_pts points and max_ep
 * epochs; returns them in *n_pts, *n_ep. */
void wk_watch_history(struct wk_watch *w, struct wk_watch_point *pts,
                      int max_pts, int *n_pts, struct wk_watch_epoch *ep,
                      int max_ep, int *n_ep);

#endif
