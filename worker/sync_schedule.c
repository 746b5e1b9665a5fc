/*
 * sync_schedule.c — the arithmetic of synchronous steps (see
 * sync_schedule.h).
 */
#include "sync_schedule.h"

#include <string.h>

#include "err.h"

/* Steps per epoch and total for s->n, s->workers, s->G, s->epochs. */
static void count_steps(struct wk_sync_schedule *s)
{
    long long rem = s->n % s->G;

    s->steps_per_epoch = (s->n + s->G - 1) / s->G;
    if (rem && rem < s->workers)
        s->steps_per_epoch = s->n / s->G;   /* drop_remainder */
    s->total = (uint64_t)s->steps_per_epoch * (uint64_t)s->epochs;
}

int wk_sync_schedule_init(struct wk_sync_schedule *s, long long n, int workers,
                          long long G, int epochs)
{
    memset(s, 0, sizeof *s);
    if (n < 1 || workers < 1 || G < 1 || epochs < 1)
        return hc_err_set(HC_ERR_INVAL, "sync schedule: %lld samples, %d "
                          "workers, global batch %lld, %d epochs: each must "
                          "be at least 1", n, workers, G, epochs);
    s->n = n;
    s->workers = workers;
    s->G = G;
    s->epochs = epochs;
    count_steps(s);
    return HC_OK;
}

long long wk_sync_batch_of(const struct wk_sync_schedule *s, uint64_t v)
{
    long long left;

    if (s->steps_per_epoch == 0)
        return 0;
    left = s->n - (long long)(v % (uint64_t)s->steps_per_epoch) * s->G;
    return left < s->G ? left : s->G;
}

void wk_sync_place(const struct wk_sync_schedule *s, uint64_t v, int *epoch,
                   long long *step)
{
    *epoch = (int)(v / (uint64_t)s->steps_per_epoch);
    *step = (long long)(v % (uint64_t)s->steps_per_epoch);
}

int wk_sync_rebatch(struct wk_sync_schedule *s, uint32_t job_batch)
{
    if (job_batch == 0 || (long long)job_batch == s->G)
        return 0;
    s->G = job_batch;
    count_steps(s);
    return 1;
}
