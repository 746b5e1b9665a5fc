/*
 * overlap.h — push-and-pulls on a thread of their own, so that the trainer
 * computes while one travels: the next step (`hetps-worker --overlap`,
 * async mode: trainer.c), or the step's own backward, the push begun
 * before it (a gradient with pc_ready: its parts leave as backward
 * finishes them). One thread for the whole run, woken per step.
 *
 * The trainer owns two parameter buffers and two gradient buffers: an
 * exchange reads one gradient buffer and writes one parameter buffer while
 * the next step computes on the others. Nothing else of the client is used
 * by the trainer while an exchange runs.
 */
#ifndef HETPS_WORKER_EXCHANGE_H
#define HETPS_WORKER_EXCHANGE_H

#include <pthread.h>

#include "client.h"

struct wk_overlap {
    struct pc_client *pc;
    struct pc_grad g;           /* what is pushed (g.data: not touched by the
                                   trainer until wk_overlap_wait) */
    float *params;              /* where the pulled values go */
    struct pc_step st;          /* in: clock, place; out: version */
    int (*step)(struct pc_client *, const struct pc_grad *, float *,
                struct pc_step *); /* the exchange (NULL: pc_async_step) */
    int (*job)(void *arg);      /* not NULL: run job(job_arg) instead of
                                   step (a step with more around it: the
                                   trainer's rows push and pull ahead) */
    void *job_arg;
    int running;                /* one is asked for or under way */

    /* the thread's side */
    int rv;                     /* pc_async_step's result */
    char err[512];              /* its message, when rv is not HC_OK */
    int started, busy, quit;    /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
};

/* Push x->g and pull into x->params (both set by the caller, with x->pc
 * and x->st's inputs) on the exchange thread, started by the first call;
 * or, with x->job set, run x->job(x->job_arg) there.
 * HC_OK, or HC_ERR_IO when no thread could be started (nothing runs). */
int wk_overlap_start(struct wk_overlap *x);

/* Wait for a started exchange; its result, its message back in hc_err_msg()
 * when it failed. HC_OK at once when none runs. */
int wk_overlap_wait(struct wk_overlap *x);

/* Wait for any exchange and stop the thread (nothing to do when none was
 * started). */
void wk_overlap_stop(struct wk_overlap *x);

#endif
