/*
 * overlap.c — push-and-pulls on a thread (overlap.h).
 */
#include "overlap.h"

#include <stdio.h>

#include "err.h"

static void *exchange_main(void *arg)
{
    struct wk_overlap *x = arg;

    pthread_mutex_lock(&x->mu);
    for (;;) {
        while (!x->busy && !x->quit)
            pthread_cond_wait(&x->cv, &x->mu);
        if (!x->busy)
            break;
        pthread_mutex_unlock(&x->mu);
        x->rv = x->job ? x->job(x->job_arg)
                       : (x->step ? x->step : pc_async_step)(x->pc, &x->g,
                                                             x->params, &x->st);
        if (x->rv != HC_OK)   /* hc_err is per thread: carry it back */
            snprintf(x->err, sizeof x->err, "%s", hc_err_msg());
        pthread_mutex_lock(&x->mu);
        x->busy = 0;
        pthread_cond_broadcast(&x->cv);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

int wk_overlap_start(struct wk_overlap *x)
{
    if (!x->started) {
        pthread_mutex_init(&x->mu, NULL);
        pthread_cond_init(&x->cv, NULL);
        x->busy = x->quit = 0;
        if (pthread_create(&x->thread, NULL, exchange_main, x) != 0) {
            pthread_cond_destroy(&x->cv);
            pthread_mutex_destroy(&x->mu);
            return hc_err_set(HC_ERR_IO, "cannot start the push-and-pull "
                              "thread of --overlap");
        }
        x->started = 1;
    }
    x->rv = HC_OK;
    x->err[0] = '\0';
    pthread_mutex_lock(&x->mu);
    x->busy = 1;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    x->running = 1;
    return HC_OK;
}

int wk_overlap_wait(struct wk_overlap *x)
{
    if (!x->running)
        return HC_OK;
    pthread_mutex_lock(&x->mu);
    while (x->busy)
        pthread_cond_wait(&x->cv, &x->mu);
    pthread_mutex_unlock(&x->mu);
    x->running = 0;
    if (x->rv != HC_OK)
        return hc_err_set(x->rv, "%s", x->err);
    return HC_OK;
}

void wk_overlap_stop(struct wk_overlap *x)
{
    if (!x->started)
        return;
    pthread_mutex_lock(&x->mu);
    while (x->busy)
        pthread_cond_wait(&x->cv, &x->mu);
    x->quit = 1;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    pthread_join(x->thread, NULL);
    pthread_cond_destroy(&x->cv);
    pthread_mutex_destroy(&x->mu);
    x->started = x->running = 0;
}
