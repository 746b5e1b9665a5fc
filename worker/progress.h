/*
 * progress.h — what a worker prints while it trains, as Keras's fit does.
 *
 * On a terminal (verbose 1): "Epoch 3/10", then a live bar redrawn in place,
 *   123/469 [=======>......................] - ETA: 2s - loss: 0.31 - accuracy: 0.89 - 24012 samples/s
 * ending, when the epoch is done, as
 *   469/469 [==============================] - 3s 6ms/step - loss: … - val_accuracy: … - 24012 samples/s
 * (val_loss and val_accuracy, then the model's other metrics in its order:
 * "- val_auc: 0.9731 - val_sparse_top_k_categorical_accuracy: 0.9990").
 * Not on a terminal (logs, CI, Docker; verbose 1): one plain line every
 * interval_s seconds and the epoch's summary line, never '\r':
 *   Epoch 3/10 - 123/469 - ETA: 2s - loss: 0.3101 - accuracy: 0.8912 - 24012 samples/s
 *   Epoch 3/10 - 469/469 - 3.1s 6ms/step - loss: … - val_accuracy: … - 24012 samples/s
 * verbose 2: only the summary lines; verbose 0: nothing.
 *
 * The caller passes the time (seconds of a monotonic clock) so the output
 * is a pure function of the calls: tests drive it with their own clock.
 * One thread uses one wk_progress; it allocates nothing.
 */
#ifndef WK_PROGRESS_H
#define WK_PROGRESS_H

#include <stdio.h>

#include "eval_metric.h"

/* What an epoch ended with (the summary line; also the summaries'). */
struct wk_epoch_stats {
    int epoch;              /* 0-based */
    long steps;             /* steps this worker computed in the epoch */
    long samples;           /* samples of those steps */
    double seconds;         /* the epoch's wall time */
    double loss, acc;       /* mean over this worker's samples */
    int has_val;            /* the chief evaluated the test set */
    double val_loss, val_acc;
    double val_metric[HC_MODEL_MAX_METRICS]; /* the model's metrics other
                                               than accuracy, by index
                                               (wk_evaluate_metrics) */
};

struct wk_progress {
    FILE *out;
    int verbose;            /* 0, 1 or 2, as Keras's fit */
    int tty;                /* out is a terminal: redraw the bar in place */
    int epochs;             /* of the job, for "Epoch e/E" */
    const struct hc_eval_metric *metrics; /* the model's (n_metrics), or
                                             NULL: val_accuracy only */
    int n_metrics;
    double interval_s;      /* not a terminal: seconds between lines */
    /* the epoch in progress */
    int epoch;
    long target;            /* steps in the epoch (0: unknown) */
    long step, samples, correct;
    double loss_sum;        /* sum of loss × samples */
    double t0, t_last;      /* epoch start, last line/redraw */
    int width;              /* characters of the last bar drawn */
};

/* Set p up to print on out. tty: out is a terminal; interval_s (> 0): the
 * plain lines' period when it is not (Keras's is every 0.05 s on a
 * terminal, which this follows). */
void wk_progress_init(struct wk_progress *p, FILE *out, int verbose, int tty,
                      int epochs, double interval_s);

/* Epoch `epoch` (0-based) of target steps starts at time now. */
void wk_progress_begin(struct wk_progress *p, int epoch, long target,
                       double now);

/* Step `step` (1-based within the epoch) is done: n samples, their mean
 * loss and the number of them classified right. Draws the bar when it is
 * due. */
void wk_progress_step(struct wk_progress *p, long step, int n, double loss,
                      long correct, double now);

/* The epoch is done: the summary line (the final bar on a terminal). */
void wk_progress_end(struct wk_progress *p, const struct wk_epoch_stats *s);

/* " - <prefix><name>: 0.9123" for each of the n metrics ms other than
 * accuracy, v[i] the value of ms[i], into buf (always terminated); returns
 * the characters written. Prefix "val_" for the epoch's evaluation. */
size_t wk_progress_metrics(char *buf, size_t len, const char *prefix,
                           const struct hc_eval_metric *ms, int n,
                           const double *v);

/* Keras's ETA text for s seconds: "2s", "1:05", "1:02:03". */
void wk_progress_eta(double s, char *buf, size_t len);

#endif
