/*
 * exchange.h — one asynchronous push-and-pull on a thread of its own, so
 * that the trainer computes the next step while it travels (`hetps-worker
 * --overlap`, async mode: trainer.c).
 *
 * The trainer owns two parameter buffers and two gradient buffers: the
 * exchange reads one gradient buffer and writes one parameter buffer while
 * the next step computes on the others. Nothing else of the client is used
 * by the trainer while an exchange runs.
 */
#ifndef HETPS_WORKER_EXCHANGE_H
#define HETPS_WORKER_EXCHANGE_H

#include <pthread.h>

#include "client.h"

struct wk_exchange {
    struct pc_client *pc;
    struct pc_grad g;           /* what is pushed (g.data: not touched by the
                                   trainer until wk_exchange_wait) */
    float *params;              /* where the pulled values go */
    struct pc_step st;          /* in: clock, place; out: version */
    int rv;                     /* pc_async_step's result */
    char err[512];              /* its message, when rv is not HC_OK */
    int running;
    pthread_t thread;
};

/* Start pushing x->g and pulling into x->params (both set by the caller,
 * with x->pc and x->st's inputs). HC_OK, or HC_ERR_IO when no thread could
 * be started (nothing is running then). */
int wk_exchange_start(struct wk_exchange *x);

/* Wait for a started exchange; its result, its message back in hc_err_msg()
 * when it failed. HC_OK at once when none runs. */
int wk_exchange_wait(struct wk_exchange *x);

#endif
