/*
 * exchange.c — one asynchronous push-and-pull on a thread (exchange.h).
 */
#include "exchange.h"

#include <stdio.h>

#include "err.h"

static void *exchange_main(void *arg)
{
    struct wk_exchange *x = arg;

    x->rv = pc_async_step(x->pc, &x->g, x->params, &x->st);
    if (x->rv != HC_OK)   /* hc_err is per thread: carry the message back */
        snprintf(x->err, sizeof x->err, "%s", hc_err_msg());
    return NULL;
}

int wk_exchange_start(struct wk_exchange *x)
{
    x->rv = HC_OK;
    x->err[0] = '\0';
    if (pthread_create(&x->thread, NULL, exchange_main, x) != 0)
        return hc_err_set(HC_ERR_IO, "cannot start the push-and-pull thread "
                          "of --overlap");
    x->running = 1;
    return HC_OK;
}

int wk_exchange_wait(struct wk_exchange *x)
{
    if (!x->running)
        return HC_OK;
    pthread_join(x->thread, NULL);
    x->running = 0;
    if (x->rv != HC_OK)
        return hc_err_set(x->rv, "%s", x->err);
    return HC_OK;
}
