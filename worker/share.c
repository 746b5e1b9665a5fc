/*
 * share.c — together or the fastest alone (see share.h).
 */
#include "share.h"

#define WK_SHARE_NONE (-2)      /* no try under way */
#define FIRST_TRY 10            /* timed steps before the first try */
#define TRY_STEPS 3             /* steps of a try; the first is not timed */
#define EVERY_MIN 100           /* wait after a try that won */
#define EVERY_MAX 3200          /* longest wait by doubling */
#define TRY_SHARE 0.01          /* what tries may cost: 1 % of the steps' time */
#define WAIT_MAX 100000         /* longest wait for an expensive try */
#define MARGIN 0.97             /* a try must be this much cheaper to win */
#define COST_EMA 0.3            /* weight of the newest step */

void wk_share_init(struct wk_share *s)
{
    *s = (struct wk_share){ .cur = WK_SHARE_ALL, .trial = WK_SHARE_NONE,
                            .until = FIRST_TRY, .every = EVERY_MIN };
}

static int fastest(const double *speed, int n)
{
    int i, best = 0;

    for (i = 1; i < n; i++)
        if (speed[i] > speed[best])
            best = i;
    return best;
}

int wk_share_next(struct wk_share *s, const double *speed, int n)
{
    int i, other;

    if (n < 2)
        return WK_SHARE_ALL;
    if (s->trial != WK_SHARE_NONE)
        return s->trial;
    if (s->until > 0 || s->cost <= 0.0)
        return s->cur;
    for (i = 0; i < n; i++)
        if (!(speed[i] > 0.0))
            return s->cur;      /* not all measured: nothing to compare */
    other = fastest(speed, n);
    if (s->cur != WK_SHARE_ALL && s->recheck) {
        s->recheck = 0;
        if (other == s->cur) {  /* still the fastest: nothing to try */
            s->until = s->every;
            return s->cur;
        }
    } else if (s->cur != WK_SHARE_ALL) {
        other = WK_SHARE_ALL;
    }
    s->trial = other;
    s->trial_left = TRY_STEPS;
    s->trial_n = 0;
    s->trial_sum = 0.0;
    return other;
}

/* The try is over: keep what was cheaper. */
static int end_trial(struct wk_share *s)
{
    double mean = s->trial_n ? s->trial_sum / s->trial_n : 0.0;
    int changed = 0;

    if (mean > 0.0 && mean < MARGIN * s->cost) {
        s->cur = s->trial;
        s->cost = mean;
        s->every = EVERY_MIN;
        changed = 1;
    } else {
        /* Alone still wins over all; a device other than cur may now be
         * the fastest (all were just timed): try it next. */
        double extra = s->cost > 0.0 ? (mean / s->cost - 1.0) * s->trial_n : 0.0;
        long floor;

        s->recheck = s->cur != WK_SHARE_ALL && s->trial == WK_SHARE_ALL;
        s->every = s->every * 2 > EVERY_MAX ? EVERY_MAX : s->every * 2;
        /* A try much slower than the arrangement in force (a GPU's tiny
         * steps against a CPU's share) waits long enough that trying costs
         * at most TRY_SHARE of the time. */
        floor = extra / TRY_SHARE < (double)WAIT_MAX ? (long)(extra / TRY_SHARE)
                                                      : WAIT_MAX;
        if (s->every < floor)
            s->every = floor;
    }
    s->until = s->recheck ? 0 : s->every;
    s->trial = WK_SHARE_NONE;
    return changed;
}

int wk_share_done(struct wk_share *s, double seconds, int samples)
{
    double c;

    if (!(seconds > 0.0) || samples < 1)
        return 0;
    c = seconds / samples;
    if (s->trial != WK_SHARE_NONE) {
        if (s->trial_left-- < TRY_STEPS) {
            s->trial_sum += c;
            s->trial_n++;
        }
        return s->trial_left > 0 ? 0 : end_trial(s);
    }
    s->cost = s->cost > 0.0 ? COST_EMA * c + (1.0 - COST_EMA) * s->cost : c;
    if (s->until > 0)
        s->until--;
    return 0;
}
