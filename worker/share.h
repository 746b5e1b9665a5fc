/*
 * share.h — whether a worker's mirrored devices are faster together or its
 * fastest device alone.
 *
 * Splitting a batch by measured speed (replica.h) is right when every
 * device's time grows with its slice. It is not when a device has a fixed
 * cost per step that its share does not pay for — a CPU beside a GPU runs a
 * whole backward pass and a hand-off and a reduction for two samples of 64,
 * and the step waits for it (gpu:0,cpu ran at 0.51× gpu:0 alone at batch
 * 64 on an H200). So the step is timed as a whole, in seconds a sample,
 * and now and then the other arrangement is tried for a few steps: all the
 * devices when the fastest runs alone, the fastest alone when they all
 * share. The faster one is kept (the other must win by 3 %, so noise does
 * not flip it); each try that loses doubles the wait before the next (100
 * steps, up to 3,200 — or longer, so that tries cost at most 1 % of the
 * time, when a try was much slower than the arrangement in force), so a
 * device that does not pay costs almost nothing,
 * and one that would pay again (another slowed down, its load went away) is
 * given a share again at the next try.
 *
 * Pure bookkeeping: no devices, no clock, no threads; replica.c feeds it
 * each step's time and asks it which arrangement the next step uses. Used
 * by one thread at a time.
 */
#ifndef WK_SHARE_H
#define WK_SHARE_H

#define WK_SHARE_ALL (-1)       /* every device gets a share */

struct wk_share {
    int cur;                    /* arrangement in force: WK_SHARE_ALL or a device */
    int trial;                  /* arrangement being tried, or WK_SHARE_NONE */
    int trial_left;             /* steps of the try still to run */
    int trial_n;                /* of them timed (the first is not) */
    double trial_sum;           /* their seconds a sample */
    double cost;                /* seconds a sample of cur, moving average; 0 = none */
    long until;                 /* steps before the next try */
    long every;                 /* the wait after a try that lost */
    int recheck;                /* a try of all lost: try the fastest alone next */
};

/* Every device shares; the first try after 10 timed steps. */
void wk_share_init(struct wk_share *s);

/*
 * The arrangement of the next step: WK_SHARE_ALL, or the index of the one
 * device that takes the whole batch. speed[i] (n entries) is each device's
 * measured samples/s, 0 when not measured yet (no try before all are).
 */
int wk_share_next(struct wk_share *s, const double *speed, int n);

/*
 * The step of wk_share_next's arrangement took `seconds` for `samples`
 * samples (both > 0; otherwise ignored). Returns 1 when this ended a try
 * that changed the arrangement in force (for a log line), else 0.
 */
int wk_share_done(struct wk_share *s, double seconds, int samples);

#endif
