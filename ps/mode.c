/*
 * mode.c — the consistency modes (see mode.h).
 *
 * Shares of a synchronous step are fixed when the step starts, from what
 * is known so far of each worker k: its speed v_k (samples/s of its own
 * compute, reported with every push) and its fixed time per step lag_k
 * (measured here: from answering its pull to its push arriving, less its
 * slice at its speed — the round trip, slicing, encoding). Worker k gets
 * n_k = v_k (T − lag_k) samples, T chosen so that Σ n_k = G — every worker
 * then finishes at T — rounded by the largest-remainder rule (each at least
 * one when G allows), laid out in worker order, so every worker computes
 * the same slice boundaries for the same G. With equal lags this is
 * n_k = G · v_k / Σv. A step's assignment is recomputed lazily for each new
 * G (the last step of an epoch is shorter).
 *
 * Sitting out: a worker whose share does not pay for its round trip gets
 * none. Predicted: dropping k shortens T exactly when lag_k ≥ T without k
 * (T with k is a weighted mean of that T and lag_k), so such a worker gets
 * nothing, not even the minimum of one sample. Measured: what the
 * prediction leaves out (a second push to add up, one more reply, a slow
 * worker's fixed costs per batch, two processes on the same cores) shows
 * in the step's own time, from its first answer to the next step's, per
 * sample. As worker/share.c does for devices, the arrangement in force is
 * tried now and then against one worker flipped (the slowest with a share
 * left out, or the fastest sitting out brought back): TRY_STEPS steps,
 * flipped and as in force by turns, the means of each compared (a share
 * must save MARGIN to be given or kept); a lost try doubles the wait, and
 * tries cost at most TRY_SHARE of the time. A
 * worker with no share stays a member: it pulls the next version, and that
 * pull tells every shard not to wait for it (ps_mode_sits_out). Only
 * ps:0's slices are used by the workers; the other shards wait for the
 * pushes and the sitting out they see, so their own cuts do not matter.
 */
#include "mode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

#define FIRST_TRY 10            /* timed steps before the first try */
#define TRY_STEPS 12            /* steps of a try: flipped and in force, by turns */
#define EVERY_MIN 100           /* wait after a try that won */
#define EVERY_MAX 3200          /* longest wait by doubling */
#define TRY_SHARE 0.01          /* what tries may cost: 1 % of the steps' time */
#define WAIT_MAX 100000         /* longest wait for an expensive try */
#define MARGIN 0.97             /* what a share must save to be given */
#define COST_EMA 0.3            /* weight of the newest step */

/* A step's shares were cut with the arrangement in force, outside a try
 * or in one, or with the try's worker flipped. */
enum step_tag { TAG_NORMAL, TAG_TRY_KEEP, TAG_TRY_FLIP };

struct wstate {
    int live;
    uint64_t from;              /* first version it takes part in */
    int pushed;                 /* sync: contributed to the current step */
    uint64_t clock;             /* pushes accepted */
    float speed;                /* samples/s, last reported */
    uint64_t late;
    uint32_t share, offset;     /* sync: of the current assignment */
    /* sync: the worker's fixed time per step (s) — its round trip and
     * whatever it does besides computing its slice — measured here as the
     * time from answering its pull to its push arriving, less share/speed. */
    double answered_at;         /* when its current slice went out, 0: none */
    uint32_t answered_share;    /* that slice's samples */
    double lag;                 /* moving average; valid when lag_n > 0 */
    uint32_t lag_n;
    int out;                    /* sync: sits out — given no share */
    int sat_out;                /* sync: pulled past the open step without
                                   pushing to it: not waited for */
    int recalled;               /* sync: sat out, but nobody else is left
                                   to push the step: its pull is answered
                                   now, with a share */
};

/* sync with balance: who is given a share (see "Sitting out" above). */
struct seat {
    int trial;                  /* worker under a try, -1: none */
    int trial_in;               /* the try gives it a share (1) or none (0) */
    int trial_left;             /* steps still to cut under the try */
    int n_flip, n_keep;         /* its steps measured, each way */
    double flip_c[TRY_STEPS], keep_c[TRY_STEPS]; /* their s per sample */
    long until, every;          /* steps before the next try; back-off */
    double cost;                /* s per sample in force (EMA); 0: unknown */
    int toggle;                 /* alternates try-in and try-out */
    uint64_t cut_version;       /* the step whose shares were last cut */
    enum step_tag cut_tag;      /*   under the try or not */
    uint32_t cut_G;
    enum step_tag prev_tag;     /* the step before: its tag, batch and */
    uint32_t prev_G;            /*   first answer (0: none) */
    double prev_start;
    int fresh;                  /* no answer yet in the open step */
};

struct ps_mode {
    struct ps_mode_conf c;
    int n;                      /* entries in w */
    struct wstate *w;
    uint64_t step_samples;      /* sync: samples accumulated this step */
    int step_pushes;
    int step_sat;               /* sync: workers that sat it out */
    double step_opened;         /* sync: when its first push arrived */
    uint32_t assigned_for;      /* G of the current assignment, 0 = none */
    uint32_t job_batch;         /* sync: the job's full global batch */
    struct seat seat;
    struct ps_mode_stats st;
};

static int grow(struct ps_mode *s, int worker)
{
    struct wstate *w;

    if (worker < s->n)
        return 0;
    w = realloc(s->w, (size_t)(worker + 1) * sizeof *w);
    if (!w)
        return -1;
    memset(w + s->n, 0, (size_t)(worker + 1 - s->n) * sizeof *w);
    s->w = w;
    s->n = worker + 1;
    return 0;
}

int ps_mode_new(struct ps_mode **out, const struct ps_mode_conf *c)
{
    struct ps_mode *s = calloc(1, sizeof *s);

    *out = NULL;
    if (!s || (c->n_workers > 0 && grow(s, c->n_workers - 1))) {
        free(s);
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    }
    s->c = *c;
    s->seat = (struct seat){ .trial = -1, .until = FIRST_TRY,
                             .every = EVERY_MIN, .cut_version = UINT64_MAX,
                             .fresh = 1 };
    *out = s;
    return HC_OK;
}

void ps_mode_free(struct ps_mode *s)
{
    if (!s)
        return;
    free(s->w);
    free(s);
}

int ps_mode_holds_pulls(const struct ps_mode *s)
{
    return s->c.mode != HC_MODE_ASYNC;
}

int ps_mode_in_steps(const struct ps_mode *s)
{
    return s->c.mode == HC_MODE_SYNC;
}

int ps_mode_lends_messages(const struct ps_mode *s)
{
    return s->c.mode == HC_MODE_SYNC;
}

static void recall_if_alone(struct ps_mode *s, uint64_t version);

void ps_mode_set_balance(struct ps_mode *s, int on)
{
    s->c.balance = on;
}

void ps_mode_member(struct ps_mode *s, int worker, int live)
{
    if (worker < 0 || grow(s, worker))
        return;
    /* A gradient already pushed stays in the step: it was computed for it. */
    s->w[worker].live = live;
    if (live)
        s->w[worker].from = 0;
    else if (s->c.mode == HC_MODE_SYNC && s->seat.cut_version != UINT64_MAX)
        recall_if_alone(s, s->seat.cut_version);
}

static uint64_t min_live_clock(const struct ps_mode *s);

uint64_t ps_mode_join(struct ps_mode *s, int worker, uint64_t version)
{
    uint64_t lo;

    if (worker < 0 || grow(s, worker))
        return version + 1;
    if (s->w[worker].live)
        return s->w[worker].from;
    /* ssp: a newcomer starts level with the slowest, not at 0, or it would
     * hold everyone back until it caught up. */
    lo = min_live_clock(s);
    if (s->c.mode == HC_MODE_SSP && lo != UINT64_MAX && s->w[worker].clock < lo)
        s->w[worker].clock = lo;
    s->w[worker].live = 1;
    /* In sync, a step nobody has pushed to nor been given a slice of can
     * still take it in; otherwise it joins at the next step boundary. (A
     * lone worker coming back must not wait for a step no one else will
     * finish.) */
    s->w[worker].from = s->c.mode == HC_MODE_SYNC && s->step_pushes == 0 &&
                                s->assigned_for == 0
                            ? version : version + 1;
    s->w[worker].pushed = 0;
    s->w[worker].out = 0;       /* back in: measured again */
    s->w[worker].sat_out = 0;
    return s->w[worker].from;
}

uint64_t ps_mode_from(const struct ps_mode *s, int worker)
{
    if (worker < 0 || worker >= s->n || !s->w[worker].live)
        return UINT64_MAX;
    return s->w[worker].from;
}

void ps_mode_start_at(struct ps_mode *s, int worker, uint64_t version)
{
    if (worker < 0 || worker >= s->n || !s->w[worker].live ||
        s->w[worker].pushed || version <= s->w[worker].from)
        return;
    s->w[worker].from = version;
    /* Out of the open step now: those that sat it out for it may be all
     * that is left (a restarted worker's second join, after the others
     * pulled past a step whose share it had been given). */
    if (s->c.mode == HC_MODE_SYNC && s->seat.cut_version != UINT64_MAX)
        recall_if_alone(s, s->seat.cut_version);
}

uint32_t ps_mode_job_batch(struct ps_mode *s, uint32_t proposed)
{
    if (!s->job_batch)
        s->job_batch = proposed;
    return s->job_batch;
}

/* Takes part in the step at `version`. */
static int takes_part(const struct wstate *w, uint64_t version)
{
    return w->live && w->from <= version;
}

/* The step at `version` waits for its push: taking part, not sat out. */
static int awaited(const struct wstate *w, uint64_t version)
{
    return takes_part(w, version) && !w->sat_out;
}

int ps_mode_takes_over(const struct ps_mode *s, int worker, uint64_t version)
{
    const struct wstate *w;

    if (s->c.mode != HC_MODE_SYNC || worker < 0 || worker >= s->n)
        return 0;
    w = &s->w[worker];
    return awaited(w, version) && !w->pushed && s->assigned_for &&
           s->seat.cut_version == version && w->share > 0;
}

/* A push of the current step arrived at `now`: learn the worker's lag. */
static void learn_lag(struct wstate *w, double now)
{
    double cycle, lag;

    if (w->answered_at <= 0 || !w->answered_share || !(w->speed > 0) ||
        now < w->answered_at)
        return;
    cycle = now - w->answered_at;
    lag = cycle - (double)w->answered_share / w->speed;
    if (lag < 0)
        lag = 0;
    w->lag = w->lag_n ? 0.8 * w->lag + 0.2 * lag : lag;
    w->lag_n++;
    w->answered_at = 0;
}

enum ps_push_verdict ps_mode_push(struct ps_mode *s, int worker,
                                  uint64_t base_version, uint64_t version,
                                  uint32_t samples, float samples_per_s,
                                  double now)
{
    struct wstate *w;

    if (worker < 0 || grow(s, worker)) {
        hc_err_set(HC_ERR_NOMEM, "out of memory");
        return PS_PUSH_REFUSE;
    }
    w = &s->w[worker];
    if (samples_per_s > 0 && isfinite(samples_per_s))
        w->speed = samples_per_s;
    switch (s->c.mode) {
    case HC_MODE_SYNC:
        if (base_version < version) {
            w->late++;
            s->st.late++;
            return PS_PUSH_LATE;
        }
        if (base_version > version) {
            hc_err_set(HC_ERR_STALE, "gradient computed at version %llu but "
                       "this shard is at %llu: pull first",
                       (unsigned long long)base_version,
                       (unsigned long long)version);
            return PS_PUSH_REFUSE;
        }
        if (w->pushed) {
            hc_err_set(HC_ERR_STALE, "worker:%d already pushed for step %llu",
                       worker, (unsigned long long)version);
            return PS_PUSH_REFUSE;
        }
        learn_lag(w, now);
        if (s->step_pushes == 0 && s->step_sat == 0)
            s->step_opened = now;
        w->pushed = 1;
        w->clock++;
        s->step_pushes++;
        s->step_samples += samples;
        return PS_PUSH_ACCUMULATE;
    case HC_MODE_ASYNC:
        if (s->c.max_staleness && base_version + s->c.max_staleness < version) {
            s->st.stale++;
            hc_err_set(HC_ERR_STALE, "gradient computed at version %llu is %llu "
                       "versions old; the bound is %llu (--max-staleness)",
                       (unsigned long long)base_version,
                       (unsigned long long)(version - base_version),
                       (unsigned long long)s->c.max_staleness);
            return PS_PUSH_REFUSE;
        }
        w->clock++;
        return PS_PUSH_APPLY;
    default:
        w->clock++;
        return PS_PUSH_APPLY;
    }
}

int ps_mode_step_ready(const struct ps_mode *s, uint64_t version,
                       uint64_t *total)
{
    int i, need = 0, missing = 0;

    for (i = 0; i < s->n; i++) {
        if (awaited(&s->w[i], version)) {
            need++;
            missing += !s->w[i].pushed;
        }
    }
    *total = s->step_samples;
    if (s->step_pushes == 0)
        return 0;
    /* Every live worker, less the backups and those that sat the step out
     * (ps_mode_sits_out), must have pushed. */
    return missing <= s->c.backup || need == 0;
}

int ps_mode_missing(const struct ps_mode *s, uint64_t version, int *workers,
                    int cap)
{
    int i, n = 0;

    if (s->step_pushes == 0 && s->step_sat == 0)
        return 0;
    for (i = 0; i < s->n; i++)
        if (awaited(&s->w[i], version) && !s->w[i].pushed) {
            if (n < cap)
                workers[n] = i;
            n++;
        }
    return n;
}

void ps_mode_step_done(struct ps_mode *s)
{
    int i;

    for (i = 0; i < s->n; i++) {
        s->w[i].pushed = 0;
        s->w[i].sat_out = 0;
        s->w[i].recalled = 0;
    }
    s->step_pushes = 0;
    s->step_sat = 0;
    s->step_samples = 0;
    s->assigned_for = 0;
    s->seat.fresh = 1;
}

int ps_mode_sits_out(struct ps_mode *s, int worker, uint64_t min_version,
                     uint64_t version, double now)
{
    struct wstate *w;

    if (s->c.mode != HC_MODE_SYNC || worker < 0 || worker >= s->n ||
        min_version <= version)
        return 0;
    w = &s->w[worker];
    if (!takes_part(w, version) || w->pushed || w->sat_out)
        return 0;
    /* It is kept waiting by the step as much as one that pushed. */
    if (s->step_pushes == 0 && s->step_sat == 0)
        s->step_opened = now;
    w->sat_out = 1;
    s->step_sat++;
    recall_if_alone(s, version);
    return 1;
}

/* The open step has no push and nobody left to push it but workers that
 * sat it out (the one with a share left or died): they are recalled — a
 * new cut gives them shares, and their pulls are answered at this version
 * (ps_mode_pull_ready) — or the step would wait for ever. When those
 * still in it were all handed nothing of its cut (the shares left with
 * the others), the step is cut again for their next pull: they need not
 * ever pull past it (another shard a step behind, that lost the dead
 * worker's push, answers them there and waits for theirs: restart.sh's
 * livelock). Only cut again, not recalled: the workers compute ps:0's
 * cut; on another shard one handed nothing there may hold a share of
 * ps:0's and push. */
static void recall_if_alone(struct ps_mode *s, uint64_t version)
{
    int i, sat = 0, in = 0, shared = 0;

    if (s->step_pushes)
        return;
    for (i = 0; i < s->n; i++) {
        if (!takes_part(&s->w[i], version))
            continue;
        if (s->w[i].sat_out) {
            sat++;
        } else {
            in++;
            shared += s->w[i].share > 0;
        }
    }
    if (in) {
        if (!shared && s->assigned_for && s->seat.cut_version == version) {
            s->seat.trial = -1;
            s->assigned_for = 0;
        }
        return;
    }
    if (!sat)
        return;
    for (i = 0; i < s->n; i++) {
        if (takes_part(&s->w[i], version) && s->w[i].sat_out) {
            s->w[i].sat_out = 0;
            s->w[i].out = 0;
            s->w[i].recalled = 1;
        }
    }
    s->step_sat = 0;
    s->seat.trial = -1;
    s->assigned_for = 0;
}

static uint64_t min_live_clock(const struct ps_mode *s)
{
    uint64_t m = UINT64_MAX;
    int i;

    for (i = 0; i < s->n; i++)
        if (s->w[i].live && s->w[i].clock < m)
            m = s->w[i].clock;
    return m;
}

int ps_mode_pull_ready(struct ps_mode *s, int worker, uint64_t min_version,
                       uint64_t clock, uint64_t version)
{
    uint64_t lo;

    switch (s->c.mode) {
    case HC_MODE_SYNC:
        if (worker < 0 || worker >= s->n)
            return version >= min_version;
        return (version >= min_version || s->w[worker].recalled) &&
               version >= s->w[worker].from;
    case HC_MODE_SSP:
        lo = min_live_clock(s);
        if (lo == UINT64_MAX || clock <= lo)
            return 1;
        if (clock - lo > (uint64_t)s->c.staleness)
            return 0;
        if (clock - lo > s->st.max_ahead)
            s->st.max_ahead = (uint32_t)(clock - lo);
        (void)worker;
        return 1;
    default:
        return 1;
    }
}

/* The try in force on the step being cut flips worker i: -1 it is left
 * out, 1 it is brought in, 0 neither. */
static int flipped(const struct ps_mode *s, int i)
{
    if (s->seat.cut_tag != TAG_TRY_FLIP || s->seat.trial != i)
        return 0;
    return s->seat.trial_in ? 1 : -1;
}

/*
 * What each worker of the step should compute, in samples, before rounding
 * (-1: nothing, not even the minimum of one): the split that makes every
 * worker finish at the same moment T, each taking lag_k + n_k / v_k (its
 * fixed time per step, then its slice at its speed). Σ n_k = G gives
 * T = (G + Σ v_k lag_k) / Σ v_k over the workers with lag_k < T; one whose
 * fixed time alone is past T would make the step longer, not shorter:
 * it sits out (marked, so that a try brings it back now and then). A
 * worker sitting out, or left out by a try, gets nothing; one brought in
 * by a try gets what the split gives it, at least the minimum. Equal
 * shares with balance off, or until every worker has reported a speed.
 */
static void ideal_shares(struct ps_mode *s, uint32_t G, uint64_t version,
                         double *want)
{
    int i, n = 0, known = 0, changed, active = 0;
    double sv, svl, T = 0;

    for (i = 0; i < s->n; i++) {
        want[i] = -1;           /* not taking part */
        if (!takes_part(&s->w[i], version))
            continue;
        n++;
        known += s->w[i].speed > 0;
        want[i] = 0;
    }
    if (!n)
        return;
    if (!s->c.balance || known < n) {
        for (i = 0; i < s->n; i++)
            if (want[i] >= 0)
                want[i] = (double)G / n;
        return;
    }
    for (i = 0; i < s->n; i++) {
        int f = flipped(s, i);

        if (want[i] < 0)
            continue;
        /* 1: in the active set; -1: no share */
        want[i] = f > 0 || (!s->w[i].out && f == 0) ? 1 : -1;
        active += want[i] == 1;
    }
    if (!active) {              /* those with shares left: all back in */
        for (i = 0; i < s->n; i++) {
            if (want[i] == -1 && takes_part(&s->w[i], version)) {
                want[i] = 1;
                s->w[i].out = 0;
            }
        }
    }
    do {
        sv = svl = 0;
        for (i = 0; i < s->n; i++) {
            if (want[i] == 1) {
                double lag = s->w[i].lag_n ? s->w[i].lag : 0;

                sv += s->w[i].speed;
                svl += s->w[i].speed * lag;
            }
        }
        if (!(sv > 0))
            return;             /* nobody left: shares stay as they are */
        T = (G + svl) / sv;
        changed = 0;
        for (i = 0; i < s->n; i++) {
            if (want[i] == 1 && s->w[i].lag_n && s->w[i].lag >= T &&
                flipped(s, i) <= 0) {
                want[i] = -1;   /* its round trip alone is past the step */
                s->w[i].out = 1;
                changed = 1;
            }
        }
    } while (changed);
    for (i = 0; i < s->n; i++) {
        if (want[i] == 1) {
            double lag = s->w[i].lag_n ? s->w[i].lag : 0;

            want[i] = s->w[i].speed * (T - lag);
            if (want[i] < 0)
                want[i] = 0;    /* a try's worker: the minimum, below */
        }
    }
}

/* A try: flip the slowest worker with a share out of the step (the last
 * of equals), or bring the fastest sitting out back, alternating when both
 * are possible. */
static void start_try(struct ps_mode *s, uint64_t version)
{
    int i, in = 0, slow_in = -1, fast_out = -1;

    for (i = 0; i < s->n; i++) {
        const struct wstate *w = &s->w[i];

        if (!takes_part(w, version))
            continue;
        if (!(w->speed > 0))
            return;             /* not all measured: nothing to compare */
        if (w->out) {
            if (fast_out < 0 || w->speed > s->w[fast_out].speed)
                fast_out = i;
        } else {
            in++;
            if (slow_in < 0 || w->speed <= s->w[slow_in].speed)
                slow_in = i;
        }
    }
    if (in < 2)
        slow_in = -1;           /* the last worker with a share stays */
    if (slow_in < 0 && fast_out < 0)
        return;
    s->seat.toggle = !s->seat.toggle;
    if (fast_out >= 0 && (slow_in < 0 || s->seat.toggle)) {
        s->seat.trial = fast_out;
        s->seat.trial_in = 1;
    } else {
        s->seat.trial = slow_in;
        s->seat.trial_in = 0;
    }
    s->seat.trial_left = TRY_STEPS;
    s->seat.n_flip = s->seat.n_keep = 0;
}

/* The shares of the step at `version` are about to be cut for the first
 * time: whether a try is on for it. */
static void begin_cut(struct ps_mode *s, uint64_t version)
{
    struct seat *t = &s->seat;

    t->cut_version = version;
    t->cut_tag = TAG_NORMAL;
    if (s->c.mode != HC_MODE_SYNC || !s->c.balance)
        return;
    if (t->trial >= 0 && !takes_part(&s->w[t->trial], version))
        t->trial = -1;          /* it left: the try is void */
    if (t->trial < 0 && t->until <= 0 && t->cost > 0)
        start_try(s, version);
    if (t->trial >= 0 && t->trial_left > 0) {
        t->cut_tag = t->trial_left % 2 ? TAG_TRY_KEEP : TAG_TRY_FLIP;
        t->trial_left--;
    }
}

/* Shares of G among the workers of the step at `version` (ideal_shares,
 * rounded by largest remainder; each with a share at least one sample
 * when G allows). */
static void assign(struct ps_mode *s, uint32_t G, uint64_t version)
{
    double want[64], *wp = want;
    char part[64], *pp = part;
    uint32_t given = 0, off = 0;
    int i, n = 0;

    if (s->n > 64) {
        wp = calloc((size_t)s->n, sizeof *wp);
        pp = calloc((size_t)s->n, 1);
        if (!wp || !pp)
            goto out;
    }
    if (s->seat.cut_version != version)
        begin_cut(s, version);
    s->seat.cut_G = G;
    ideal_shares(s, G, version, wp);
    for (i = 0; i < s->n; i++) {
        pp[i] = wp[i] >= 0;
        n += pp[i];
    }
    for (i = 0; i < s->n; i++) {
        s->w[i].share = 0;
        if (!pp[i])
            continue;
        s->w[i].share = (uint32_t)wp[i];
        if (s->w[i].share == 0 && G >= (uint32_t)n)
            s->w[i].share = 1;
        given += s->w[i].share;
    }
    while (given < G && n) {      /* largest remainder first, ties by index */
        int best = -1;
        double br = -1e300;

        for (i = 0; i < s->n; i++) {
            double r;

            if (!pp[i])
                continue;
            r = wp[i] - s->w[i].share;
            if (r > br) {
                br = r;
                best = i;
            }
        }
        s->w[best].share++;
        wp[best] -= 1.0;          /* do not pick it again first */
        given++;
    }
    while (given > G) {           /* minimums overshot: take from the largest */
        int best = -1;

        for (i = 0; i < s->n; i++)
            if (pp[i] && s->w[i].share > 1 &&
                (best < 0 || s->w[i].share > s->w[best].share))
                best = i;
        if (best < 0)
            break;
        s->w[best].share--;
        given--;
    }
    for (i = 0; i < s->n; i++) {
        s->w[i].offset = off;
        off += s->w[i].share;
    }
    s->assigned_for = G;
out:
    if (wp != want)
        free(wp);
    if (pp != part)
        free(pp);
}

void ps_mode_assign(struct ps_mode *s, int worker, uint32_t global_batch,
                    uint64_t version, uint32_t *offset, uint32_t *count)
{
    if (worker < 0 || worker >= s->n || !takes_part(&s->w[worker], version)) {
        *offset = *count = 0;
        return;
    }
    if (s->assigned_for != global_batch)
        assign(s, global_batch, version);
    *offset = s->w[worker].offset;
    *count = s->w[worker].share;
}

/* The mean of n values. */
static double mean(const double *v, int n)
{
    double sum = 0.0;
    int i;

    for (i = 0; i < n; i++)
        sum += v[i];
    return n ? sum / n : 0.0;
}

/* The try is over: keep what was cheaper (as worker/share.c), by the
 * mean of its steps each way. Its steps took turns, so a machine slowed by
 * others for a while slows both alike. A mean, not a median: a slow
 * worker's hiccups (a few ms of its own, 20 times over when it is 20 times
 * slower) hold the whole step, one step in several, and they are part of
 * what its share costs. */
static void end_try(struct seat *t, struct wstate *w)
{
    double kept = mean(t->keep_c, t->n_keep);
    double tried = mean(t->flip_c, t->n_flip);

    /* A share must pay: bringing a worker in wins when that is MARGIN
     * cheaper, leaving it out unless keeping it in was MARGIN cheaper. */
    if (tried > 0.0 && (t->trial_in ? tried < MARGIN * kept
                                    : MARGIN * tried <= kept)) {
        w->out = !t->trial_in;
        t->cost = tried;
        t->every = EVERY_MIN;
    } else {
        /* A try much dearer than the arrangement in force waits long
         * enough that trying costs at most TRY_SHARE of the time. */
        double extra = kept > 0.0 ? (tried / kept - 1.0) * t->n_flip : 0.0;
        long floor = extra / TRY_SHARE < (double)WAIT_MAX
                         ? (long)(extra / TRY_SHARE) : WAIT_MAX;

        t->every = t->every * 2 > EVERY_MAX ? EVERY_MAX : t->every * 2;
        if (t->every < floor)
            t->every = floor;
    }
    t->until = t->every;
    t->trial = -1;
}

/* A step's time per sample, c, answer to answer, cut under `tag`. */
static void step_measured(struct ps_mode *s, double c, enum step_tag tag)
{
    struct seat *t = &s->seat;

    if (tag == TAG_NORMAL) {
        t->cost = t->cost > 0.0 ? COST_EMA * c + (1.0 - COST_EMA) * t->cost
                                : c;
        if (t->until > 0)
            t->until--;
        return;
    }
    if (t->trial < 0)
        return;                 /* void */
    if (tag == TAG_TRY_FLIP)
        t->flip_c[t->n_flip++] = c;
    else
        t->keep_c[t->n_keep++] = c;
    if (t->n_flip + t->n_keep == TRY_STEPS)
        end_try(t, &s->w[t->trial]);
}

void ps_mode_answered(struct ps_mode *s, int worker, uint32_t count,
                      double now)
{
    struct seat *t = &s->seat;

    if (worker < 0 || worker >= s->n)
        return;
    s->w[worker].answered_at = count ? now : 0;
    s->w[worker].answered_share = count;
    s->w[worker].recalled = 0;
    if (!t->fresh)
        return;
    /* The open step's first answer ends the step before. */
    t->fresh = 0;
    if (t->prev_start > 0 && t->prev_G && now > t->prev_start)
        step_measured(s, (now - t->prev_start) / t->prev_G, t->prev_tag);
    t->prev_start = now;
    t->prev_tag = t->cut_tag;
    t->prev_G = t->cut_G;
}

int ps_mode_waiting_for(const struct ps_mode *s, uint64_t version, char *buf,
                        size_t len, double *since)
{
    size_t at = 0;
    int i, n = 0;

    if (len)
        buf[0] = '\0';
    *since = s->step_opened;
    if (s->c.mode != HC_MODE_SYNC || (s->step_pushes == 0 && s->step_sat == 0))
        return 0;
    for (i = 0; i < s->n; i++) {
        if (!awaited(&s->w[i], version) || s->w[i].pushed)
            continue;
        if (at < len) {
            int k = snprintf(buf + at, len - at, "%sworker:%d", n ? ", " : "",
                             i);

            at += k > 0 ? (size_t)k : 0;
        }
        n++;
    }
    return n;
}

void ps_mode_stats(const struct ps_mode *s, struct ps_mode_stats *st)
{
    *st = s->st;
}

void ps_mode_worker(const struct ps_mode *s, int worker, uint64_t *clock,
                    float *samples_per_s, uint32_t *share, uint64_t *late,
                    float *lag_ms)
{
    if (worker < 0 || worker >= s->n) {
        *clock = 0;
        *samples_per_s = 0;
        *share = 0;
        *late = 0;
        *lag_ms = 0;
        return;
    }
    *lag_ms = s->w[worker].lag_n ? (float)(1e3 * s->w[worker].lag) : 0.0f;
    *clock = s->w[worker].clock;
    *samples_per_s = s->w[worker].speed;
    *share = s->w[worker].share;
    *late = s->w[worker].late;
}

int ps_mode_expected(const struct ps_mode *s, uint64_t version)
{
    int i, n = 0;

    if (s->c.mode != HC_MODE_SYNC || s->c.backup > 0)
        return 0;
    for (i = 0; i < s->n; i++)
        n += awaited(&s->w[i], version);
    return n;
}
