/*
 * sync_schedule.h — which samples each synchronous step covers: steps per
 * epoch, the global batch of each step, and where a step lies in the job.
 * Pure arithmetic, no state beyond the numbers it was given.
 *
 * Step v of a sync job covers samples [t·G, t·G + G) of epoch e's order of
 * the whole training set, with v = e·steps_per_epoch + t and G the global
 * batch (the per-worker batch × the workers that started the job). Each
 * epoch has ceil(n / G) steps, the last one shorter when G does not divide
 * n — except that a last partial batch too small to give every worker a
 * sample is dropped (as tf.data's drop_remainder would).
 */
#ifndef WK_SYNC_SCHEDULE_H
#define WK_SYNC_SCHEDULE_H

#include <stdint.h>

struct wk_sync_schedule {
    long long n;                /* training samples */
    int workers;                /* workers the remainder is shared among */
    int epochs;
    long long G;                /* global batch */
    long long steps_per_epoch;  /* 0: the data set is too small to share */
    uint64_t total;             /* steps of the whole job */
};

/*
 * Fill *s for n samples, `workers` workers, global batch G and `epochs`
 * epochs. Returns HC_OK, or HC_ERR_INVAL (with a message) when n, workers,
 * G or epochs is below 1 (*s is then zeroed).
 */
int wk_sync_schedule_init(struct wk_sync_schedule *s, long long n, int workers,
                          long long G, int epochs);

/* Samples of step v: G, or fewer for the last step of an epoch; 0 when
 * steps_per_epoch is 0. */
long long wk_sync_batch_of(const struct wk_sync_schedule *s, uint64_t v);

/* Step v as (epoch, step within the epoch). steps_per_epoch must be > 0. */
void wk_sync_place(const struct wk_sync_schedule *s, uint64_t v, int *epoch,
                   long long *step);

/*
 * The job's global batch as the shards report it (a worker that joined a
 * running job learns it with its first pull): when job_batch is not 0 and
 * differs from s->G, cut the job's batches instead — G, steps per epoch
 * and total recomputed — and return 1; otherwise 0, *s unchanged.
 */
int wk_sync_rebatch(struct wk_sync_schedule *s, uint32_t job_batch);

#endif
