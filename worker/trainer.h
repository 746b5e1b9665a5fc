/*
 * trainer.h — a worker's training loop: pull → forward/backward → push,
 * epoch after epoch over this worker's shard of the data, and, on the
 * chief (worker 0), the variables' creation and an evaluation on the test
 * set at each epoch end, printed as Keras prints it. A job started again
 * on its stores (or a worker restarted) goes on where it was: sync from
 * the shards' step, async/ssp from the place in its data that the shards
 * recorded with the worker's last applied push (pc_place).
 *
 * The trainer sees the parameter servers only through worker/client.h and
 * computes only through worker/nn.h: it builds no message and touches no
 * backend directly.
 */
#ifndef WK_TRAINER_H
#define WK_TRAINER_H

#include <signal.h>
#include <stdint.h>

#include "client.h"
#include "cluster.h"
#include "model.h"

struct wk_watch;
struct wk_checkpoint;

struct wk_train_conf {
    const struct hc_cluster *cluster;
    const char *cluster_file;   /* async/ssp: re-read at each epoch start
                                   (elastic membership); NULL: fixed */
    int worker;                 /* this worker's index */
    const struct hc_model *model;
    int epochs;                 /* 0: the model's */
    int batch_size;             /* 0: the model's */
    int max_steps;              /* stop after this many steps (0: no limit) */
    int overlap;                /* async: push-and-pull each step on its own
                                   thread while the next computes (overlap.h) */
    int push_late;              /* push a step in parts only after the whole
                                   backward (--early-push off); 0: each part
                                   as soon as backward computed it */
    const char *data_dir;       /* NULL: Fashion-MNIST's default */
    const char *data;           /* NumPy arrays instead: "X.npy,Y.npy" or
                                   "F.npz"; several inputs "a=A.npy,b=B.npy,
                                   Y.npy" (data.h); NULL: data_dir */
    const char *validation_data; /* the test set with X.npy,Y.npy data */
    const char *devices;        /* reported to the shards */
    int n_threads;              /* BLAS threads of the CPU device (0: 1) */
    int eval;                   /* evaluate at epoch ends (chief default) */
    uint32_t block_elems;       /* 0: the layout default */
    double slowdown;            /* test only: stretch each step F times
                                   (stands in for a slower machine) */
    struct pc_opts client;      /* timeouts */
    struct wk_checkpoint *export_every_epoch; /* the chief's .npy weights
                                   after each epoch (checkpoint.h); NULL */
    const char *initial_weights; /* the chief creates the variables with
                                   these (wk_load_weights: a .keras or
                                   .weights.h5 file, a .npy directory);
                                   NULL: the model's initialisers */
    struct wk_watch *watch;     /* the reports (watch.h), opened by the
                                   caller: progress, metrics, summaries */
    volatile sig_atomic_t *stop; /* set (e.g. by a signal) to stop early */
};

/* Run the whole job for this worker. Returns HC_OK when every epoch ran
 * (or stop was set), else the failure with its message in hc_err_msg(). */
int wk_train(const struct wk_train_conf *c);

/* After joining: every shard that answers runs this worker's mode
 * (cluster->mode, from the cluster file or --mode); HC_ERR_CONFIG naming
 * the first that does not. */
int wk_check_mode(struct pc_client *pc, const struct hc_cluster *cluster);

#endif
